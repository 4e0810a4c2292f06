package accountant

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestPLDMemo_SameFigures: with the memo, one more charge at a time (as a
// Ledger charges), the pld figures are bit for bit those computed from
// scratch without it, for a single Laplace type (prefix reuse), a mix of
// Laplace ε values, Gaussians and generic (ε, δ) releases, and after the memo
// evicted entries (a tiny bound).
func TestPLDMemo_SameFigures(t *testing.T) {
	cold, err := MethodByName(policy.AccountantPLD)
	if err != nil {
		t.Fatal(err)
	}
	mixed := func(i int) Event {
		switch i % 5 {
		case 0:
			return gaussian(20, 0.3, 1e-9)
		case 1:
			return Event{Mechanism: "other", Epsilon: 0.05, Delta: 1e-9}
		}
		return laplace([]float64{0.1, 0.2, 0.05}[i%3])
	}
	for _, tc := range []struct {
		name   string
		n      int
		points int
		event  func(int) Event
	}{
		{"laplace", 24, DefaultPLDMemoPoints, func(int) Event { return laplace(0.1) }},
		{"mixed", 12, DefaultPLDMemoPoints, mixed},
		{"evicting", 16, 3000, func(int) Event { return laplace(0.1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			memo := NewPLDMemo(tc.points)
			warm, _ := MethodWithMemo(policy.AccountantPLD, memo)
			var st []byte
			limit := Spent{Epsilon: math.Inf(1), Delta: 1e-6}
			for i := 0; i < tc.n; i++ {
				if st, err = warm.Compose(st, []Event{tc.event(i)}); err != nil {
					t.Fatal(err)
				}
				got, _, err := Evaluate(warm, st, limit)
				if err != nil {
					t.Fatal(err)
				}
				want, _, err := Evaluate(cold, st, limit)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("after %d charges: with memo %+v, from scratch %+v", i+1, got, want)
				}
				// Evaluating the same state again (a status) gives the same.
				if again, _, _ := Evaluate(warm, st, limit); again != got {
					t.Fatalf("after %d charges: second evaluation %+v, first %+v", i+1, again, got)
				}
			}
			if st := memo.s; st.points > st.maxPoints || len(st.entries) != st.listed() {
				t.Fatalf("memo holds %d points (bound %d), %d entries, %d in order", st.points, st.maxPoints, len(st.entries), st.listed())
			}
			if tc.name == "evicting" && len(memo.s.entries) == 0 {
				t.Fatal("nothing memoised")
			}
		})
	}
}

// TestPLDPower_MatchesDirect: power's high-bit-first product equals the
// plain repeated convolution of the same release (k-fold, one at a time)
// within floating-point error, for counts with every bit pattern up to 40.
func TestPLDPower_MatchesDirect(t *testing.T) {
	const h = 1e-3
	ty := pldType{laplace: true, epsilon: 0.1}
	one := ty.pmf(h).truncate()
	plain := pointMass()
	memo := NewPLDMemo(DefaultPLDMemoPoints)
	for k := int64(1); k <= 40; k++ {
		var err error
		if plain, err = plain.convolve(one); err != nil {
			t.Fatal(err)
		}
		ty.count = k
		got, err := power(ty, h, memo)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 0.5, 1, 2} {
			a, b := got.delta(eps, h), plain.delta(eps, h)
			if math.Abs(a-b) > 1e-12 {
				t.Fatalf("k=%d: δ(%v) = %v by power, %v by repeated convolution", k, eps, a, b)
			}
		}
	}
}

// TestPLDMemo_CurveKeyedOnCanonicalState: a state read back as PostgreSQL
// normalises jsonb (other spacing, other key order) finds the curve its
// charge memoised, rather than rebuilding it (attack round 68's note: the
// first status after each charge had rebuilt the whole row).
func TestPLDMemo_CurveKeyedOnCanonicalState(t *testing.T) {
	memo := NewPLDMemo(DefaultPLDMemoPoints)
	m, err := MethodWithMemo(policy.AccountantPLD, memo)
	if err != nil {
		t.Fatal(err)
	}
	var st []byte
	for i := range 20 {
		if st, err = m.Compose(st, []Event{laplace(0.05 + 0.01*float64(i%3))}); err != nil {
			t.Fatal(err)
		}
	}
	want, _, err := Evaluate(m, st, Spent{Epsilon: 3, Delta: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	curves := func() int {
		memo.s.mu.Lock()
		defer memo.s.mu.Unlock()
		n := 0
		for k := range memo.s.entries {
			if k.kind == "curve" {
				n++
			}
		}
		return n
	}
	before := curves()
	// The state as jsonb returns it: decoded and re-encoded through a
	// generic map (keys sorted, no struct order), indented.
	var generic any
	if err := json.Unmarshal(st, &generic); err != nil {
		t.Fatal(err)
	}
	normal, err := json.MarshalIndent(generic, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(normal, st) {
		t.Fatal("premise: the normalised state must differ in its bytes")
	}
	got, _, err := Evaluate(m, normal, Spent{Epsilon: 3, Delta: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the normalised state spends %+v, the charge's %+v", got, want)
	}
	if after := curves(); after != before {
		t.Errorf("the normalised state built a curve of its own (%d curves memoised, %d before)", after, before)
	}
}

// listed counts the entries in the owners' lists.
func (s *pldStore) listed() int {
	n := 0
	for _, o := range s.owners {
		n += o.order.Len()
	}
	return n
}

// TestAttack109_PLDMemoSharedLRU: the memo is every analyst's of a
// ledger; bob's charges at many distinct ε had pushed alice's entries out
// (a plain least-recently-used bound), so her next charge composed her
// whole history again: 84 ms against 12–23 ms warm (attack round 109, with
// the default bound). Now the entries evicted past the bound are those of
// whoever holds the most: alice's next charge finds all of hers, and
// computes what it computed warm.
func TestAttack109_PLDMemoSharedLRU(t *testing.T) {
	memo := NewPLDMemo(1 << 19)
	state := func(m *PLDMemo, count int, eps float64) {
		t.Helper()
		meth, err := MethodWithMemo(policy.AccountantPLD, m)
		if err != nil {
			t.Fatal(err)
		}
		events := make([]Event, count)
		for i := range events {
			events[i] = laplace(eps)
		}
		st, err := meth.Compose(nil, events)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := Evaluate(meth, st, Spent{Epsilon: math.Inf(1), Delta: 1e-6}); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := memo.For("alice"), memo.For("bob")
	state(alice, 300, 0.1)
	aliceKeys := map[pldMemoKey]bool{}
	for k := range memo.s.entries {
		aliceKeys[k] = true // the memo holds only alice's so far
	}
	if len(aliceKeys) == 0 || memo.s.points > memo.s.maxPoints/2 {
		t.Fatalf("alice's history: %d entries, %d points of %d; the test needs some, under half", len(aliceKeys), memo.s.points, memo.s.maxPoints)
	}
	evictions := 0
	for i := range 60 {
		before := len(memo.s.entries)
		state(bob, 40, 0.05+float64(i)*0.001)
		if len(memo.s.entries) < before {
			evictions++
		}
	}
	if memo.s.points > memo.s.maxPoints {
		t.Fatalf("memo holds %d points past its bound %d", memo.s.points, memo.s.maxPoints)
	}
	points := func(owner string) int {
		if o := memo.s.owners[owner]; o != nil {
			return o.points
		}
		return 0
	}
	if evictions == 0 {
		t.Fatalf("bob's charges never filled the memo (%d points of %d): the test proves nothing", memo.s.points, memo.s.maxPoints)
	}
	lost := 0
	for k := range aliceKeys {
		if _, ok := memo.s.entries[k]; !ok {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("bob's charges evicted %d of alice's %d entries (memo %d points; alice %d, bob %d)",
			lost, len(aliceKeys), memo.s.points, points("alice"), points("bob"))
	}
	if memo.s.listed() != len(memo.s.entries) {
		t.Fatalf("%d entries listed, %d kept", memo.s.listed(), len(memo.s.entries))
	}
}
