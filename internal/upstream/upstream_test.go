package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPool_Query(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pgtest.Exec(ctx, dsn, "CREATE TABLE t (a int, b numeric(10,2), c text, d date)",
		"INSERT INTO t VALUES (1, 2.50, 'x', '2024-02-29'), (NULL, NULL, NULL, NULL)"); err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, Config{DSN: dsn, StatementTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rows, err := p.Query(ctx, "SELECT a, b, c, d, a::bigint * 2 FROM t ORDER BY a NULLS LAST")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(rows))
	}
	want := []string{"1", "2.50", "x", "2024-02-29", "2"}
	for i, w := range want {
		if rows[0][i] == nil || *rows[0][i] != w {
			t.Errorf("row 0 col %d = %v, want %q", i, rows[0][i], w)
		}
		if rows[1][i] != nil {
			t.Errorf("row 1 col %d = %q, want NULL", i, *rows[1][i])
		}
	}

	tests := []struct {
		name, sql, state string
	}{
		{"read only", "INSERT INTO t VALUES (3)", "25006"},
		{"read only in multi-statement", "SELECT 1; DELETE FROM t", "25006"},
		{"statement timeout", "SELECT pg_sleep(2)", "57014"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Query(ctx, tc.sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != tc.state {
				t.Errorf("Query(%q) error = %v, want SQLSTATE %s", tc.sql, err, tc.state)
			}
		})
	}
	// The pool is still usable and nothing was written.
	rows, err = p.Query(ctx, "SELECT count(*) FROM t")
	if err != nil || len(rows) != 1 || *rows[0][0] != "2" {
		t.Errorf("count after refused writes = %v, %v; want 2", rows, err)
	}
}

func TestNew_BadDSN(t *testing.T) {
	if _, err := New(context.Background(), Config{DSN: "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"}); err == nil {
		t.Error("New with an unreachable server succeeded")
	}
}

// TestPool_Partitionwise: every query's transaction plans with partitionwise
// aggregation and joins on, and the setting ends with the transaction (the
// pooled connection keeps PostgreSQL's default, off). On a table
// hash-partitioned by the grouping column, the aggregate then runs per
// partition: an Append of one aggregate per partition, not one aggregate
// over an Append.
func TestPool_Partitionwise(t *testing.T) {
	ctx := context.Background()
	p := poolOn(t, ctx, pgtest.NewDatabase(t),
		"CREATE TABLE h (u bigint, x int) PARTITION BY HASH (u)",
		"CREATE TABLE h0 PARTITION OF h FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
		"CREATE TABLE h1 PARTITION OF h FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
		"INSERT INTO h SELECT i % 50, i FROM generate_series(1, 1000) i",
		"ANALYZE h",
	)
	rows, err := p.Query(ctx, "SELECT current_setting('enable_partitionwise_aggregate'), current_setting('enable_partitionwise_join')")
	if err != nil || len(rows) != 1 || *rows[0][0] != "on" || *rows[0][1] != "on" {
		t.Fatalf("partitionwise settings in the query's transaction = %v, %v; want on, on", rows, err)
	}
	var after string
	if err := p.pool.QueryRow(ctx, "SHOW enable_partitionwise_aggregate").Scan(&after); err != nil || after != "off" {
		t.Errorf("enable_partitionwise_aggregate after the transaction = %q, %v; want off (SET LOCAL)", after, err)
	}
	if got := planOf(t, ctx, p, "SELECT u, count(*) FROM h GROUP BY u"); !strings.HasPrefix(got, "Append") || strings.Count(got, "Aggregate") != 2 {
		t.Errorf("plan of a GROUP BY on the partition key:\n%s\nwant an Append of one aggregate per partition", got)
	}
}

// TestPool_OutputSettingsPinned: the texts release reads do not follow the
// data database's configuration. With its DateStyle, IntervalStyle and
// extra_float_digits set otherwise (SQL dates, rounded floats, under
// which 0.1 + 0.2 and 0.3 print alike), the pool still reads ISO dates
// and shortest-exact floats.
func TestPool_OutputSettingsPinned(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pgtest.Exec(ctx, dsn,
		"DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET DateStyle = %L', current_database(), 'SQL, DMY'); "+
			"EXECUTE format('ALTER DATABASE %I SET extra_float_digits = %s', current_database(), '-3'); "+
			"EXECUTE format('ALTER DATABASE %I SET IntervalStyle = %L', current_database(), 'sql_standard'); END $$"); err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rows, err := p.Query(ctx, "SELECT DATE '2024-02-29', (0.1::float8 + 0.2::float8), 0.3::float8, INTERVAL '1 day 2 hours'")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2024-02-29", "0.30000000000000004", "0.3", "1 day 02:00:00"}
	for i, w := range want {
		if rows[0][i] == nil || *rows[0][i] != w {
			got := "NULL"
			if rows[0][i] != nil {
				got = *rows[0][i]
			}
			t.Errorf("col %d = %q, want %q", i, got, w)
		}
	}
}

// poolOn runs setup on dsn and returns a pool of one connection to it,
// closed when the test ends.
func poolOn(t *testing.T, ctx context.Context, dsn string, setup ...string) *Pool {
	t.Helper()
	if err := pgtest.Exec(ctx, dsn, setup...); err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, Config{DSN: dsn, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// planOf is EXPLAIN (COSTS OFF) of sql run through p, a line a row.
func planOf(t *testing.T, ctx context.Context, p *Pool, sql string) string {
	t.Helper()
	rows, err := p.Query(ctx, "EXPLAIN (COSTS OFF) "+sql)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range rows {
		if r[0] != nil {
			b.WriteString(*r[0] + "\n")
		}
	}
	return b.String()
}
