package upstream

import (
	"context"
	"errors"
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
