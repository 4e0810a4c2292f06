package accountant

import (
	"math"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestPLDEarlierOrder: for 11 releases of ε₀ = 1 (bits 1011) the pld
// figure in the composition order of builds before the memo (lowest bit
// first) differs from the canonical one in its low digits; the earlier
// builds' exact figures (either order, continuous Laplace) are matched by
// MatchesEarlierPLDOrder, not today's (randomized response) nor one a
// relative 1e-9 off. The ledger's Verify
// (package ledger, TestLedger_VerifyPLDEarlierOrder) relies on it.
func TestPLDEarlierOrder(t *testing.T) {
	m, err := MethodByName(policy.AccountantPLD)
	if err != nil {
		t.Fatal(err)
	}
	const n = 11
	var st []byte
	for i := 0; i < n; i++ {
		if st, err = m.Compose(st, []Event{laplace(1)}); err != nil {
			t.Fatal(err)
		}
	}
	limit := Spent{Epsilon: 50, Delta: 1e-5}
	current, _, err := Evaluate(m, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier builds composed Laplace as continuous noise
	// (pldAccountant.continuous), in the canonical order since the memo and
	// lowest bit first before it.
	canonical, _, err := Evaluate(composer{name: policy.AccountantPLD, tight: pldAccountant{continuous: true}}, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	earlier, _, err := Evaluate(composer{name: policy.AccountantPLD, tight: pldAccountant{lowBitFirst: true, continuous: true}}, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	// Known answer: the build just before the memo (79b936f^) computes
	// exactly this for the same state and limit (checked by running it).
	if got := DecimalText(earlier.Epsilon); got != "10.980444949439303" {
		t.Fatalf("earlier-order ε = %s, want 10.980444949439303 (what builds before the memo computed)", got)
	}
	if SameDecimal(DecimalText(canonical.Epsilon), DecimalText(earlier.Epsilon)) {
		t.Fatalf("ε = %s in both orders: the test would prove nothing", DecimalText(canonical.Epsilon))
	}
	if r := math.Abs(canonical.Epsilon-earlier.Epsilon) / canonical.Epsilon; r > 1e-8 || canonical.Epsilon >= n {
		t.Fatalf("ε = %v canonical, %v earlier order (relative %.1g): want a low-digit difference below basic composition", canonical.Epsilon, earlier.Epsilon, r)
	}
	if !(current.Epsilon > canonical.Epsilon) {
		t.Fatalf("ε = %v now, %v by the continuous model: randomized response composes worse", current.Epsilon, canonical.Epsilon)
	}
	delta := DecimalText(earlier.Delta)
	tests := []struct {
		name    string
		epsilon string
		want    bool
	}{
		{"earlier order", DecimalText(earlier.Epsilon), true},
		{"earlier builds' canonical order", DecimalText(canonical.Epsilon), true},
		{"today's figure (verified directly, not as an earlier build's)", DecimalText(current.Epsilon), false},
		{"off by 1e-9", strconv.FormatFloat(earlier.Epsilon*(1+1e-9), 'g', -1, 64), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchesEarlierPLDOrder(st, limit, [2]string{tt.epsilon, delta}); got != tt.want {
				t.Errorf("MatchesEarlierPLDOrder(ε = %s) = %v, want %v", tt.epsilon, got, tt.want)
			}
		})
	}
}

// TestPLDTypesCap_EarlierFigureVerifies: past pldMaxTypes release types a
// pld state is left to the RDP bound (no convolution); its figure is then
// no smaller than the PLD figure builds before the cap computed (both are
// valid upper bounds), and a budget row charged by such a build still
// verifies (MatchesEarlierPLDOrder), so `dpproxy ledger verify` does not
// report it.
func TestPLDTypesCap_EarlierFigureVerifies(t *testing.T) {
	m, err := MethodByName(policy.AccountantPLD)
	if err != nil {
		t.Fatal(err)
	}
	const k = pldMaxTypes + 20
	events := make([]Event, k)
	for i := range events {
		events[i] = laplace(0.01 + float64(i)*1e-4) // k distinct 4-digit keys
	}
	st, err := m.Compose(nil, events)
	if err != nil {
		t.Fatal(err)
	}
	if !pldTypesOver(st, pldMaxTypes) {
		t.Fatalf("the state does not hold more than %d types", pldMaxTypes)
	}
	limit := Spent{Epsilon: 100, Delta: 1e-6}
	capped, _, err := Evaluate(m, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	uncapped, _, err := Evaluate(composer{name: policy.AccountantPLD, tight: pldAccountant{uncapped: true, continuous: true}}, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	if !(capped.Epsilon > uncapped.Epsilon) {
		t.Fatalf("ε capped %v, uncapped %v: want the RDP fallback above the PLD figure (else the test proves nothing)", capped.Epsilon, uncapped.Epsilon)
	}
	if capped.Epsilon > 1.5*uncapped.Epsilon {
		t.Errorf("ε capped %v is more than 1.5x the PLD figure %v", capped.Epsilon, uncapped.Epsilon)
	}
	if !MatchesEarlierPLDOrder(st, limit, [2]string{DecimalText(uncapped.Epsilon), DecimalText(uncapped.Delta)}) {
		t.Error("the figure of a build before the cap does not verify")
	}
	if MatchesEarlierPLDOrder(st, limit, [2]string{DecimalText(uncapped.Epsilon * (1 + 1e-9)), DecimalText(uncapped.Delta)}) {
		t.Error("a figure 1e-9 off verifies")
	}
}
