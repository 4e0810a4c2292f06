// Privacy-critical: needs DP review.

package accountant

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// Privacy-loss distributions (pld).
//
// The privacy loss of a release with output o is L(o) = log(P(o)/Q(o)),
// P and Q its output distributions on neighbouring databases; a mechanism
// is (ε, δ)-DP exactly when
//
//	δ(ε) = P[L = ∞] + E_{o~P}[(1 − e^{ε−L(o)})₊]
//
// is at most δ, and the loss of a composition is the sum of the independent
// losses, so its distribution is the convolution of theirs (Koskela et al.
// 2020; Doroshenko et al., "Connect the Dots", PETS 2022; Google's
// dp_accounting). The state is a multiset of releases, and the composed
// distribution is a deterministic function of it ("The memo" below).
//
// The samplers are discrete (noise/), and neither continuous loss bounds
// its discrete counterpart: a discrete Laplace whose sensitivity is one
// grid step has randomized response's loss, worse than the continuous
// Laplace's, and a discrete Gaussian's curve can lie above the continuous
// one at small counts (earlier builds composed both as continuous:
// pldlegacy.go, for verifying their figures only). So:
//
//   - Laplace releases, ε₀ = Δ₁/b: randomized response, the dominating
//     pair of ε₀-DP below (loss ε₀ w.p. e^ε₀/(1+e^ε₀), −ε₀ otherwise),
//     valid for every ε₀-DP release;
//   - Gaussian releases, μᵢ = Δ₂/σᵢ: a state with any is not composed as
//     a distribution; its figure is the RDP bound (rdp.go: αΣμᵢ²/2 holds
//     for the discrete Gaussian, Canonne–Kamath–Steinke 2020 Thm 4, with
//     each Laplace at randomized response's RDP, rrRDP), plus the
//     releases with δ > 0 that are not RDP by basic composition;
//   - any other (ε, δ)-DP release: the dominating pair of Kairouz–Oh–
//     Viswanath 2015 (Thm 2.1): loss ∞ w.p. δ, ε w.p. (1−δ)e^ε/(1+e^ε), −ε
//     w.p. (1−δ)/(1+e^ε); every (ε, δ)-DP mechanism is a post-processing of
//     it.
//
// Discretisation is pessimistic, so the computed ε is never below the true
// one:
//
//   - losses are rounded up to the grid h·ℤ (mass in ((i−1)h, ih] goes to
//     ih); δ(ε) is non-decreasing in every loss value;
//   - after each convolution, an upper tail of mass ≤ 1e-15 goes to the ∞
//     atom and a lower tail of mass ≤ 1e-15 is moved up to the lowest kept
//     point;
//   - the floating-point error of each FFT convolution is bounded (see
//     pmf.convolve) and that bound is added to the ∞ atom: each term of
//     δ(ε) has a coefficient in [0, 1]; convolutions whose bound would
//     exceed 1e-13 are done directly when affordable;
//   - to bound the number of distinct releases, Laplace ε₀ and generic
//     (ε, δ) are rounded up to 4 significant digits: (ε′, δ′) ≥ (ε, δ)
//     dominates by the KOV pair's definition (an ε₀-DP release is
//     ε₀′-DP for ε₀′ ≥ ε₀).
//
// The grid is h = 10⁻³ (ε₀ ≥ 0.1), or ε₀,min/100 for smaller releases (at
// least 10⁻⁵); a distribution that would need more than 2¹⁶ points (about
// 1,600 releases of ε₀ = 0.1) is not computed, to keep a charge fast, and
// the method falls back to its RDP bound; so does a state of more than
// pldMaxTypes distinct releases (an analyst who varies dp.epsilon chooses
// their number) or whose running product over types would cost more than
// pldMaxWork to convolve (TestAttack41_PLDTypesBounded,
// TestAttack68_PLDChargeCPUUnderLockNotBounded). The method's figure is
// the minimum of the PLD bound, the RDP bound of the same releases
// (rdp.go) and exact basic composition, all valid upper bounds.
//
// # The memo
//
// A ledger's PLDMemo (pldmemo.go, a bounded store) keeps the repeated
// squarings and partial products of power and the curves of whole states,
// each under a pldMemoKey that names every input of the value: the
// release type and grid h, the squaring's exponent or the count's prefix,
// or the state's canonical JSON. Values are never changed once put
// (convolve and truncate make new slices), and only the current
// composition order uses the memo (the earlier builds' accountants of
// pldlegacy.go have none), so every figure is exactly what the same
// computation without it gives (TestPLDMemo_SameFigures): `dpproxy ledger
// verify`, which recomputes without the memo, finds the same numbers.
type pldAccountant struct {
	// memo, when set, remembers intermediate distributions (pldmemo.go);
	// the figures are the same with or without it.
	memo *PLDMemo
	// lowBitFirst composes in the order of builds before the memo
	// (pldlegacy.go; Verify only, with no memo).
	lowBitFirst bool
	// uncapped computes the PLD whatever the number of release types, as
	// builds before pldMaxTypes did (pldlegacy.go; Verify only).
	uncapped bool
	// continuous composes Laplace releases as continuous Laplace and
	// Gaussian releases as continuous Gaussian, as builds before 7 Dec
	// 2026 did (pldlegacy.go; Verify only).
	continuous bool
}

// pldMemoKey names one memoised value: kind "sq" (n = the exponent b),
// "pre" (n = the prefix M) or "curve" (state = the canonical state JSON).
type pldMemoKey struct {
	kind           string
	laplace        bool
	epsilon, delta float64
	h              float64
	n              int64
	state          string
}

type pldState struct {
	// MuSq is Σμᵢ² over Gaussian releases (μᵢ = Δ₂/σᵢ), rounded up.
	MuSq float64 `json:"mu2,omitempty"`
	// Laplace counts releases by ε₀ (decimal text, rounded up to 4
	// significant digits).
	Laplace map[string]int64 `json:"laplace,omitempty"`
	// Generic counts other releases by "ε,δ" (each rounded up likewise).
	Generic map[string]int64 `json:"generic,omitempty"`
}

const (
	pldKeyDigits  = 4
	pldTailMass   = 1e-15
	pldMaxPoints  = 1 << 16
	pldMaxTypes   = 128
	pldGaussTails = 9.0 // Gaussian discretised over mean ± 9σ (tail Φ(−9) ≈ 1.1e-19)
)

// ceilSig rounds x > 0 up to n significant decimal digits; the result is a
// float64 ≥ x.
func ceilSig(x float64, n int) float64 {
	if x <= 0 {
		return x
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // d.ddddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	if len(digits) <= n {
		return x
	}
	e, _ := strconv.Atoi(exp)
	m, _ := strconv.ParseInt(digits[:n], 10, 64)
	m++ // the dropped digits are not all zero (shortest form)
	y, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", m, e-(n-1)), 64)
	for y < x {
		y = math.Nextafter(y, math.Inf(1))
	}
	return y
}

func keyOf(x float64) string { return strconv.FormatFloat(ceilSig(x, pldKeyDigits), 'g', -1, 64) }

func (pldAccountant) absorb(raw json.RawMessage, events []Event) (json.RawMessage, []Event, error) {
	s, err := unmarshalTight[pldState](raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decode pld state: %w", err)
	}
	for _, e := range events {
		kind, p := classify(e)
		switch kind {
		case kindGaussian:
			s.MuSq = roundUp(s.MuSq + p*p)
		case kindLaplace:
			if s.Laplace == nil {
				s.Laplace = map[string]int64{}
			}
			s.Laplace[keyOf(p)]++
		default:
			if s.Generic == nil {
				s.Generic = map[string]int64{}
			}
			s.Generic[keyOf(e.Epsilon)+","+keyOf(e.Delta)]++
		}
	}
	out, err := json.Marshal(s)
	return out, nil, err
}

// pldType is one kind of release and how many times it happened.
type pldType struct {
	laplace        bool
	epsilon, delta float64
	count          int64
	// continuous: the earlier builds' continuous Laplace loss
	// (pldlegacy.go; Verify only).
	continuous bool
}

func (s pldState) types() ([]pldType, error) {
	var ts []pldType
	for k, n := range s.Laplace {
		e, err := strconv.ParseFloat(k, 64)
		if err != nil || !(e >= 0) || math.IsInf(e, 0) || n < 0 {
			return nil, fmt.Errorf("bad pld state entry %q", k)
		}
		ts = append(ts, pldType{laplace: true, epsilon: e, count: n})
	}
	for k, n := range s.Generic {
		es, ds, _ := strings.Cut(k, ",")
		e, err1 := strconv.ParseFloat(es, 64)
		d, err2 := strconv.ParseFloat(ds, 64)
		if err1 != nil || err2 != nil || !(e >= 0) || math.IsInf(e, 0) || !(d >= 0) || d >= 1 || n < 0 {
			return nil, fmt.Errorf("bad pld state entry %q", k)
		}
		ts = append(ts, pldType{epsilon: e, delta: d, count: n})
	}
	// Deterministic order: the result must not depend on map order.
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.laplace != b.laplace {
			return a.laplace
		}
		if a.epsilon != b.epsilon {
			return a.epsilon < b.epsilon
		}
		return a.delta < b.delta
	})
	return ts, nil
}

// rdpBound is the RDP bound of the same releases (+Inf when a generic
// release has δ > 0): a Laplace release's is randomized response's
// (rrRDP), or, for the earlier builds' figures, the continuous Laplace's.
func (s pldState) rdpCurve(ts []pldType, continuous bool) ([]float64, bool) {
	r := make([]float64, len(rdpOrders))
	for i, a := range rdpOrders {
		r[i] = a * s.MuSq / 2
	}
	for _, t := range ts {
		if !t.laplace && t.delta > 0 {
			return nil, false
		}
		for i, a := range rdpOrders {
			switch {
			case t.laplace && continuous:
				r[i] += float64(t.count) * laplaceRDP(a, t.epsilon)
			case t.laplace:
				r[i] += float64(t.count) * rrRDP(a, t.epsilon)
			default:
				r[i] += float64(t.count) * pureRDP(a, t.epsilon)
			}
		}
	}
	return r, true
}

// gaussianDelta is the exact curve of the Gaussian mechanism with μ = Δ/σ
// (Balle–Wang 2018, Thm 8).
// A NaN argument, or ∞ − ∞ for an infinite μ, gives 1 (no bound).
func gaussianDelta(mu, eps float64) float64 {
	if mu == 0 {
		return 0
	}
	a := mu/2 - eps/mu
	b := -mu/2 - eps/mu
	d := phi(a) - math.Exp(eps+logPhi(b))
	if math.IsNaN(d) {
		return 1
	}
	return math.Min(1, math.Max(0, d))
}

// logPhi is log Φ(x), with the asymptotic expansion where Φ underflows.
func logPhi(x float64) float64 {
	if x > -37 {
		return math.Log(phi(x))
	}
	x2 := x * x
	return -x2/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log1p(-1/x2+3/(x2*x2))
}

// gaussianEpsilon is the exact ε(δ) of the Gaussian mechanism with μ.
func gaussianEpsilon(mu, delta float64) float64 {
	if delta <= 0 {
		return math.Inf(1)
	}
	if mu == 0 || delta >= 1 {
		return 0
	}
	return bisectDecreasing(func(e float64) float64 { return gaussianDelta(mu, e) }, delta, 0, mu*mu/2+40*mu+10)
}

// pmf is a discretised privacy-loss distribution: loss (off+i)·h with
// probability p[i], plus an atom inf at +∞.
type pmf struct {
	off int
	p   []float64
	inf float64
}

func pointMass() pmf { return pmf{p: []float64{1}} }

// dominatingPMF discretises the KOV dominating pair of (ε, δ)-DP.
func dominatingPMF(eps, delta, h float64) pmf {
	hi := int(math.Ceil(eps / h))
	lo := int(math.Ceil(-eps / h))
	p := make([]float64, hi-lo+1)
	up := (1 - delta) / (1 + math.Exp(-eps)) // (1−δ)e^ε/(1+e^ε)
	p[hi-lo] += up
	p[0] += (1 - delta) - up
	return pmf{off: lo, p: p, inf: delta}
}

// gaussianPMF discretises the Gaussian loss N(μ²/2, μ²), rounding up.
func gaussianPMF(mu, h float64) pmf {
	m := mu * mu / 2
	lo := int(math.Ceil((m - pldGaussTails*mu) / h))
	hi := int(math.Ceil((m + pldGaussTails*mu) / h))
	p := make([]float64, hi-lo+1)
	z := func(i int) float64 { return (float64(i)*h - m) / mu }
	for i := lo; i <= hi; i++ {
		a, b := z(i-1), z(i)
		var mass float64
		if a > 0 {
			mass = phi(-a) - phi(-b)
		} else {
			mass = phi(b) - phi(a)
		}
		p[i-lo] = math.Max(0, mass)
	}
	p[0] += phi(z(lo - 1))                      // lower tail, moved up
	return pmf{off: lo, p: p, inf: phi(-z(hi))} // upper tail to ∞
}

// truncate moves tails of mass ≤ pldTailMass: the upper one to ∞, the lower
// one up to the lowest kept point.
func (d pmf) truncate() pmf {
	p := d.p
	var lowMass float64
	i := 0
	for i < len(p)-1 && lowMass+p[i] <= pldTailMass {
		lowMass += p[i]
		i++
	}
	var highMass float64
	j := len(p) - 1
	for j > i && highMass+p[j] <= pldTailMass {
		highMass += p[j]
		j--
	}
	out := make([]float64, j-i+1)
	copy(out, p[i:j+1])
	out[0] += lowMass
	return pmf{off: d.off + i, p: out, inf: d.inf + highMass}
}

func (a pmf) convolve(b pmf) (pmf, error) {
	n := len(a.p) + len(b.p) - 1
	if n > pldMaxPoints {
		return pmf{}, errPLDTooLarge
	}
	var c []float64
	var errBound float64
	// FFT rounding error: Higham (Accuracy and Stability of Numerical
	// Algorithms, 2nd ed., Thm 24.2) bounds the normwise relative error of a
	// radix-2 FFT by log₂n·η, η ≈ 6u with accurately computed twiddles;
	// through the pointwise product (|FFT(b)| ≤ Σb ≤ 1) and the scaled
	// inverse, ‖ĉ − c‖₂ ≤ κ(‖a‖₂ + ‖b‖₂ + ‖c‖₂) with κ = 8·log₂n·u, and
	// Σ|ĉᵢ − cᵢ| ≤ √n·‖ĉ − c‖₂ (Cauchy–Schwarz). ‖c‖₂ ≤ ‖a‖₂·Σb ≤ ‖a‖₂.
	size := float64(int(1) << bits.Len(uint(n-1)))
	fftBound := math.Sqrt(size) * 8 * math.Max(1, math.Log2(size)) * 0x1p-53 * (2*norm2(a.p) + norm2(b.p))
	direct := float64(len(a.p)) * float64(len(b.p))
	if direct <= 2e6 || (fftBound > 1e-13 && direct <= pldDirectMax) {
		c = make([]float64, n)
		for i, x := range a.p {
			if x == 0 {
				continue
			}
			for j, y := range b.p {
				c[i+j] += x * y
			}
		}
	} else {
		c = fftConvolve(a.p, b.p)
		errBound = fftBound
		for i := range c {
			if c[i] < 0 {
				c[i] = 0
			}
		}
	}
	inf := a.inf + b.inf - a.inf*b.inf + errBound
	return pmf{off: a.off + b.off, p: c, inf: math.Min(1, inf)}.truncate(), nil
}

// pldMaxWork bounds, in multiply-adds, the convolutions of the running
// product over release types in one evaluation (build): 16 FFT
// convolutions of the largest size (pldMaxTypes bounds how many types are
// convolved, not how large the product grows). Past it the RDP bound
// stands, within a few per cent of the PLD's for many releases.
var pldMaxWork = 16 * fftWork(pldMaxPoints)

// fftWork is the cost of an FFT convolution with n output points, in
// multiply-adds: three transforms of the padded size N, each about
// 4·N·log₂N.
func fftWork(n int) float64 {
	size := float64(int(1) << bits.Len(uint(max(n, 2)-1)))
	return 12 * size * math.Log2(size)
}

// pldDirectMax is the largest convolution (a·b multiply-adds) convolve
// may still sum directly rather than through the FFT.
const pldDirectMax = 2e7

// convolveWork bounds the cost of convolving a points with b (pmf.convolve):
// the direct sum's a·b where convolve may take it, else the FFT's.
func convolveWork(a, b int) float64 {
	if direct := float64(a) * float64(b); direct <= pldDirectMax {
		return direct
	}
	return fftWork(a + b - 1)
}

func norm2(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

var errPLDTooLarge = fmt.Errorf("privacy-loss distribution needs more than %d points", pldMaxPoints)

// pmf discretises one release of type t on the grid h: the dominating
// pair of (ε, δ)-DP, for a Laplace release randomized response (file
// comment).
func (t pldType) pmf(h float64) pmf {
	if t.laplace && t.continuous {
		return laplacePMF(t.epsilon, h) // pldlegacy.go
	}
	return dominatingPMF(t.epsilon, t.delta, h)
}

// power returns the t.count-fold self-composition of one release of type
// t: with sq[0] the truncated loss of one release and sq[b+1] = sq[b] ⊗
// sq[b] (repeated squaring), it is ⊗ sq[b] over the set bits b of the
// count, taken from the highest bit down. That order makes the partial
// products depend only on the high bits of the count, so with a memo the
// next charge (count + 1) reuses them and convolves only the small sq[b]
// of the bits that changed.
func power(t pldType, h float64, memo *PLDMemo) (pmf, error) {
	k := t.count
	if k <= 0 {
		return pointMass(), nil
	}
	key := pldMemoKey{laplace: t.laplace, epsilon: t.epsilon, delta: t.delta, h: h}
	var sq func(b int) (pmf, error)
	sq = func(b int) (pmf, error) {
		k := key
		k.kind, k.n = "sq", int64(b)
		if d, ok := memo.getPMF(k); ok {
			return d, nil
		}
		var d pmf
		if b == 0 {
			d = t.pmf(h).truncate()
		} else {
			half, err := sq(b - 1)
			if err != nil {
				return pmf{}, err
			}
			if d, err = half.convolve(half); err != nil {
				return pmf{}, err
			}
		}
		memo.putPMF(k, d)
		return d, nil
	}
	prefix := func(b int) int64 { return k &^ (int64(1)<<b - 1) } // k with bits below b cleared
	top := bits.Len64(uint64(k)) - 1
	// The longest memoised prefix: the lowest level b whose partial
	// product is known (level top is sq[top] itself).
	b := 0
	var acc pmf
	for ; b < top; b++ {
		if k&(1<<b) == 0 {
			continue // same prefix as level b+1
		}
		pk := key
		pk.kind, pk.n = "pre", prefix(b)
		if d, ok := memo.getPMF(pk); ok {
			acc = d
			break
		}
	}
	if b == top {
		var err error
		if acc, err = sq(top); err != nil {
			return pmf{}, err
		}
	}
	for b--; b >= 0; b-- {
		if k&(1<<b) == 0 {
			continue
		}
		s, err := sq(b)
		if err != nil {
			return pmf{}, err
		}
		if acc, err = acc.convolve(s); err != nil {
			return pmf{}, err
		}
		pk := key
		pk.kind, pk.n = "pre", prefix(b)
		memo.putPMF(pk, acc)
	}
	return acc, nil
}

// delta is δ(ε) of the discretised distribution (1 for a NaN ε).
func (d pmf) delta(eps, h float64) float64 {
	if math.IsNaN(eps) {
		return 1
	}
	s := d.inf
	for i := len(d.p) - 1; i >= 0; i-- {
		l := float64(d.off+i) * h
		if l <= eps {
			break
		}
		s += d.p[i] * -math.Expm1(eps-l)
	}
	return math.Min(1, s)
}

func (d pmf) epsilon(delta, h float64) float64 {
	if d.inf > delta {
		return math.Inf(1)
	}
	maxLoss := math.Max(0, float64(d.off+len(d.p)-1)*h)
	return bisectDecreasing(func(e float64) float64 { return d.delta(e, h) }, delta, 0, maxLoss)
}

// pldCurve is the composed state, ready to answer ε(δ) and δ(ε).
type pldCurve struct {
	gaussOnly bool
	mu        float64
	d         pmf
	h         float64
	ok        bool      // d was computed (not too large)
	rdp       []float64 // RDP curve of the same releases, nil if none
	// rest, when set, is the basic composition (ε, δ) of the releases
	// with δ > 0 that rdp leaves out (Gaussian states: see build), to be
	// added to rdp's figure.
	rest *[2]float64
}

func (s pldState) build(memo *PLDMemo, lowBitFirst, uncapped, continuous bool) (pldCurve, error) {
	ts, err := s.types()
	if err != nil {
		return pldCurve{}, err
	}
	for i := range ts {
		ts[i].continuous = continuous
	}
	c := pldCurve{mu: math.Sqrt(s.MuSq)}
	if r, ok := s.rdpCurve(ts, continuous); ok {
		c.rdp = r
	}
	if len(ts) == 0 && (continuous || s.MuSq == 0) {
		c.gaussOnly = true // nothing, or (earlier builds) Gaussians only
		return c, nil
	}
	if s.MuSq > 0 && !continuous {
		// Gaussian releases: the RDP bound (file comment). Releases with
		// δ > 0 that are not RDP (a partition-selection threshold) join
		// it by basic composition.
		if c.rdp == nil {
			var rest [2]float64
			keep := ts[:0:0]
			for _, t := range ts {
				if !t.laplace && t.delta > 0 {
					rest[0] += float64(t.count) * t.epsilon
					rest[1] += float64(t.count) * t.delta
					continue
				}
				keep = append(keep, t)
			}
			if r, ok := s.rdpCurve(keep, false); ok {
				c.rdp, c.rest = r, &rest
			}
		}
		return c, nil
	}
	if len(ts) == 0 {
		return c, nil
	}
	c.h = 1e-3
	for _, t := range ts {
		if t.epsilon > 0 && t.epsilon/100 < c.h {
			c.h = math.Max(1e-5, t.epsilon/100)
		}
	}
	// Cost bound: the composed loss has standard deviation at most
	// √(μ² + Σ countᵢ·εᵢ²) (each non-Gaussian loss lies in [−εᵢ, εᵢ]); after
	// tail truncation at 1e-15 its support spans about ±8.5 of those around
	// the mean. If that needs more than pldMaxPoints grid points, the PLD is
	// not computed and the RDP bound stands (for many releases the two are
	// within a few per cent: the composed loss is nearly Gaussian).
	variance := s.MuSq
	maxEps := 0.0
	for _, t := range ts {
		variance += float64(t.count) * t.epsilon * t.epsilon
		maxEps = math.Max(maxEps, t.epsilon)
	}
	if (17*math.Sqrt(variance)+4*maxEps)/c.h > pldMaxPoints || (len(ts) > pldMaxTypes && !uncapped) {
		return c, nil
	}
	d := pointMass()
	if s.MuSq > 0 {
		d = gaussianPMF(c.mu, c.h)
	}
	work := 0.0
	for _, t := range ts {
		var pw pmf
		if lowBitFirst {
			pw, err = powerLowBitFirst(t, c.h)
		} else {
			pw, err = power(t, c.h, memo)
		}
		if err == nil && !uncapped {
			// The running product's convolutions are bounded by
			// pldMaxWork; past it the RDP bound stands, as past
			// pldMaxTypes or pldMaxPoints.
			if work += convolveWork(len(d.p), len(pw.p)); work > pldMaxWork {
				return c, nil
			}
		}
		if err == nil {
			d, err = d.convolve(pw)
		}
		if err == errPLDTooLarge {
			return c, nil // fall back to the RDP bound
		}
		if err != nil {
			return c, err
		}
	}
	c.d, c.ok = d, true
	return c, nil
}

func (c pldCurve) epsilon(delta float64) float64 {
	e := math.Inf(1)
	switch {
	case c.gaussOnly:
		e = gaussianEpsilon(c.mu, delta)
	case c.ok:
		e = c.d.epsilon(delta, c.h)
	}
	switch {
	case c.rdp != nil && c.rest != nil:
		if delta > c.rest[1] {
			e = math.Min(e, rdpEpsilon(rdpOrders, c.rdp, delta-c.rest[1])+c.rest[0])
		}
	case c.rdp != nil:
		e = math.Min(e, rdpEpsilon(rdpOrders, c.rdp, delta))
	}
	return e
}

func (c pldCurve) delta(eps float64) float64 {
	d := 1.0
	switch {
	case c.gaussOnly:
		d = gaussianDelta(c.mu, eps)
	case c.ok:
		d = c.d.delta(eps, c.h)
	}
	switch {
	case c.rdp != nil && c.rest != nil:
		if eps >= c.rest[0] {
			d = math.Min(d, rdpDelta(rdpOrders, c.rdp, eps-c.rest[0])+c.rest[1])
		}
	case c.rdp != nil:
		d = math.Min(d, rdpDelta(rdpOrders, c.rdp, eps))
	}
	return d
}

// curve composes the state raw into its curve, through the memo, keyed on
// the state's canonical JSON (Go's encoding of the decoded state), not on
// raw: the ledger hands states back as PostgreSQL's normalised jsonb text.
func (a pldAccountant) curve(raw json.RawMessage) (pldCurve, error) {
	if c, ok := a.memo.getCurve(string(raw)); ok {
		return c, nil
	}
	s, err := unmarshalTight[pldState](raw)
	if err != nil {
		return pldCurve{}, fmt.Errorf("decode pld state: %w", err)
	}
	key := string(raw)
	if a.memo != nil {
		if canon, err := json.Marshal(s); err == nil {
			key = string(canon)
			if c, ok := a.memo.getCurve(key); ok {
				return c, nil
			}
		}
	}
	c, err := s.build(a.memo, a.lowBitFirst, a.uncapped, a.continuous)
	if err == nil {
		a.memo.putCurve(key, c)
	}
	return c, err
}

func (a pldAccountant) epsilon(raw json.RawMessage, delta float64) (float64, error) {
	c, err := a.curve(raw)
	if err != nil {
		return 0, err
	}
	return roundUp(c.epsilon(delta)), nil
}

func (a pldAccountant) delta(raw json.RawMessage, eps float64) (float64, error) {
	c, err := a.curve(raw)
	if err != nil {
		return 0, err
	}
	return roundUp(c.delta(eps)), nil
}
