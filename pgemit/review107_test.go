package pgemit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestReview107_CompressedNumericUnit: a numeric unit's length test read
// pg_column_size, the stored size, which for a compressed value is the
// compressed size: a unit of 131,000 digits of 7 is stored in 765 bytes
// and passed the 1,024-byte test, so one person's rows with it were
// grouped, sorted and hashed whole (review 107: 200 such rows made the
// demo's grouped COUNT, AVG and median run 3.2–4.2 s against 1.2–1.7 s,
// a 2 s slot). A compressed numeric unit has no unit now.
func TestReview107_CompressedNumericUnit(t *testing.T) {
	cond := unitKeptSQL(`"u"`, "numeric")
	if !strings.Contains(cond, `pg_column_compression("u") IS NULL`) {
		t.Errorf("numeric unit test = %s: a compressed value's stored size is not its length", cond)
	}
	if testing.Short() {
		return
	}
	kept := unitsKept(t, cond, `(repeat('7', 131000)::numeric, 'long'), (12345, 'short'), (NULL, 'null')`)
	if strings.Join(kept, ",") != "short" {
		t.Errorf("rows kept by %s: %v, want only the short unit's", cond, kept)
	}
}

// unitsKept makes a table units (u numeric, pad text) with values (a
// VALUES list) and returns the pads of the rows cond keeps, in order.
func unitsKept(t *testing.T, cond, values string) []string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`CREATE TABLE units (u numeric, pad text)`, `INSERT INTO units VALUES ` + values} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT pad FROM units WHERE `+cond+` ORDER BY pad`)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return kept
}
