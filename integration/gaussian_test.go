package integration

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/dpref"
)

// TestGaussian_EndToEnd sends powerQuery 10 times under the Gaussian
// mechanism (ε = 1.5, δ = 10⁻⁶ split over 3 measures: ε_m = 0.5,
// δ_m = δ/3; one changed cell) and tests each measure's noise against the
// σ of the published curves: the smallest σ whose discrete Gaussian
// hockey-stick divergence at the worst whole shift d is ≤ δ_m (CKS 2020,
// Theorem 7; d = 1 for the count, 1990 for the int sum; for the real sum
// d = ⌊995/r⌋ + 1 steps of the grid r = 2^(⌊log₂ σ_c⌋ − 39), σ_c the
// analytic Gaussian σ of Balle and Wang 2018). It also checks the NOTICE's
// (ε, δ), the ledger's record of a Gaussian release and the budget spent.
func TestGaussian_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const analyst = "power_gaussian"
	p := powerProxy(t, analyst)
	truth := powerTruth(t, ctx)
	c, noticesSoFar := connectWithNotices(t, ctx, p.dsn(analyst))
	const eps, delta, queries = 1.5, 1e-6, 10
	// dp.bias = off: the three measures share ε and δ exactly, as the
	// formulas below assume (release/bias.go would take a tenth of ε and
	// a share of δ).
	textRows(t, ctx, c, fmt.Sprintf("SET dp.mechanism = gaussian; SET dp.epsilon = %g; SET dp.delta = %g; SET dp.cache = off; SET dp.bias = off", eps, delta))
	epsM, deltaM := eps/3, delta/3
	countSigma := dpref.SmallestSigma(1, deltaM, 1e-9, func(s float64) float64 { return discreteGaussianDelta(s, epsM, 1) })
	// Sums are noised on the real grid (dpplan/bounds.go weights a
	// unit's sum): σ in grid steps for a sensitivity of ⌊Δ₂/r⌋ + 1 steps.
	realGaussian := func(l2 float64) (*big.Rat, float64) {
		sigmaC := dpref.SmallestSigma(1, deltaM, 1e-9, func(s float64) float64 { return dpref.AnalyticGaussianDelta(s, epsM, l2) })
		_, e := math.Frexp(sigmaC)
		r := math.Ldexp(1, e-1-39)
		shift := math.Floor(l2/r) + 1
		return new(big.Rat).SetFloat64(r), dpref.SmallestSigma(1, deltaM, 1e-9, func(s float64) float64 { return dpref.AnalyticGaussianDelta(s, epsM, shift) })
	}
	intGrid, sumSigma := realGaussian(powerUpper)
	realGrid, realSigma := realGaussian(powerUpper / 2)
	one := big.NewRat(1, 1)
	noise := collectNoise(t, ctx, c, truth, [3]*big.Rat{one, intGrid, realGrid}, queries)
	scaleTest(t, "gaussian count", gaussianFamily, countSigma, noise[0])
	scaleTest(t, "gaussian sum (integer column)", gaussianFamily, sumSigma, noise[1])
	scaleTest(t, "gaussian sum (real)", gaussianFamily, realSigma, noise[2])
	checkSpent(t, ctx, c, queries*eps, queries*delta)

	notices := noticesSoFar()
	if len(notices) != queries || !strings.HasPrefix(notices[0], "dp: epsilon 1.5, delta 1e-06 spent (pure)") {
		t.Fatalf("notices = %q", notices)
	}
	var events string
	l := connect(t, ctx, ledgerDSN())
	if err := l.QueryRow(ctx, "SELECT events::text FROM dpproxy_ledger.charge WHERE analyst = $1 ORDER BY id DESC LIMIT 1", analyst).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(events, "gaussian") {
		t.Fatalf("ledger events = %s, want a gaussian release", events)
	}
}
