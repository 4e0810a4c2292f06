package integration

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lockedWriter serialises writes from the child's stderr copier and reads
// by tests.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// queryInBackground runs a one-row DP query on a new connection and
// reports its outcome on the returned channel.
func queryInBackground(ctx context.Context, dsn, sql string) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			done <- err
			return
		}
		defer c.Close(context.Background())
		var n int64
		done <- c.QueryRow(ctx, sql).Scan(&n)
	}()
	return done
}

// waitForCharge polls the ledger until the analyst has a committed charge
// with an id above afterID, and returns its id and status.
func waitForCharge(t *testing.T, ctx context.Context, ledger *pgx.Conn, analyst string, afterID int64) (int64, string) {
	t.Helper()
	var id int64
	var status string
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ledger.QueryRow(ctx, "SELECT id, status FROM dpproxy_ledger.charge WHERE id > $1 AND analyst = $2 ORDER BY id LIMIT 1", afterID, analyst).Scan(&id, &status)
		if err == nil {
			return id, status
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("no committed charge of %s while the query waits: %v", analyst, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connectWithNotices connects and records the messages of the NOTICEs the
// server sends; the returned function returns them so far.
func connectWithNotices(t *testing.T, ctx context.Context, dsn string) (*pgx.Conn, func() []string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), notices...)
	}
}

// lockTable holds an ACCESS EXCLUSIVE lock on a data table, as the steward,
// until unlock is called (or the test ends): a DP query on it then blocks
// upstream after its charge was committed.
func lockTable(t *testing.T, ctx context.Context, table string) (unlock func() error) {
	t.Helper()
	tx, err := connect(t, ctx, env.upstreamDSN).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{table}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return func() error { return tx.Rollback(ctx) }
}

// lastChargeID returns the newest charge id of the ledger (0 when empty).
func lastChargeID(t *testing.T, ctx context.Context, ledger *pgx.Conn) int64 {
	t.Helper()
	var id int64
	if err := ledger.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// countsByKey runs a query of (text key, count) rows and returns them as a
// map.
func countsByKey(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) map[string]int64 {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
