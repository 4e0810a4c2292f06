package ledger

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
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

	// The earlier order's figure for this state (accountant's
	// TestPLDEarlierOrder: what builds before the memo computed), which
	// differs from the canonical one in its low digits.
	const earlier = "10.980444949439303"
	canonical := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE analyst = 'alice'`)
	if accountant.SameDecimal(canonical, earlier) {
		t.Fatalf("stored ε %s is the earlier order's: the test would prove nothing", canonical)
	}
	earlierEps, err := strconv.ParseFloat(earlier, 64)
	if err != nil {
		t.Fatal(err)
	}

	set := func(eps string) {
		t.Helper()
		if err := pgtest.Exec(ctx, dsn, `UPDATE dpproxy_ledger.budget SET spent_epsilon = `+eps+` WHERE analyst = 'alice'`); err != nil {
			t.Fatal(err)
		}
	}
	// The row as an earlier build wrote it.
	set(earlier)
	rep = wantClean(t, l, 2, n)
	if rep.PLDEarlierOrder != 1 {
		t.Fatalf("PLDEarlierOrder = %d, want 1", rep.PLDEarlierOrder)
	}
	// Off by a relative 1e-9 from both: a mismatch (the tolerance is not
	// widened).
	set(strconv.FormatFloat(earlierEps*(1+1e-9), 'g', -1, 64))
	rep = mustVerify(t, l)
	if rep.OK() || !strings.Contains(strings.Join(rep.Mismatches, "\n"), "d/alice: spent ε") {
		t.Fatalf("Verify of a row matching neither order: %q, want a mismatch of d/alice's ε", rep.Mismatches)
	}
	// The next charge rewrites the row in the canonical order.
	set(earlier)
	reserveN(t, l, charge("alice", ds, laplace(1)), 1)
	if rep = wantClean(t, l, 2, n+1); rep.PLDEarlierOrder != 0 {
		t.Fatalf("PLDEarlierOrder = %d after a new charge, want 0", rep.PLDEarlierOrder)
	}
}
