// Package shadow builds the shadow catalog of a dataset: a separate
// PostgreSQL database that holds each policy table with only the columns the
// policy exposes, with their real types. Protected tables hold no rows.
// Analysts' catalog and metadata statements run there (SECURITY.md G1 and
// G4), so psql's \d, JDBC DatabaseMetaData and BI tools
// see a real schema while a misclassified query can leak nothing.
//
// Public tables (public: true in the policy: no personal data) are
// mirrored (mirror.go): Build copies the rows of their declared, visible
// columns (not undeclared columns, not access: none) from upstream into the
// shadow, in the transaction that creates the tables, so a statement that
// names only public tables (SELECT * FROM regions, joins of lookup tables,
// a BI tool browsing one) gets their real rows. The copy is read with SQL
// built here from the policy's identifiers, never analyst text, in one
// read-only snapshot. A public table over the row cap
// (Options.MaxPublicRows), or without a declared column, is not copied:
// its shadow relation is a view that refuses every read with SQLSTATE
// 0A000 and a hint, rather than answering from an empty table. A statement
// that names a protected table never runs here (it is a DP query), and the
// protected tables here are empty, so the mirrored rows cannot be combined
// with protected data outside the DP path.
//
// The shadow database must live in a different PostgreSQL cluster (server)
// than the upstream data: some statistics are cluster-wide and readable by
// any role connected to any database of the cluster — pg_stat_database
// (tup_inserted, tup_returned… of every database), pg_database_size(),
// pg_stat_activity — so a shadow in the data's cluster would show analysts
// exact row counts of the data. Build refuses such a configuration: it
// compares the clusters' system identifiers (pg_control_system()).
//
// Build reads column types from the upstream catalog (pg_attribute, as the
// reader role) and the declared columns of public tables, and nothing else:
// no protected rows, no statistics, no sizes. It may import only policy and
// pgx.
//
// Pool (pool.go) is the bounded pool of shadow connections that analysts'
// sessions share, one connection per catalog statement; pool.go explains
// why that is correct for session state ("Connection pooling").
package shadow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// Column is one column of a shadow table.
type Column struct {
	Name    string
	Type    string // format_type() text, e.g. "numeric(10,2)"
	NotNull bool
}

// Build (re)creates, in the shadow database reached with adminDSN (the
// shadow database's owner), every table of ds in its schema with only the
// visible columns (Table.VisibleColumns; hidden and undeclared columns never
// appear) and the column types of the upstream database reached with
// upstreamDSN, no rows in protected tables, the rows of public tables up to
// DefaultMaxPublicRows (BuildWith sets the cap), and grants USAGE on the
// schemas and SELECT on the tables to shadowRole. Tables of an earlier build that the policy no longer lists are
// dropped. It runs in one transaction and is idempotent. It fails, wrapping
// ErrSameCluster, when the shadow and the upstream database are in the same
// cluster.
func Build(ctx context.Context, adminDSN, upstreamDSN string, ds *policy.Dataset, shadowRole string) error {
	_, err := BuildWith(ctx, adminDSN, upstreamDSN, ds, shadowRole, Options{})
	return err
}

// BuildWith is Build with options, and reports what it did with the public
// tables (mirror.go): their declared visible columns are copied from
// upstream into the shadow in the same transaction, up to
// opts.MaxPublicRows rows per table.
func BuildWith(ctx context.Context, adminDSN, upstreamDSN string, ds *policy.Dataset, shadowRole string, opts Options) (*Result, error) {
	res := &Result{}
	if err := build(ctx, adminDSN, upstreamDSN, ds, shadowRole, opts, res); err != nil {
		return nil, err
	}
	return res, nil
}

// session is what a build or a refresh works with: the upstream and the
// shadow connections, the policy's tables' upstream columns, and the shadow
// transaction, which holds the lock that serialises builds and refreshes
// (several proxies starting at once). close ends them all (the transaction
// rolled back unless committed).
type session struct {
	up, conn *pgx.Conn
	tables   map[string][]Column
	tx       pgx.Tx
}

func openSession(ctx context.Context, adminDSN, upstreamDSN string, ds *policy.Dataset) (*session, error) {
	s := &session{}
	var err error
	if s.up, err = pgx.Connect(ctx, upstreamDSN); err != nil {
		return nil, fmt.Errorf("connect to the upstream database of %s: %w", ds.Name, err)
	}
	if s.conn, err = pgx.Connect(ctx, adminDSN); err != nil {
		s.close()
		return nil, fmt.Errorf("connect to the shadow database: %w", err)
	}
	if err = checkSeparate(ctx, s.up, s.conn); err == nil {
		if s.tables, err = upstreamColumns(ctx, s.up, ds); err == nil {
			if s.tx, err = s.conn.Begin(ctx); err == nil {
				_, err = s.tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7291432)")
			}
		}
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) close() {
	if s.tx != nil {
		s.tx.Rollback(context.Background())
	}
	if s.conn != nil {
		s.conn.Close(context.Background())
	}
	if s.up != nil {
		s.up.Close(context.Background())
	}
}

func build(ctx context.Context, adminDSN, upstreamDSN string, ds *policy.Dataset, shadowRole string, opts Options, res *Result) error {
	sess, err := openSession(ctx, adminDSN, upstreamDSN, ds)
	if err != nil {
		return err
	}
	defer sess.close()
	up, tx, tables := sess.up, sess.tx, sess.tables
	if opts.LockTimeout > 0 {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", opts.LockTimeout.Milliseconds())); err != nil {
			return err
		}
	}
	if err := dropViews(ctx, tx); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		want[t.Schema+"."+t.Name] = true
	}
	// Drop tables of earlier builds that the policy no longer lists: every
	// table we own outside the system schemas.
	rows, err := tx.Query(ctx, `
		SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND pg_get_userbyid(c.relowner) = current_user
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'`)
	if err != nil {
		return err
	}
	var stale [][2]string
	for rows.Next() {
		var s, n string
		if err := rows.Scan(&s, &n); err != nil {
			return err
		}
		if !want[s+"."+n] {
			stale = append(stale, [2]string{s, n})
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var stmts []string
	for _, sn := range stale {
		stmts = append(stmts, "DROP TABLE IF EXISTS "+qualified(sn[0], sn[1])+" CASCADE")
	}
	schemas := map[string]bool{}
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		if !schemas[t.Schema] {
			schemas[t.Schema] = true
			stmts = append(stmts,
				"CREATE SCHEMA IF NOT EXISTS "+ident(t.Schema),
				"GRANT USAGE ON SCHEMA "+ident(t.Schema)+" TO "+ident(shadowRole))
		}
		q := qualified(t.Schema, t.Name)
		var defs []string
		visible := map[string]bool{}
		for _, c := range tables[name] {
			d := ident(c.Name) + " " + c.Type
			if c.NotNull {
				d += " NOT NULL"
			}
			defs = append(defs, d)
			visible[c.Name] = true
		}
		// The primary key is schema, not data: reproduce it when every one
		// of its columns is visible (JDBC getPrimaryKeys, BI tools' joins).
		pk, err := primaryKey(ctx, up, t)
		if err != nil {
			return err
		}
		if len(pk) > 0 {
			quoted := make([]string, 0, len(pk))
			for _, c := range pk {
				if !visible[c] {
					quoted = nil
					break
				}
				quoted = append(quoted, ident(c))
			}
			if quoted != nil {
				defs = append(defs, "PRIMARY KEY ("+strings.Join(quoted, ", ")+")")
			}
		}
		stmts = append(stmts,
			"DROP TABLE IF EXISTS "+q+" CASCADE",
			"CREATE TABLE "+q+" ("+strings.Join(defs, ", ")+")",
			"GRANT SELECT ON "+q+" TO "+ident(shadowRole))
		if ds.Description != "" {
			what := "no rows; query it through dpproxy"
			if t.Public {
				what = "public table: its declared columns, copied from the data"
			}
			stmts = append(stmts, fmt.Sprintf("COMMENT ON TABLE %s IS %s", q, literal("dpproxy shadow of "+ds.Name+": "+ds.Description+" ("+what+")")))
		}
		// What the policy lets an analyst do with each column, where every
		// client shows it (psql's \d+, JDBC's REMARKS: DBeaver, Metabase):
		// the new-user run found no way to learn which columns group or
		// how values are clamped but from error hints. The policy is
		// public to analysts; declared values are not secret.
		if !t.Public {
			for _, c := range tables[name] {
				if text := columnComment(ds, t, c.Name); text != "" {
					stmts = append(stmts, fmt.Sprintf("COMMENT ON COLUMN %s.%s IS %s", q, ident(c.Name), literal(text)))
				}
			}
		}
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("shadow %s: %s: %w", ds.Name, s, err)
		}
	}
	mirrored, err := mirrorPublic(ctx, up, tx, ds, tables, shadowRole, opts)
	if err != nil {
		return err
	}
	*res = *mirrored
	return tx.Commit(ctx)
}

// maxCommentValues is how many public values a column comment lists.
const maxCommentValues = 30

// columnComment says what DP queries do with column name of the protected
// table t: the privacy unit, the bounds values are clamped to, the public
// values a GROUP BY returns; "" for a column the policy does not describe.
func columnComment(ds *policy.Dataset, t *policy.Table, name string) string {
	if name == t.UnitColumn {
		unit := ds.PrivacyUnit
		if unit == "" {
			unit = "unit"
		}
		all := t.Allowance()
		bound := fmt.Sprintf("at most %d rows of one %s in all", all, unit)
		if all != t.MaxRowsPerUnit {
			bound += fmt.Sprintf(" and %d in one group", t.MaxRowsPerUnit)
		}
		return fmt.Sprintf("dpproxy: the privacy unit (one %s); each DP answer counts %s; its values are never released", unit, bound)
	}
	c, ok := t.Column(name)
	if !ok || c.Hidden {
		return ""
	}
	var parts []string
	switch {
	case c.HasBounds && c.Type == policy.TypeDate:
		parts = append(parts, fmt.Sprintf("declared range [%s, %s]: date groups (date_trunc, extract) and quantiles cover it", c.Lower, c.Upper))
	case c.HasBounds && ds.Defaults.Clipping == policy.ClippingAuto:
		parts = append(parts, fmt.Sprintf("clamped to [%s, %s] in sums, averages, deviations and quantiles (sums, averages and deviations may use tighter bounds chosen by DP: dp.clipping = auto)", c.Lower, c.Upper))
	case c.HasBounds:
		parts = append(parts, fmt.Sprintf("clamped to [%s, %s] in sums, averages, deviations and quantiles", c.Lower, c.Upper))
	}
	switch {
	case len(c.PublicValues) > 0:
		vals := c.PublicValues
		more := ""
		if len(vals) > maxCommentValues {
			vals, more = vals[:maxCommentValues], fmt.Sprintf(" and %d more", len(c.PublicValues)-maxCommentValues)
		}
		parts = append(parts, "GROUP BY returns exactly these values: "+strings.Join(vals, ", ")+more)
	case c.Type == policy.TypeText && ds.Budget.Delta <= 0:
		parts = append(parts, "no public values: not a GROUP BY key here (groups chosen by DP need a δ budget, and this dataset has none)")
	case c.Type == policy.TypeText && ds.Defaults.Delta > 0:
		parts = append(parts, "no public values: GROUP BY releases the groups DP partition selection keeps (it costs δ)")
	case c.Type == policy.TypeText:
		parts = append(parts, "no public values: GROUP BY needs SET dp.delta (groups chosen by DP)")
	}
	if len(parts) == 0 {
		return ""
	}
	return "dpproxy: " + strings.Join(parts, "; ")
}

// UpstreamColumns returns, for each table of ds (by lower-case name), its
// visible columns with their upstream types, read from pg_attribute.
func UpstreamColumns(ctx context.Context, upstreamDSN string, ds *policy.Dataset) (map[string][]Column, error) {
	conn, err := pgx.Connect(ctx, upstreamDSN)
	if err != nil {
		return nil, fmt.Errorf("connect to the upstream database of %s: %w", ds.Name, err)
	}
	defer conn.Close(context.Background())
	return upstreamColumns(ctx, conn, ds)
}

// ErrSameCluster is wrapped by Build's error when the shadow database is in
// the upstream data's PostgreSQL cluster.
var ErrSameCluster = errors.New("the shadow database is in the same PostgreSQL cluster as the upstream data")

// checkSeparate fails unless the two connections reach different clusters.
// pg_control_system() is executable by every role unless an administrator
// revoked it; without it the check fails closed.
func checkSeparate(ctx context.Context, upstream, shadow *pgx.Conn) error {
	const q = "SELECT system_identifier FROM pg_catalog.pg_control_system()"
	var upID, shID int64
	if err := upstream.QueryRow(ctx, q).Scan(&upID); err != nil {
		return fmt.Errorf("read the upstream cluster's system identifier (to check that the shadow is in another cluster): %w; grant EXECUTE on pg_catalog.pg_control_system() to the upstream role", err)
	}
	if err := shadow.QueryRow(ctx, q).Scan(&shID); err != nil {
		return fmt.Errorf("read the shadow cluster's system identifier (to check that it is not the upstream cluster): %w; grant EXECUTE on pg_catalog.pg_control_system() to the shadow owner", err)
	}
	if upID == shID {
		return fmt.Errorf("%w (system identifier %d): put the shadow database in a separate PostgreSQL server, since cluster-wide statistics (pg_stat_database, pg_database_size, pg_stat_activity) readable from the shadow would show analysts the data's row counts and sessions", ErrSameCluster, upID)
	}
	return nil
}

// primaryKey returns the columns of the upstream table's primary key, in key
// order, or nil when it has none.
func primaryKey(ctx context.Context, conn *pgx.Conn, t *policy.Table) ([]string, error) {
	rows, err := conn.Query(ctx, `
		SELECT a.attname
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		WHERE n.nspname = $1 AND c.relname = $2 AND i.indisprimary
		ORDER BY k.ord`, t.Schema, t.Name)
	if err != nil {
		return nil, fmt.Errorf("read the primary key of %s.%s: %w", t.Schema, t.Name, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func upstreamColumns(ctx context.Context, conn *pgx.Conn, ds *policy.Dataset) (map[string][]Column, error) {
	out := map[string][]Column{}
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		rows, err := conn.Query(ctx, `
			SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, tn.nspname
			FROM pg_attribute a
			JOIN pg_class c ON c.oid = a.attrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_type ty ON ty.oid = a.atttypid
			JOIN pg_namespace tn ON tn.oid = ty.typnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
			ORDER BY a.attnum`, t.Schema, t.Name)
		if err != nil {
			return nil, fmt.Errorf("read columns of %s.%s: %w", t.Schema, t.Name, err)
		}
		type col struct {
			Column
			typSchema string
		}
		upstream := map[string]col{}
		var order []string
		for rows.Next() {
			var c col
			if err := rows.Scan(&c.Name, &c.Type, &c.NotNull, &c.typSchema); err != nil {
				rows.Close()
				return nil, err
			}
			upstream[c.Name] = c
			order = append(order, c.Name)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(order) == 0 {
			return nil, fmt.Errorf("policy %s: table %s.%s does not exist in the upstream database (or the upstream role cannot see it); fix the table name in the policy or create the table", ds.Name, t.Schema, t.Name)
		}
		// Public tables too: only their declared visible columns, the
		// ones mirror.go copies.
		names := t.VisibleColumns()
		var cols []Column
		var errs []error
		for _, n := range names {
			c, ok := upstream[n]
			if !ok {
				errs = append(errs, fmt.Errorf("policy %s: column %s of table %s.%s does not exist in the upstream database; fix or remove it in the policy", ds.Name, n, t.Schema, t.Name))
				continue
			}
			if c.typSchema != "pg_catalog" {
				errs = append(errs, fmt.Errorf("policy %s: column %s of table %s.%s has the non-built-in type %s, which the shadow catalog cannot reproduce; mark it access: none", ds.Name, n, t.Schema, t.Name, c.Type))
				continue
			}
			cols = append(cols, c.Column)
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		out[name] = cols
	}
	return out, nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func qualified(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
