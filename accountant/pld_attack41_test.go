package accountant

import (
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// Attack round 41, finding 1 (severity: medium — cross-analyst availability
// of the ledger; no privacy loss).
//
// The pld accountant bounds the composed distribution to 2¹⁶ grid points "to
// keep a charge fast", but not the number of distinct release types it
// convolves: a state holds one type per distinct ε₀ rounded to 4
// significant digits, and every evaluation (pldState.build) convolves the
// growing distribution with each type in turn — K convolutions of up to
// 2¹⁶ points, none memoised across types (the memo only keeps each type's
// own powers and the curve of an identical state). An analyst who sets
// dp.epsilon to 0.001000, 0.001001, 0.001002, … (about 0.6 ε of budget in
// all, ε ≥ budget.min_epsilon_per_query) builds K ≈ 600 types on their own
// budget row; from then on each of their charges costs about 2.7 s of proxy
// CPU in Ledger.reserveTx (BenchmarkAttack41_PLDManyTypes on the review machine, 2 cores: 0.1 s at
// K = 100, 1.1 s at K = 400, 2.2 s at K = 600; a probe measured 2.7 s at
// K = 600 with the memo cold; beyond K ≈ 650 the size check falls back to
// RDP and it is cheap again).
//
// That CPU runs between the two batches of reserveTx, while the dataset's
// global budget row (analyst "", locked FOR UPDATE by EVERY charge, with or
// without budget.global_epsilon) and a ledger pool connection (default pool:
// max(4, NumCPU)) are held. So one analyst's charges serialise every other
// analyst's charges on the dataset, across all proxies sharing the ledger,
// behind seconds of their own accounting, and fill the proxy's ledger pool
// (other analysts' cache look-ups, SHOW dp.budget and answer records wait for
// a connection; Reserve runs under the session's context, with no deadline).
// With a global cap or a shared team row the same K types are evaluated on
// the victims' own charges too (the global row's state holds every
// analyst's types). The cost is not bounded before the charge by a public
// quantity: it depends on the history of distinct ε values.
//
// Safe behaviour asserted: an evaluation that computes the PLD convolves a
// bounded number of release types (here 128; K = 100 types cost ~0.1 s) — otherwise it falls back to the RDP bound, as it already
// does for a distribution over 2¹⁶ points.
//
// Suggested fix: round ε₀ keys to a coarse public grid (e.g. 2 significant
// digits, or a geometric grid of ~64 steps per decade — rounding up is
// valid by the post-processing argument in pld.go), and/or fall back to RDP
// when the state has more than a fixed number of types (say 128) or when Σ over
// types of the distribution's size exceeds a work budget; and compose the
// state outside the FOR UPDATE window (read, compose, then lock and check
// the row is unchanged), so the global row is held only for a round trip.
const attack41MaxPLDTypes = 128

// attack41ManyTypes is the state an analyst builds with k charges at
// distinct ε (0.001000, 0.001001, …: distinct 4-digit keys).
func attack41ManyTypes(t testing.TB, m Method, k int) []byte {
	t.Helper()
	events := make([]Event, k)
	for i := range events {
		events[i] = laplace(0.001 + float64(i)*1e-6)
	}
	st, err := m.Compose(nil, events)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAttack41_PLDTypesBounded(t *testing.T) {
	m, err := MethodByName(policy.AccountantPLD)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{100, 300, 600} {
		st := attack41ManyTypes(t, m, k)
		st, err = m.Compose(st, []Event{laplace(0.01)})
		if err != nil {
			t.Fatal(err)
		}
		s, err := decodeState(st)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := unmarshalTight[pldState](s.Tight)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := ps.types()
		if err != nil {
			t.Fatal(err)
		}
		c, err := ps.build(nil, false, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if c.ok && len(ts) > attack41MaxPLDTypes {
			t.Errorf("K=%d distinct ε: one evaluation convolved %d release types into a %d-point distribution "+
				"(each charge of the analyst, inside the ledger's FOR UPDATE of the dataset's global row); "+
				"want at most %d types or the RDP fallback", k, len(ts), len(c.d.p), attack41MaxPLDTypes)
		}
	}
}

// BenchmarkAttack41_PLDManyTypes is one more charge (Compose, then Evaluate
// at a δ cap, as Ledger.reserveTx does for a capped row) on a budget row
// holding K distinct ε types, with the ledger's memo.
func BenchmarkAttack41_PLDManyTypes(b *testing.B) {
	for _, k := range []int{100, 400, 600} {
		b.Run("types="+itoa41(k), func(b *testing.B) {
			m, err := MethodWithMemo(policy.AccountantPLD, NewPLDMemo(DefaultPLDMemoPoints))
			if err != nil {
				b.Fatal(err)
			}
			base := attack41ManyTypes(b, m, k)
			limit := Spent{Epsilon: 100, Delta: 1e-6}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				st, err := m.Compose(base, []Event{laplace(0.01 + float64(i%7)*1e-4)})
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := Evaluate(m, st, limit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa41(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
