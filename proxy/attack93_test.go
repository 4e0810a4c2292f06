package proxy

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wideCatalogSQL is a short catalog statement with about 1,650 result
// columns: "*" repeated over pg_class (33 columns in PostgreSQL 15).
func wideCatalogSQL() string {
	return "SELECT " + strings.Repeat("*,", 49) + "* FROM pg_catalog.pg_class"
}

// retainedHeap is the proxy process's heap in use after a GC.
func retainedHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestAttack93_DescribedStatementsUncounted (high; rule 1: proxy memory an
// analyst keeps between statements, not bounded by the per-analyst
// account): a named prepared statement is charged to the analyst's
// account at Parse by its text and parameter types only
// (statementBytes), but the first Describe of it keeps the description
// in the statement (preparedStatement.desc) for the session's life: for
// a catalog statement, the shadow's field descriptions, one pgconn
// FieldDescription (about 40 bytes plus the name's own allocation) per
// result column. PostgreSQL allows 1,664 result columns, and
// "SELECT *,*,…,* FROM pg_class" (50 stars, 126 bytes of text) has 1,650:
// about 100 KB kept per 126 bytes charged. A session keeps 2,048 named
// statements, and one analyst a quarter of max_connections sessions, so
// the account (MaxMemoryPerAnalyst, 256 MiB by default) no longer bounds
// what one analyst's idle sessions keep: each Parse + Describe is free
// (catalog) and takes one shadow round trip.
//
// Want: the description counted as the statement is (the account charged
// before it is kept, 54000 when it does not fit), so that the heap the
// statements keep stays near the account's figure.
func TestAttack93_DescribedStatementsUncounted(t *testing.T) {
	const bound = 16 << 20
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = bound }})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pc := ts.connect(t)
	sql := wideCatalogSQL()
	sd, err := pc.Prepare(ctx, "w0", sql, nil)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Logf("one statement: %d bytes of text, %d result columns", len(sql), len(sd.Fields))

	base := retainedHeap()
	const n = 600
	refused := 0
	for i := 1; i <= n; i++ {
		if _, err := pc.Prepare(ctx, fmt.Sprintf("w%d", i), sql, nil); err != nil {
			if sqlstate(err) == "54000" {
				refused++
				continue
			}
			t.Fatalf("prepare %d: %v", i, err)
		}
	}
	kept := retainedHeap() - base
	acct := ts.srv.account("alice").held.Load()
	t.Logf("%d named, described catalog statements (%d refused): heap kept +%d MiB, alice's account %d KiB, bound %d MiB",
		n, refused, kept>>20, acct>>10, bound>>20)
	// Still alive and usable.
	if _, err := pc.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	if kept > 2*bound || kept > 8*acct+(4<<20) {
		t.Errorf("one session's %d described statements keep %d MiB of the proxy's heap, with alice's account at %d KiB (bound %d MiB): statement descriptions are uncounted",
			n, kept>>20, acct>>10, bound>>20)
	}
	runtime.KeepAlive(pc)
}
