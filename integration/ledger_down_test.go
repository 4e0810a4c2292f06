package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestLedger_DownFailsClosed makes the ledger unreachable for the proxy
// (its role may not log in, its connections are terminated): DP queries are
// refused with 58000 and nothing is answered, the session stays usable, and
// once the ledger is back the proxy answers again without a restart.
func TestLedger_DownFailsClosed(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := connect(t, ctx, env.upstreamDSN)
	restore := func() {
		if _, err := admin.Exec(context.Background(), "ALTER ROLE dpproxy_ledger LOGIN"); err != nil {
			t.Errorf("restore the ledger role: %v", err)
		}
	}
	t.Cleanup(restore)
	if _, err := admin.Exec(ctx, "ALTER ROLE dpproxy_ledger NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'dpproxy_ledger'"); err != nil {
		t.Fatal(err)
	}

	c := connect(t, ctx, analystDSN("alice"))
	var n int64
	err := c.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'west' AND birth_year < 1950").Scan(&n)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "58000" {
		t.Fatalf("DP query with the ledger down = %v, want 58000", err)
	}
	if strings.Contains(pe.Message+pe.Detail+pe.Hint, "dpproxy_ledger:") || strings.Contains(pe.Message+pe.Detail+pe.Hint, "password") {
		t.Fatalf("error leaks connection details: %+v", pe)
	}
	// The session is still usable.
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("session after the refusal: %v", err)
	}

	restore()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'west' AND birth_year < 1950").Scan(&n)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not recover after the ledger came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
