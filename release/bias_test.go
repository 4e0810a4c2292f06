package release

import (
	"context"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestBiasSplit: the bias estimate's ε/10 and the measures' equal shares
// never compose to more than the query's ε (exact arithmetic), and lose
// at most a few ulps.
func TestBiasSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		eps := math.Exp(r.Float64()*30 - 20)
		m := 1 + r.IntN(40)
		bias, each := biasSplit(eps, m)
		total := new(big.Rat).SetFloat64(bias)
		total.Add(total, new(big.Rat).Mul(new(big.Rat).SetFloat64(each), big.NewRat(int64(m), 1)))
		if total.Cmp(new(big.Rat).SetFloat64(eps)) > 0 {
			t.Fatalf("ε %v, m %d: bias %v + m·%v > ε", eps, m, bias, each)
		}
		if math.Abs(bias-eps/10) > 1e-12*eps || math.Abs(each-(eps-bias)/float64(m)) > 1e-12*eps {
			t.Fatalf("ε %v, m %d: bias %v, each %v, want ε/10 and the rest split", eps, m, bias, each)
		}
		dec := new(big.Rat).Add(decimalOf(bias), new(big.Rat).Mul(decimalOf(each), big.NewRat(int64(m), 1)))
		if dec.Cmp(decimalOf(eps)) > 0 {
			t.Fatalf("ε %v, m %d: the ledger's decimals %v + %d·%v exceed ε", eps, m, bias, m, each)
		}
	}
	// The figures analysts use split into decimals that add up to ε, or
	// to an ulp below it.
	for _, eps := range []float64{0.1, 0.25, 1, 3, 0.01, 0.5} {
		bias, each := biasSplit(eps, 1)
		sum := new(big.Rat).Add(decimalOf(bias), decimalOf(each))
		gap, _ := new(big.Rat).Sub(decimalOf(eps), sum).Float64()
		if gap < 0 || gap > 1e-15*eps {
			t.Errorf("ε %v: %v + %v, want ε in decimal up to an ulp", eps, bias, each)
		}
		t.Logf("ε %v = %v + %v", eps, each, bias)
	}
}

// TestRun_BiasEstimate: an ungrouped COUNT(*) carries the bias estimate;
// the ledger is charged ε/10 for it and 9ε/10 for the count, and the
// NOTICE states the noisy removed rows, their share of the rows read and
// that the intervals cover the bounded answer. SET dp.bias = off
// (Options.NoBias) removes it and gives the count the whole ε.
func TestRun_BiasEstimate(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT COUNT(*) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	if !plan.HasBias() || len(plan.Measures) != 2 {
		t.Fatalf("measures %+v: want count(*) and the bias estimate", plan.Measures)
	}
	// 1,000,000 bounded rows and 50,000 removed: at ε = 1 the removed
	// rows' noise has scale L0·R/0.1 = 20·10 = 200 in the hospital policy
	// (ungrouped: L0 = 1, R = 4·5), far below the 5% stated.
	up := &fakeUpstream{rows: [][]*string{{s("1000000"), s("50000")}}}
	l := &memLedger{limit: 10}
	res, err := newTestReleaser(t, l, 7).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1,
		Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.reserved) != 1 || len(l.reserved[0].Events) != 2 {
		t.Fatalf("charges %+v: want one charge of two events", l.reserved)
	}
	ev := l.reserved[0].Events
	if math.Abs(ev[0].Epsilon-0.9) > 1e-12 || math.Abs(ev[1].Epsilon-0.1) > 1e-12 {
		t.Errorf("events ε %v and %v, want 0.9 (count) and 0.1 (bias)", ev[0].Epsilon, ev[1].Epsilon)
	}
	m := regexp.MustCompile(`contribution bounding removed at least about ([0-9.e+]+) rows \(([0-9.]+)% of the rows read, ±([0-9.e+]+), epsilon 0\.1\); the intervals cover the bounded answer`).
		FindStringSubmatch(res.Notice)
	if m == nil {
		t.Fatalf("NOTICE lacks the bias estimate: %s", res.Notice)
	}
	removed, _ := strconv.ParseFloat(m[1], 64)
	share, _ := strconv.ParseFloat(m[2], 64)
	h, _ := strconv.ParseFloat(m[3], 64)
	// Laplace with b = 200: |noise| > 200·ln(10⁶) ≈ 2763 has probability
	// 10⁻⁶ (false rejection).
	if math.Abs(removed-50000) > 2763 || math.Abs(share-100*50000.0/1050000) > 0.5 {
		t.Errorf("removed %v (%v%%), want about 50000 (4.8%%)", removed, share)
	}
	if math.Abs(h-200*math.Log(20)) > 5 {
		t.Errorf("half-width %v, want b·ln 20 ≈ %v", h, 200*math.Log(20))
	}

	off, err := rewrite.RewriteWith(ds, "SELECT COUNT(*) FROM visits", rewrite.Options{NoBias: true})
	if err != nil {
		t.Fatal(err)
	}
	if off.HasBias() || len(off.Measures) != 1 || off.Fingerprint == plan.Fingerprint {
		t.Fatalf("dp.bias = off: measures %+v (fingerprint equal: %v)", off.Measures, off.Fingerprint == plan.Fingerprint)
	}
	l = &memLedger{limit: 10}
	res, err = newTestReleaser(t, l, 7).Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: off, Epsilon: 1,
		Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{rows: [][]*string{{s("1000000")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := l.reserved[0].Events; len(ev) != 1 || ev[0].Epsilon != 1 {
		t.Errorf("dp.bias = off: events %+v, want one of ε 1", ev)
	}
	if regexp.MustCompile(`removed`).MatchString(res.Notice) {
		t.Errorf("dp.bias = off: NOTICE states a bias estimate: %s", res.Notice)
	}
}
