package accountant

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
)

// TestLedger_VerifyPLDEarlierOrder: a pld budget row whose figures were
// computed in the composition order of builds before the memo (lowest bit
// first) differs from the canonical recomputation in its low digits; Verify
// accepts it as written by an earlier build, and still reports a row that
// matches neither order.
func TestLedger_VerifyPLDEarlierOrder(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("d", 50, 1e-5, policy.AccountantPLD)
	// 11 releases of ε₀ = 1 (bits 1011): the two orders differ, and the
	// PLD figure (about 10.98) is below basic (11) and RDP.
	const n = 11
	reserveN(t, l, charge("alice", ds, laplace(1)), n)
	rep := wantClean(t, l, 2, n)
	if rep.PLDEarlierOrder != 0 {
		t.Fatalf("PLDEarlierOrder = %d for rows written by this build, want 0", rep.PLDEarlierOrder)
	}

	m, err := MethodByName(policy.AccountantPLD)
	if err != nil {
		t.Fatal(err)
	}
	var st []byte
	for i := 0; i < n; i++ {
		if st, err = m.Compose(st, []Event{laplace(1)}); err != nil {
			t.Fatal(err)
		}
	}
	limit := Spent{Epsilon: 50, Delta: 1e-5}
	canonical, _, err := evaluate(m, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	earlier, _, err := evaluate(composer{name: policy.AccountantPLD, tight: pldAccountant{lowBitFirst: true}}, st, limit)
	if err != nil {
		t.Fatal(err)
	}
	// Known answer: the build just before the memo (79b936f^) computes
	// exactly this for the same state and limit (checked by running it).
	if got := numText(earlier.Epsilon); got != "10.980444949439303" {
		t.Fatalf("earlier-order ε = %s, want 10.980444949439303 (what builds before the memo computed)", got)
	}
	if sameDecimal(numText(canonical.Epsilon), numText(earlier.Epsilon)) {
		t.Fatalf("ε = %s in both orders: the test would prove nothing", numText(canonical.Epsilon))
	}
	if r := math.Abs(canonical.Epsilon-earlier.Epsilon) / canonical.Epsilon; r > 1e-8 || canonical.Epsilon >= n {
		t.Fatalf("ε = %v canonical, %v earlier order (relative %.1g): want a low-digit difference below basic composition", canonical.Epsilon, earlier.Epsilon, r)
	}
	if stored := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE analyst = 'alice'`); !sameDecimal(stored, numText(canonical.Epsilon)) {
		t.Fatalf("stored ε %s, want the canonical %s", stored, numText(canonical.Epsilon))
	}

	set := func(eps string) {
		t.Helper()
		if err := pgtest.Exec(ctx, dsn, `UPDATE dpproxy_ledger.budget SET spent_epsilon = `+eps+` WHERE analyst = 'alice'`); err != nil {
			t.Fatal(err)
		}
	}
	// The row as an earlier build wrote it.
	set(numText(earlier.Epsilon))
	rep = wantClean(t, l, 2, n)
	if rep.PLDEarlierOrder != 1 {
		t.Fatalf("PLDEarlierOrder = %d, want 1", rep.PLDEarlierOrder)
	}
	// Off by a relative 1e-9 from both: a mismatch (the tolerance is not
	// widened).
	set(strconv.FormatFloat(earlier.Epsilon*(1+1e-9), 'g', -1, 64))
	rep = mustVerify(t, l)
	if rep.OK() || !strings.Contains(strings.Join(rep.Mismatches, "\n"), "d/alice: spent ε") {
		t.Fatalf("Verify of a row matching neither order: %q, want a mismatch of d/alice's ε", rep.Mismatches)
	}
	// The next charge rewrites the row in the canonical order.
	set(numText(earlier.Epsilon))
	reserveN(t, l, charge("alice", ds, laplace(1)), 1)
	if rep = wantClean(t, l, 2, n+1); rep.PLDEarlierOrder != 0 {
		t.Fatalf("PLDEarlierOrder = %d after a new charge, want 0", rep.PLDEarlierOrder)
	}
}
