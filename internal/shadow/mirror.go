package shadow

// Public tables are mirrored: the shadow holds their rows (declared,
// visible columns only), copied from upstream by Build in the same
// transaction that creates the shadow tables, so a statement that names
// only public tables answers the real rows (SECURITY.md G7: public tables
// hold no personal data). Protected tables stay empty.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// DefaultMaxPublicRows is the default cap on the rows copied of one public
// table. Public tables are lookup tables (regions, wards, codes); the copy
// is read at every start and refresh and held by a second cluster, so a
// table far larger than a lookup table is more likely a mislabelled one.
// Copying 100000 rows of six columns takes about a second (BENCHMARKS.md,
// BenchmarkBuildWith_PublicTable100k), during which a refresh holds the
// shadow tables' locks.
const DefaultMaxPublicRows = 100_000

// MaxMaxPublicRows bounds Options.MaxPublicRows.
const MaxMaxPublicRows = 10_000_000

// Options tune Build.
type Options struct {
	// MaxPublicRows caps the rows copied of each public table (config key
	// public_max_rows); 0 means DefaultMaxPublicRows. A larger table is not
	// copied: its shadow relation answers every read with SQLSTATE 0A000
	// and a hint (see Unavailable).
	MaxPublicRows int
	// LockTimeout, when set, bounds the wait for the shadow tables' locks
	// (a refresh while analysts' catalog statements run): the build fails
	// rather than queue every catalog statement behind it.
	LockTimeout time.Duration
	// Setting names the config key that sets MaxPublicRows, for the hint
	// of that error (e.g. "datasets.hospital.public_max_rows").
	Setting string
}

// Result says what Build did with the public tables of a dataset.
type Result struct {
	Public []PublicTable
}

// PublicTable is the outcome of mirroring one public table.
type PublicTable struct {
	Schema, Name string
	Columns      []string // the copied columns
	// Rows copied; 0 when Unavailable is set.
	Rows int64
	// Unavailable, when not empty, says why the table was not copied (too
	// many rows, or no declared column); reads of its shadow relation
	// fail with SQLSTATE 0A000 and this reason.
	Unavailable string
	Hint        string // what to change, when Unavailable
}

// errNeedsRebuild: Refresh's path without DDL met a table that needs it.
var errNeedsRebuild = errors.New("the shadow needs a rebuild")

// ErrTooManyRows is the reason of a public table over the row cap.
var ErrTooManyRows = errors.New("too many rows")

// unavailableFunc raises the refusal of a public table that was not copied.
// It is created in the shadow's dpproxy schema; the shadow relation of
// such a table is a view over it with the table's declared columns, so
// every protocol and client gets the same clear error instead of an empty
// answer.
const unavailableFunc = `CREATE OR REPLACE FUNCTION dpproxy.unavailable(message text, hint text) RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
	RAISE EXCEPTION USING ERRCODE = 'feature_not_supported', MESSAGE = message, HINT = hint;
END
$f$`

// roundTrip are the settings of both the upstream and the shadow session
// during a copy, so that every built-in type's text form is read back to
// the same value (floats with all digits, ISO dates, hex bytea, money in
// the C locale).
var roundTrip = []string{
	"SET LOCAL DateStyle = 'ISO, MDY'",
	"SET LOCAL IntervalStyle = 'postgres'",
	"SET LOCAL extra_float_digits = 3",
	"SET LOCAL bytea_output = 'hex'",
	"SET LOCAL lc_monetary = 'C'",
	"SET LOCAL TimeZone = 'UTC'",
}

// dropViews drops the views of earlier builds (the shadow relations of
// unavailable public tables); Build creates only tables otherwise.
func dropViews(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `
		SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'v' AND pg_get_userbyid(c.relowner) = current_user
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'`)
	if err != nil {
		return err
	}
	views, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var s, n string
		err := r.Scan(&s, &n)
		return qualified(s, n), err
	})
	if err != nil {
		return err
	}
	for _, v := range views {
		if _, err := tx.Exec(ctx, "DROP VIEW IF EXISTS "+v+" CASCADE"); err != nil {
			return fmt.Errorf("drop the shadow view %s: %w", v, err)
		}
	}
	return nil
}

// mirrorPublic copies the rows of every public table of ds from upstream
// into its (just created, empty) shadow table, inside the shadow
// transaction tx, reading all of them in one upstream snapshot. The SQL
// read upstream is built here from the policy's identifiers: SELECT of the
// declared visible columns, never analyst text. A table with more than
// the cap of rows, or without a declared visible column, is replaced by a
// view that refuses every read (unavailable).
//
// With shadowRole "" (Refresh's path without DDL) a table that would be
// replaced by such a view makes it fail with errNeedsRebuild instead.
func mirrorPublic(ctx context.Context, up *pgx.Conn, tx pgx.Tx, ds *policy.Dataset, tables map[string][]Column, shadowRole string, opts Options) (*Result, error) {
	res := &Result{}
	var public []*policy.Table
	for _, name := range ds.TableOrder {
		if t := ds.Tables[name]; t.Public {
			public = append(public, t)
		}
	}
	if len(public) == 0 {
		return res, nil
	}
	maxRows := opts.MaxPublicRows
	if maxRows <= 0 {
		maxRows = DefaultMaxPublicRows
	}
	setting := opts.Setting
	if setting == "" {
		setting = "public_max_rows"
	}
	utx, err := up.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("read the public tables of %s: %w", ds.Name, err)
	}
	defer utx.Rollback(context.Background())
	for _, s := range roundTrip {
		if _, err := utx.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("read the public tables of %s: %s: %w", ds.Name, s, err)
		}
		if _, err := tx.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("shadow %s: %s: %w", ds.Name, s, err)
		}
	}
	for _, t := range public {
		cols := tables[t.Name]
		pt := PublicTable{Schema: t.Schema, Name: t.Name}
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = ident(c.Name)
			pt.Columns = append(pt.Columns, c.Name)
		}
		q := qualified(t.Schema, t.Name)
		if len(cols) == 0 && shadowRole == "" {
			return nil, errNeedsRebuild
		}
		if len(cols) == 0 {
			pt.Unavailable = "it declares no column in the policy"
			pt.Hint = fmt.Sprintf("declare the columns analysts may read under tables.%s.columns in the policy of %s, with their types, and restart dpproxy", t.Name, ds.Name)
			if err := replaceByRefusal(ctx, tx, t, cols, shadowRole, publicMessage(t, pt.Unavailable), pt.Hint); err != nil {
				return nil, err
			}
			res.Public = append(res.Public, pt)
			continue
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT dpproxy_mirror"); err != nil {
			return nil, err
		}
		list := strings.Join(names, ", ")
		n, err := copyRows(ctx, utx, tx,
			fmt.Sprintf("COPY (SELECT %s FROM %s LIMIT %d) TO STDOUT", list, q, maxRows+1),
			fmt.Sprintf("COPY %s (%s) FROM STDIN", q, list))
		if err != nil {
			return nil, fmt.Errorf("copy the public table %s.%s of %s into the shadow: %w", t.Schema, t.Name, ds.Name, err)
		}
		if n > int64(maxRows) && shadowRole == "" {
			return nil, errNeedsRebuild
		}
		if n > int64(maxRows) {
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT dpproxy_mirror"); err != nil {
				return nil, err
			}
			pt.Unavailable = fmt.Sprintf("it has more than %d rows (%s)", maxRows, setting)
			pt.Hint = fmt.Sprintf("raise %s above the table's row count and restart dpproxy; DP queries that join %s to a protected table are not affected", setting, t.Name)
			if err := replaceByRefusal(ctx, tx, t, cols, shadowRole, publicMessage(t, pt.Unavailable), pt.Hint); err != nil {
				return nil, err
			}
		} else {
			pt.Rows = n
		}
		if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT dpproxy_mirror"); err != nil {
			return nil, err
		}
		// Fresh statistics for the planner (public data, like the rows).
		if pt.Unavailable == "" {
			if _, err := tx.Exec(ctx, "ANALYZE "+q); err != nil {
				return nil, fmt.Errorf("analyze the shadow copy of %s.%s: %w", t.Schema, t.Name, err)
			}
		}
		res.Public = append(res.Public, pt)
	}
	return res, utx.Commit(ctx)
}

func publicMessage(t *policy.Table, reason string) string {
	return fmt.Sprintf("the public table %s.%s is not available outside DP queries: %s, so dpproxy did not copy it into its catalog", t.Schema, t.Name, reason)
}

// replaceByRefusal drops the shadow table of t and creates in its place a
// view with the same columns that raises 0A000 with message and hint on
// every read that reaches its rows.
func replaceByRefusal(ctx context.Context, tx pgx.Tx, t *policy.Table, cols []Column, shadowRole, message, hint string) error {
	q := qualified(t.Schema, t.Name)
	defs := make([]string, len(cols))
	sel := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = ident(c.Name) + " " + c.Type
		sel[i] = "r." + ident(c.Name)
	}
	if len(cols) == 0 { // a column definition list needs one column
		defs = []string{"unavailable int"}
	}
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS dpproxy",
		"REVOKE CREATE ON SCHEMA dpproxy FROM PUBLIC",
		"GRANT USAGE ON SCHEMA dpproxy TO " + ident(shadowRole),
		unavailableFunc,
		"GRANT EXECUTE ON FUNCTION dpproxy.unavailable(text, text) TO " + ident(shadowRole),
		"DROP TABLE IF EXISTS " + q + " CASCADE",
		fmt.Sprintf("CREATE VIEW %s AS SELECT %s FROM dpproxy.unavailable(%s, %s) AS r(%s)",
			q, strings.Join(sel, ", "), literal(message), literal(hint), strings.Join(defs, ", ")),
		"GRANT SELECT ON " + q + " TO " + ident(shadowRole),
		fmt.Sprintf("COMMENT ON VIEW %s IS %s", q, literal("dpproxy: "+message)),
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("shadow: %s: %w", s, err)
		}
	}
	return nil
}

// copyRows streams the rows of copyOut (a COPY … TO STDOUT on the upstream
// transaction) into copyIn (a COPY … FROM STDIN on the shadow transaction)
// in text format, and returns how many rows went through. The text format
// ends every row with one newline and escapes newlines inside values, so
// the rows are the newlines.
func copyRows(ctx context.Context, from, to pgx.Tx, copyOut, copyIn string) (int64, error) {
	pr, pw := io.Pipe()
	outErr := make(chan error, 1)
	go func() {
		_, err := from.Conn().PgConn().CopyTo(ctx, pw, copyOut)
		pw.CloseWithError(err) // nil: EOF for the reader
		outErr <- err
	}()
	cr := &countingReader{r: pr}
	_, inErr := to.Conn().PgConn().CopyFrom(ctx, cr, copyIn)
	// Unblock the upstream copy if the shadow side stopped reading.
	pr.CloseWithError(errShadowStopped)
	if err := <-outErr; err != nil && !errors.Is(err, errShadowStopped) {
		return 0, fmt.Errorf("read upstream: %w", err)
	}
	if inErr != nil {
		return 0, fmt.Errorf("write the shadow: %w", inErr)
	}
	return cr.rows, nil
}

var errShadowStopped = errors.New("the shadow copy stopped")

type countingReader struct {
	r    io.Reader
	rows int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.rows += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}
