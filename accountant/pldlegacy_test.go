package accountant

import (
	"math"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// TestPLDEarlierOrder: for 11 releases of ε₀ = 1 (bits 1011) the pld
// figure in the composition order of builds before the memo (lowest bit
// first) differs from the canonical one in its low digits; only the
// earlier order's exact figure is matched by MatchesEarlierPLDOrder, not
// the canonical one nor one a relative 1e-9 off. The ledger's Verify
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
	canonical, _, err := Evaluate(m, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	earlier, _, err := Evaluate(composer{name: policy.AccountantPLD, tight: pldAccountant{lowBitFirst: true}}, st, limit)
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
	delta := DecimalText(earlier.Delta)
	tests := []struct {
		name    string
		epsilon string
		want    bool
	}{
		{"earlier order", DecimalText(earlier.Epsilon), true},
		{"canonical order", DecimalText(canonical.Epsilon), false},
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
