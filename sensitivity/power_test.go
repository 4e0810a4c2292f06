// Privacy-critical: needs DP review.

package sensitivity

// Tests with power (issue 19): each sensitivity is compared with the
// largest change one unit can make, found by brute force over the unit's
// possible contributions under the contribution bounds (a reference model
// of bounding written here: clamp each value to [lower, upper], keep at
// most maxRows rows per group and at most L0 groups), and the formulas are
// checked on random neighbouring datasets. A bound below the brute-force
// maximum (e.g. halved) is unsound; one above it (e.g. doubled) wastes
// accuracy; both fail.

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
)

// kind is an aggregate whose per-group value is a sum of per-row terms.
type kind int

const (
	kCount kind = iota
	kSum
	kSumSq
	kUnits
	kCentredSum
	kCentredSumSq
)

func (k kind) String() string {
	return [...]string{"count", "sum", "sum of squares", "distinct units", "centred sum", "centred sum of squares"}[k]
}

// refClamp is the reference clamp to [lo, hi].
func refClamp(x, lo, hi float64) float64 { return math.Min(math.Max(x, lo), hi) }

// groupContribution is what one unit adds to one group's measure: its kept
// rows (at most maxRows, the rest dropped), each clamped.
func groupContribution(k kind, rows []float64, maxRows int, lo, hi, c float64) float64 {
	if len(rows) > maxRows {
		rows = rows[:maxRows]
	}
	if k == kUnits {
		if len(rows) > 0 {
			return 1
		}
		return 0
	}
	var s float64
	for _, x := range rows {
		v := refClamp(x, lo, hi)
		switch k {
		case kCount:
			s++
		case kSum:
			s += v
		case kSumSq:
			s += v * v
		case kCentredSum:
			s += v - c
		case kCentredSumSq:
			s += (v - c) * (v - c)
		}
	}
	return s
}

// bruteLInf returns max |groupContribution| over every multiset of up to
// maxRows+1 rows (one more than kept, to see that the surplus is dropped)
// drawn from values: the ends, 0, the centre, points inside and outside
// the bounds.
func bruteLInf(k kind, maxRows int, lo, hi, c float64) float64 {
	values := []float64{lo, hi, 0, c, (lo + hi) / 2, lo + (hi-lo)/3, lo - 7, hi + 7, 10 * hi, 10*lo - 1}
	best := 0.0
	var rec func(start int, rows []float64)
	rec = func(start int, rows []float64) {
		best = math.Max(best, math.Abs(groupContribution(k, rows, maxRows, lo, hi, c)))
		if len(rows) == maxRows+1 {
			return
		}
		for i := start; i < len(values); i++ {
			rec(i, append(rows, values[i]))
		}
	}
	rec(0, nil)
	return best
}

// packageLInf is the package's L∞ for kind k.
func packageLInf(k kind, maxRows int, lo, hi, c float64) float64 {
	switch k {
	case kCount:
		return CountLInf(maxRows)
	case kSum:
		return SumLInf(maxRows, lo, hi)
	case kSumSq:
		return SumSqLInf(maxRows, lo, hi)
	case kUnits:
		return UnitCountLInf()
	case kCentredSum:
		return CentredSumLInf(maxRows, lo, hi, new(big.Rat).SetFloat64(c))
	default:
		return CentredSumSqLInf(maxRows, lo, hi, new(big.Rat).SetFloat64(c))
	}
}

type boundsCase struct {
	maxRows, l0 int
	lo, hi, c   float64
	name        string
}

func boundsCases() []boundsCase {
	var out []boundsCase
	for _, rows := range []int{1, 2, 3} {
		for _, l0 := range []int{1, 2, 4, 7} {
			for _, b := range [][2]float64{{0, 20000}, {-5, 3}, {-110, -10}, {1910, 2024}, {0.25, 0.5}} {
				c := (b[0] + b[1]) / 2
				out = append(out, boundsCase{maxRows: rows, l0: l0, lo: b[0], hi: b[1], c: c,
					name: fmt.Sprintf("rows=%d L0=%d [%g,%g]", rows, l0, b[0], b[1])})
			}
		}
	}
	return out
}

// TestSensitivity_MatchesBruteForce checks every L∞ formula, and L1 and L2
// over L0 groups, against the brute-force maximum change of one unit: the
// bound must be at least the maximum (sound) and at most a relative 10⁻¹²
// above it (tight).
func TestSensitivity_MatchesBruteForce(t *testing.T) {
	for _, bc := range boundsCases() {
		for _, k := range []kind{kCount, kSum, kSumSq, kUnits, kCentredSum, kCentredSumSq} {
			want := bruteLInf(k, bc.maxRows, bc.lo, bc.hi, bc.c)
			got := packageLInf(k, bc.maxRows, bc.lo, bc.hi, bc.c)
			if !(got >= want) || got > want*(1+1e-12) {
				t.Errorf("%s, %v: L∞ = %g, brute-force maximum change %g", bc.name, k, got, want)
			}
			// One unit changes at most L0 groups, each by at most the
			// maximum: the worst vector has L0 coordinates equal to it.
			worst := make([]float64, bc.l0)
			for i := range worst {
				worst[i] = want
			}
			var l1, l2 float64
			for _, v := range worst {
				l1 += v
				l2 += v * v
			}
			l2 = math.Sqrt(l2)
			b := Bounds{L0: bc.l0, LInf: got}
			if got, err := L1(b); err != nil || !(got >= l1*(1-1e-15)) || got > l1*(1+1e-12) {
				t.Errorf("%s, %v: L1 = %g (%v), worst change %g", bc.name, k, got, err, l1)
			}
			if got, err := L2(b); err != nil || !(got >= l2*(1-1e-15)) || got > l2*(1+1e-12) {
				t.Errorf("%s, %v: L2 = %g (%v), worst change %g", bc.name, k, got, err, l2)
			}
		}
	}
}

// TestSampleAggLInf_MatchesBruteForce: a unit moves one block's clipped,
// centred term between two values of [lower − c, upper − c] ∪ {0}.
func TestSampleAggLInf_MatchesBruteForce(t *testing.T) {
	for _, b := range [][2]float64{{0, 1}, {-3, 7}, {0.1, 0.7}, {1e6, 1e6 + 1}} {
		for _, c := range []float64{b[0], b[1], (b[0] + b[1]) / 2} {
			terms := []float64{0}
			for _, f := range []float64{b[0] - 5, b[0], (b[0] + b[1]) / 2, b[1], b[1] + 5} {
				terms = append(terms, refClamp(f, b[0], b[1])-c)
			}
			var want float64
			for _, x := range terms {
				for _, y := range terms {
					want = math.Max(want, math.Abs(x-y))
				}
			}
			if got := SampleAggLInf(b[0], b[1]); !(got >= want) || got > want*(1+1e-12) {
				t.Errorf("SampleAggLInf(%g, %g) = %g, brute-force maximum %g (c = %g)", b[0], b[1], got, want, c)
			}
		}
	}
}

// refDataset is rows per unit per group, before bounding.
type refDataset map[int]map[int][]float64

// refAggregate is the reference bounded aggregation: per unit, its groups
// in increasing order keep the first l0, each group's rows the first
// maxRows (the production SQL picks them at random; any choice made
// independently of the other units gives the same bounds), and the
// measure per group is the sum over units of their contributions.
func refAggregate(d refDataset, k kind, l0, maxRows, groups int, lo, hi, c float64) []float64 {
	out := make([]float64, groups)
	for _, gs := range d {
		keys := make([]int, 0, len(gs))
		for g := range gs {
			keys = append(keys, g)
		}
		sort.Ints(keys)
		if len(keys) > l0 {
			keys = keys[:l0]
		}
		for _, g := range keys {
			out[g] += groupContribution(k, gs[g], maxRows, lo, hi, c)
		}
	}
	return out
}

// TestSensitivity_RandomNeighbours draws random datasets (units with
// random groups, rows and values, inside and outside the bounds), removes
// one unit, and checks that the change of the bounded aggregate vector
// never exceeds L∞, L1 and L2, and that the largest change seen over all
// trials, for a unit built to be extreme, reaches L1 exactly.
func TestSensitivity_RandomNeighbours(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 19))
	const groups = 7
	for _, bc := range boundsCases() {
		for _, k := range []kind{kCount, kSum, kSumSq, kUnits, kCentredSum, kCentredSumSq} {
			lInf := packageLInf(k, bc.maxRows, bc.lo, bc.hi, bc.c)
			b := Bounds{L0: bc.l0, LInf: lInf}
			l1, _ := L1(b)
			l2, _ := L2(b)
			var seen float64
			for trial := 0; trial < 20; trial++ {
				d := refDataset{}
				for u := 0; u < 6; u++ {
					d[u] = map[int][]float64{}
					for g := 0; g < 1+rng.IntN(groups); g++ {
						grp := rng.IntN(groups)
						for r := 0; r < 1+rng.IntN(bc.maxRows+2); r++ {
							x := bc.lo + (bc.hi-bc.lo)*(rng.Float64()*1.4-0.2)
							d[u][grp] = append(d[u][grp], x)
						}
					}
				}
				// An extreme unit: every group, maxRows+1 rows at the
				// value farthest from 0 (or from the centre).
				ext := map[int][]float64{}
				far := bc.hi
				if k == kCentredSum || k == kCentredSumSq {
					far = bc.hi + 1
				} else if math.Abs(bc.lo) > math.Abs(bc.hi) {
					far = bc.lo
				}
				for g := 0; g < groups; g++ {
					for r := 0; r <= bc.maxRows; r++ {
						ext[g] = append(ext[g], far)
					}
				}
				d[99] = ext
				full := refAggregate(d, k, bc.l0, bc.maxRows, groups, bc.lo, bc.hi, bc.c)
				for u := range d {
					without := refDataset{}
					for v, gs := range d {
						if v != u {
							without[v] = gs
						}
					}
					less := refAggregate(without, k, bc.l0, bc.maxRows, groups, bc.lo, bc.hi, bc.c)
					var n1, n2, nInf float64
					for g := range full {
						x := math.Abs(full[g] - less[g])
						n1 += x
						n2 += x * x
						nInf = math.Max(nInf, x)
					}
					n2 = math.Sqrt(n2)
					slack := 1 + 1e-9
					if nInf > lInf*slack || n1 > l1*slack || n2 > l2*slack {
						t.Fatalf("%s, %v: removing unit %d changes the aggregate by L∞ %g, L1 %g, L2 %g; bounds %g, %g, %g", bc.name, k, u, nInf, n1, n2, lInf, l1, l2)
					}
					seen = math.Max(seen, n1)
				}
			}
			if seen < l1*(1-1e-9) {
				t.Errorf("%s, %v: the extreme unit changes the aggregate by %g in L1, below the bound %g: the bound is not tight", bc.name, k, seen, l1)
			}
		}
	}
}
