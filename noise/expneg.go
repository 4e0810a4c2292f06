// Privacy-critical: needs DP review.

package noise

import (
	"math/big"
	"math/bits"
)

// This file decides events of probability e^{−k}, k a whole number, by
// comparing one uniform U ∈ [0, 1) with rigorous bounds of e^{−k}. The
// comparison is exact: bounds are computed in integer fixed point with
// directed rounding, and when the 128-bit prefix of U falls between the
// bounds (probability < 2⁻¹²⁵) more bits of U and tighter bounds are drawn
// until the comparison is decided. Comparing against all tabulated k costs
// the same work whatever the outcome, which keeps the geometric part of the
// discrete Laplace sampler free of output-dependent loops.

// expTableSize is the number of tabulated thresholds e^{−1} … e^{−88}.
// e^{−88} ≈ 6.1·10⁻³⁹ < 2⁻¹²⁷, so a 128-bit U is below the last threshold
// with probability ≈ 2⁻¹²⁷; only then does the geometric sampler recurse.
const expTableSize = 88

// expFracBits is the precision of the tabulated thresholds.
const expFracBits = 128

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

// less reports a < b without data-dependent branches.
func (a u128) less(b u128) uint64 {
	_, borrow := bits.Sub64(a.lo, b.lo, 0)
	_, borrow = bits.Sub64(a.hi, b.hi, borrow)
	return borrow
}

func u128FromBig(x *big.Int) u128 {
	lo := new(big.Int).And(x, new(big.Int).SetUint64(^uint64(0)))
	hi := new(big.Int).Rsh(x, 64)
	return u128{hi: hi.Uint64(), lo: lo.Uint64()}
}

// expNegBounds returns lo, hi with lo ≤ e^{−k}·2^prec ≤ hi, for k ≥ 0.
// Method: e = Σ 1/n! with every term rounded down (lower bound) or up plus
// the tail bound 2/(N+1)! (upper bound), in fixed point with 64 guard bits;
// e^{−1} = 1/e with directed division; e^{−k} by repeated multiplication,
// rounding down for the lower and up for the upper bound. Each step only
// widens the interval, so the bounds are rigorous.
func expNegBounds(k, prec int) (lo, hi *big.Int) {
	all := expNegBoundsUpTo(k, prec)
	return all[k][0], all[k][1]
}

// expNegBoundsUpTo returns the bounds of expNegBounds for every k in
// 0 … kmax, sharing one computation of e^{−1}.
func expNegBoundsUpTo(kmax, prec int) [][2]*big.Int {
	p := uint(prec + 64 + 2*bits.Len(uint(kmax)) + 8) // guard bits
	one := new(big.Int).Lsh(big.NewInt(1), p)
	// Terms 1/n! in fixed point, down and up.
	down := new(big.Int).Set(one)
	up := new(big.Int).Set(one)
	eLo := new(big.Int).Set(one)
	eHi := new(big.Int).Set(one)
	for n := int64(1); down.Sign() > 0; n++ {
		down.Quo(down, big.NewInt(n))
		up = ceilDiv(up, big.NewInt(n))
		eLo.Add(eLo, down)
		eHi.Add(eHi, up)
	}
	// All further terms are below 2·(last term) ≤ 2·up; up ≥ 1 here.
	eHi.Add(eHi, new(big.Int).Lsh(up, 1))
	// e^{−1}·2^p ∈ [2^{2p}/eHi, 2^{2p}/eLo].
	sq := new(big.Int).Lsh(big.NewInt(1), 2*p)
	l1 := new(big.Int).Quo(sq, eHi)
	h1 := ceilDiv(sq, eLo)
	lo := new(big.Int).Set(one)
	hi := new(big.Int).Set(one)
	shift := p - uint(prec)
	out := make([][2]*big.Int, kmax+1)
	for k := 0; k <= kmax; k++ {
		if k > 0 {
			lo.Mul(lo, l1)
			lo.Rsh(lo, p)
			hi.Mul(hi, h1)
			hi = ceilShift(hi, p)
		}
		out[k] = [2]*big.Int{new(big.Int).Rsh(lo, shift), ceilShift(hi, shift)}
	}
	return out
}

func ceilDiv(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func ceilShift(a *big.Int, s uint) *big.Int {
	q := new(big.Int).Rsh(a, s)
	if new(big.Int).Lsh(q, s).Cmp(a) != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// expThreshold holds the 128-bit bounds of e^{−k}: lo ≤ e^{−k}·2¹²⁸ ≤ hi.
type expThreshold struct{ lo, hi u128 }

// expTable[k] bounds e^{−k} for k = 0 … expTableSize. It is computed once
// when the package is initialised and never written afterwards.
var expTable = func() [expTableSize + 1]expThreshold {
	var t [expTableSize + 1]expThreshold
	t[0] = expThreshold{lo: u128{hi: ^uint64(0), lo: ^uint64(0)}, hi: u128{hi: ^uint64(0), lo: ^uint64(0)}}
	all := expNegBoundsUpTo(expTableSize, expFracBits)
	for k := 1; k <= expTableSize; k++ {
		t[k] = expThreshold{lo: u128FromBig(all[k][0]), hi: u128FromBig(all[k][1])}
	}
	return t
}()

// uniformFraction is a uniform U ∈ [0, 1) revealed lazily: the first 128
// bits, then more bits only when a comparison needs them.
type uniformFraction struct {
	first u128
	ext   *big.Int // all bits drawn so far, when more than 128
	bits  int      // number of bits in ext
}

func (s *source) fraction() uniformFraction {
	return uniformFraction{first: u128{hi: s.uint64(), lo: s.uint64()}}
}

// lessExpNegSlow decides U < e^{−k} exactly by drawing more bits of U and
// tightening the bounds until U's interval lies on one side.
func (u *uniformFraction) lessExpNegSlow(s *source, k int) bool {
	if u.ext == nil {
		u.ext = new(big.Int).SetUint64(u.first.hi)
		u.ext.Lsh(u.ext, 64)
		u.ext.Or(u.ext, new(big.Int).SetUint64(u.first.lo))
		u.bits = 128
	}
	for {
		// U·2^bits ∈ [ext, ext+1).
		lo, hi := expNegBounds(k, u.bits)
		next := new(big.Int).Add(u.ext, big.NewInt(1))
		if next.Cmp(lo) <= 0 {
			return true
		}
		if u.ext.Cmp(hi) >= 0 {
			return false
		}
		if s.err != nil {
			return false
		}
		u.ext.Lsh(u.ext, 64)
		u.ext.Or(u.ext, new(big.Int).SetUint64(s.uint64()))
		u.bits += 64
	}
}

// lessExpNeg decides U < e^{−k} for 0 ≤ k ≤ expTableSize.
func (u *uniformFraction) lessExpNeg(s *source, k int) bool {
	if k == 0 {
		return true
	}
	if u.ext == nil {
		t := expTable[k]
		if u.first.less(t.lo) == 1 { // U < (u+1)/2¹²⁸ ≤ lo/2¹²⁸ ≤ e^{−k}
			return true
		}
		if u.first.less(t.hi) == 0 { // U ≥ u/2¹²⁸ ≥ hi/2¹²⁸ ≥ e^{−k}
			return false
		}
	}
	return u.lessExpNegSlow(s, k)
}

// geometricE returns V with P(V ≥ k) = e^{−k} (a geometric variable with
// ratio e^{−1}), the "V" of Canonne–Kamath–Steinke 2020 Algorithm 2, by
// inversion: V = #{k ≥ 1 : U < e^{−k}} for one uniform U. All 88 tabulated
// comparisons are always made, so the work does not depend on V. If U is
// below e^{−88} (probability < 2⁻¹²⁷) the memoryless property gives
// V = 88 + an independent copy.
func (s *source) geometricE() uint64 {
	var base uint64
	for {
		u := s.fraction()
		var count, ambiguous uint64
		for k := 1; k <= expTableSize; k++ {
			t := &expTable[k]
			below := u.first.less(t.lo)               // surely U < e^{−k}
			notAbove := 1 - u.first.less(t.hi)        // surely U ≥ e^{−k}
			count += below                            // thresholds decrease in k
			ambiguous |= (1 - below) & (1 - notAbove) // undecided at 128 bits
		}
		if ambiguous != 0 {
			count = 0
			for k := 1; k <= expTableSize; k++ {
				if !u.lessExpNeg(s, k) {
					break
				}
				count++
			}
		}
		base += count
		if count < expTableSize || s.err != nil {
			return base
		}
	}
}

// bernoulliExpNegInt returns true with probability e^{−m} for a whole
// m ≤ 88: one comparison of a fresh uniform with the tabulated bounds.
func (s *source) bernoulliExpNegInt(m uint64) bool {
	if m > expTableSize {
		panic("noise: bernoulliExpNegInt beyond the table")
	}
	u := s.fraction()
	return u.lessExpNeg(s, int(m))
}
