package pgemit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestAttack108_NumericUnitTextLength: a numeric unit's length test read
// its stored size, which does not bound its text: 9e131071 is 10 bytes
// stored and 131,072 characters, 1e-16383 16,385, and the emitted SQL
// writes the unit's text on every row (sample-and-aggregate's HMAC,
// the group ranks' hashes). A unit whose weight or scale (read from the
// header) makes its text longer than dpplan.MaxUnitBytes has no unit now
// (numericTextLongSQL); NaN and ordinary units keep theirs.
func TestAttack108_NumericUnitTextLength(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	cond := unitKeptSQL(`"u"`, "numeric")
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`CREATE TABLE units (u numeric, pad text)`,
		`INSERT INTO units VALUES (9e131071, 'big'), (1e-16383, 'small'), (-9e131071, 'negbig'), ('NaN', 'nan'),
			(12345, 'short'), (1.000000, 'trailing'), (1e1020, 'wide'), (NULL, 'null')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var kept []string
	rows, err := conn.Query(ctx, `SELECT pad FROM units WHERE `+cond+` ORDER BY pad`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kept, ","); got != "nan,short,trailing,wide" {
		t.Errorf("rows kept by %s: %v, want nan, short, trailing and wide", cond, got)
	}
}
