package release

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/internal/dpref"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// withFloor returns a copy of the hospital policy whose floor on ε per
// query is floor.
func withFloor(t *testing.T, floor float64) *policy.Dataset {
	t.Helper()
	ds := *loadPolicy(t)
	ds.Budget.MinEpsilonPerQuery = floor
	return &ds
}

// runAndExplain runs the query through Run (with a ledger and an upstream
// that record what they see) and Explain, each bounded by a second, and
// returns both errors and whether anything was charged or sent upstream.
func runAndExplain(t *testing.T, ds *policy.Dataset, sql string, eps, delta float64, mech string) (runErr, explainErr error, touched bool) {
	t.Helper()
	plan, err := rewrite.Rewrite(ds, sql)
	if err != nil {
		t.Fatalf("Rewrite(%q) = %v", sql, err)
	}
	led := &memLedger{limit: 3}
	up := &fakeUpstream{}
	dpref.ReturnsWithin(t, time.Second, "Run", func() {
		_, runErr = newTestReleaser(t, led, 14).Run(context.Background(), Request{Analyst: "mallory", Dataset: ds, Plan: plan, Epsilon: eps, Delta: delta, Mechanism: mech, Upstream: up})
	})
	dpref.ReturnsWithin(t, time.Second, "Explain", func() {
		_, _, explainErr = Explain(ds, plan, Params{Epsilon: eps, Delta: delta, Mechanism: mech})
	})
	return runErr, explainErr, len(led.reserved) > 0 || len(up.calls) > 0
}

// wantRefusal fails unless err is a 22023 whose hint contains hint.
func wantRefusal(t *testing.T, what string, err error, hint string) {
	t.Helper()
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.InvalidParameterValue || !strings.Contains(pe.Hint, hint) {
		t.Fatalf("%s = %v (hint %q), want 22023 with a hint containing %q", what, err, hintOf(err), hint)
	}
}

func hintOf(err error) string {
	if pe, ok := pgerr.As(err); ok {
		return pe.Hint
	}
	return ""
}

// The measured hangs of issue 14, at the release: ε below the floor is
// refused by checkRequest; with the floor lowered, the noise scale is
// refused when the mechanisms are built. Either way before any charge and
// at once, in Run and in Explain.
func TestRun_BoundedWork(t *testing.T) {
	ds := loadPolicy(t)
	if ds.Budget.EpsilonFloor() != policy.DefaultMinEpsilonPerQuery {
		t.Fatalf("hospital floor = %v", ds.Budget.EpsilonFloor())
	}
	low := withFloor(t, 1e-20)
	tests := []struct {
		name  string
		ds    *policy.Dataset
		sql   string
		eps   float64
		delta float64
		mech  string
		hint  string // "" = answered
	}{
		{"count at ε 1e-16, below the floor", ds, "SELECT COUNT(*) FROM patients", 1e-16, 0, policy.MechanismLaplace, "budget.min_epsilon_per_query"},
		{"just below the floor", ds, "SELECT COUNT(*) FROM patients", math.Nextafter(1e-3, 0), 0, policy.MechanismLaplace, "the smallest epsilon per query on hospital is 0.001"},
		{"count at ε 1e-16, floor lowered", low, "SELECT COUNT(*) FROM patients", 1e-16, 0, policy.MechanismLaplace, scaleHint},
		// Sums are noised on a real grid (a unit's sum may be weighted,
		// dpplan/bounds.go), whose scale limit is 2¹⁰⁰⁰: these huge
		// sensitivities (Δ₁ ≈ 2.2e23) are answered, at once.
		{"sum of age·1e20 at the floor", ds, "SELECT SUM(age * 100000000000000000000) FROM visits", 1e-3, 0, policy.MechanismLaplace, ""},
		{"avg of age·1e20 at ε 1", ds, "SELECT AVG(age * 100000000000000000000) FROM visits", 1, 0, policy.MechanismLaplace, ""},
		{"gaussian sum of age·1e20", ds, "SELECT SUM(age * 100000000000000000000) FROM visits", 1e-3, 1e-7, policy.MechanismGaussian, ""},
		{"grouped count at ε 1e-16, floor lowered", low, "SELECT department, COUNT(*) FROM visits GROUP BY department", 1e-16, 0, policy.MechanismLaplace, scaleHint},
		{"count at the floor", ds, "SELECT COUNT(*) FROM patients", 1e-3, 0, policy.MechanismLaplace, ""},
		{"sum of age·1e6 at the floor", ds, "SELECT SUM(age * 1000000) FROM visits", 1e-3, 0, policy.MechanismLaplace, ""},
		{"NaN δ", ds, "SELECT COUNT(*) FROM patients", 0.1, math.NaN(), policy.MechanismLaplace, "dp.delta"},
		{"negative δ", ds, "SELECT COUNT(*) FROM patients", 0.1, -1e-9, policy.MechanismLaplace, "dp.delta"},
		{"δ of one", ds, "SELECT COUNT(*) FROM patients", 0.1, 1, policy.MechanismLaplace, "dp.delta"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runErr, explainErr, touched := runAndExplain(t, tc.ds, tc.sql, tc.eps, tc.delta, tc.mech)
			if tc.hint == "" {
				if explainErr != nil {
					t.Fatalf("Explain = %v, want an answer", explainErr)
				}
				// The fake upstream has no rows, so Run fails after the
				// charge; it must not be refused before it.
				if pe, ok := pgerr.As(runErr); ok && pe.Code == pgerr.InvalidParameterValue {
					t.Fatalf("Run = %v, want no refusal", runErr)
				}
				if !touched {
					t.Fatal("an accepted query was neither charged nor sent upstream")
				}
				return
			}
			wantRefusal(t, "Run", runErr, tc.hint)
			wantRefusal(t, "Explain", explainErr, tc.hint)
			if touched {
				t.Fatal("a refused query was charged or sent upstream")
			}
		})
	}
}

func TestShrinkToFit(t *testing.T) {
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1, -0.1} {
		if got := shrinkToFit(x, func(float64) bool { return false }); got != 0 {
			t.Fatalf("shrinkToFit(%v) = %v, want 0", x, got)
		}
	}
	// A criterion that never holds stops after maxShrinkSteps.
	if got := shrinkToFit(1, func(float64) bool { return false }); got != 0 {
		t.Fatalf("shrinkToFit(never) = %v, want 0", got)
	}
	// The old loop "for ge·div > ε { ge = Nextafter(ge, 0) }" never ended
	// for ε = −0.9, div = 3: −0.9/3·3 rounds above −0.9, and stepping
	// toward 0 only raises it.
	eps, div := -0.9, 3.0
	if ge := eps / div; !(ge*div > eps) {
		t.Fatalf("premise: %v·%v = %v is not above %v", ge, div, ge*div, eps)
	}
	var ge float64
	dpref.ReturnsWithin(t, time.Second, "groupEpsilon", func() { ge = groupEpsilon(eps, 3) })
	if ge != 0 {
		t.Fatalf("groupEpsilon(-0.9) = %v, want 0", ge)
	}
	for _, tc := range []struct {
		x float64
		m int
	}{{math.Inf(1), 3}, {math.NaN(), 3}, {-1, 3}, {1, 0}, {5e-324, 3}, {5e-324, 1}, {1e-300, 7}, {math.MaxFloat64, 3}, {0.1, 7}} {
		var e float64
		dpref.ReturnsWithin(t, time.Second, "splitDown", func() { e = splitDown(tc.x, tc.m) })
		if math.IsNaN(e) || e < 0 {
			t.Fatalf("splitDown(%v, %d) = %v", tc.x, tc.m, e)
		}
		if e > 0 {
			total := new(big.Rat).Mul(new(big.Rat).SetFloat64(e), big.NewRat(int64(tc.m), 1))
			if total.Cmp(new(big.Rat).SetFloat64(tc.x)) > 0 {
				t.Fatalf("splitDown(%v, %d) = %v: m·e exceeds x", tc.x, tc.m, e)
			}
		}
	}
	if got := splitDown(5e-324, 1); got != 5e-324 {
		t.Fatalf("splitDown(5e-324, 1) = %v", got)
	}
}

// TestCheckAnswerCells: a plan over public keys whose groups × measurement
// weights exceed maxAnswerCells is refused with 54000 before any charge
// (issue 27, bounded proxy CPU); a quantile weighs quantileCellWeight. So is
// one whose answer would hold more than MaxAnswerBytes.
func TestCheckAnswerCells(t *testing.T) {
	key := func(n int) rewrite.Key {
		d := make([]string, n)
		for i := range d {
			d[i] = strconv.Itoa(i)
		}
		return rewrite.Key{Column: "k", Domain: d}
	}
	count := rewrite.Measure{Kind: rewrite.MeasureCount}
	// A quantile weighs its grid's worst exponential-mechanism work: one
	// cell per 11 buckets (attack round 64).
	quant := func(buckets int) rewrite.Measure {
		return rewrite.Measure{Kind: rewrite.MeasureQuantile, Quantile: &rewrite.Quantile{Buckets: buckets}}
	}
	// A CASE key's labels are the analyst's constants (attack round 55).
	labels := func(n int) rewrite.Key {
		return rewrite.Key{Column: "k", Domain: []string{strings.Repeat("a", n), strings.Repeat("b", n)}}
	}
	for _, c := range []struct {
		name   string
		keys   []rewrite.Key
		ms     []rewrite.Measure
		refuse bool
	}{
		{"ungrouped", nil, []rewrite.Measure{count, count, count}, false},
		{"days × departments, 4 measures", []rewrite.Key{key(1827), key(7)}, []rewrite.Measure{count, count, count, count}, false},
		{"days × departments, 5 measures", []rewrite.Key{key(1827), key(7)}, []rewrite.Measure{count, count, count, count, count}, true},
		{"at the limit", []rewrite.Key{key(maxAnswerCells / 2)}, []rewrite.Measure{count, count}, false},
		{"over the limit", []rewrite.Key{key(maxAnswerCells/2 + 1)}, []rewrite.Measure{count, count}, true},
		{"a million groups", []rewrite.Key{key(1000), key(1000)}, []rewrite.Measure{count}, true},
		{"median per month, full grid", []rewrite.Key{key(60)}, []rewrite.Measure{quant(1 << 14)}, true},
		{"median per month, 8192 buckets", []rewrite.Key{key(60)}, []rewrite.Measure{quant(1 << 13)}, false},
		{"median per week, 2048 buckets", []rewrite.Key{key(261)}, []rewrite.Measure{quant(1 << 11)}, false},
		{"median per day, 256 buckets", []rewrite.Key{key(1827)}, []rewrite.Measure{quant(1 << 8)}, false},
		{"median per day, 1024 buckets", []rewrite.Key{key(1827)}, []rewrite.Measure{quant(1 << 10)}, true},
		// 2 × 1,000 groups of 3 cells: few cells, but 20 KB rows, 40 MB.
		{"long labels", []rewrite.Key{labels(20000), key(1000)}, []rewrite.Measure{count}, true},
		{"short labels", []rewrite.Key{labels(200), key(1000)}, []rewrite.Measure{count}, false},
		// 60,000 groups, one number and keys of 40 and 5 bytes:
		// 60,000 × (64 + 56 + 21) = 8.5 MB.
		{"the widest plain answer", []rewrite.Key{labels(40), key(maxAnswerCells / 2)}, []rewrite.Measure{count}, false},
	} {
		outputs := make([]rewrite.Output, len(c.ms))
		err := checkAnswerCells(&rewrite.Plan{Keys: c.keys, Measures: c.ms, Outputs: outputs})
		if pe, ok := pgerr.As(err); c.refuse != (err != nil) || err != nil && (!ok || pe.Code != pgerr.ProgramLimitExceeded) {
			t.Errorf("%s: %v, want refused %v (54000)", c.name, err, c.refuse)
		}
	}
}

// TestCapErrors: an answer's error text is cut at 64 KiB on a character
// boundary, saying where the rest is (attack round 65); shorter ones are
// left alone.
func TestCapErrors(t *testing.T) {
	if got := capErrors("m0 ±3"); got != "m0 ±3" {
		t.Errorf("a short text changed: %q", got)
	}
	long := strings.Repeat("±", maxErrorsBytes) // 2 bytes each: the cut falls inside one
	got := capErrors(long)
	if !utf8.ValidString(got) || len(got) > maxErrorsBytes+200 || !strings.Contains(got, "dp.error_columns") {
		t.Errorf("cut text: %d bytes, valid %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-min(len(got), 80):])
	}
}
