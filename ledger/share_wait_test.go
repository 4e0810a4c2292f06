package ledger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
)

// TestReserve_ShareWaitSaysWhy: a charge that waits for the analyst's one
// charge share (another of their statements is being charged) and whose
// context ends meanwhile is refused with 57014, worded as a statement
// timeout when its deadline passed and as a cancel otherwise, says what
// it waited for, and charges nothing; another analyst is not held.
func TestReserve_ShareWaitSaysWhy(t *testing.T) {
	l := openLedger(t, pgtest.NewDatabase(t))
	ds := testPolicy("hospital", 10, 1e-6, policy.AccountantPure)
	done, err := l.charges.Acquire(context.Background(), "alice") // alice's other charge, in flight
	if err != nil {
		t.Fatal(err)
	}
	defer done()

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = l.Reserve(short, charge("alice", ds, laplace(0.1)))
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.QueryCanceled || !strings.Contains(pe.Message, "statement timeout") {
		t.Fatalf("deadline while waiting: %v, want 57014 due to statement timeout", err)
	}
	if !strings.Contains(pe.Detail, "one at a time") || pe.Hint == "" {
		t.Errorf("the error does not say what it waited for: %+v", pe)
	}

	gone, stop := context.WithCancel(context.Background())
	stop()
	_, err = l.Reserve(gone, charge("alice", ds, laplace(0.1)))
	if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.QueryCanceled || !strings.Contains(pe.Message, "user request") {
		t.Errorf("cancel while waiting: %v, want 57014 due to user request", err)
	}

	if _, err := l.Reserve(context.Background(), charge("bob", ds, laplace(0.1))); err != nil {
		t.Fatalf("bob's charge while alice's waits: %v", err)
	}
	wantClean(t, l, 2, 1) // bob's row and the global one; bob's charge alone
}
