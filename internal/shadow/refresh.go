package shadow

import (
	"context"
	"errors"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// Refresh copies the public tables of ds into the shadow again. When the
// shadow already has every table of ds as a table with the columns the
// upstream and the policy give (the usual case: only rows changed), it
// replaces each public table's rows (DELETE, then the copy) in one
// transaction, with no DDL: that takes row locks only, which no analyst's
// catalog statement conflicts with, so the refresh neither waits for
// their statements nor makes theirs wait in PostgreSQL's lock queue
// behind it (attack round 60: a rebuild's DROP TABLE held visits'
// AccessExclusiveLock while it waited for a long read of a public table,
// and every other analyst's read of visits queued behind it and failed
// with 55P03). Otherwise (a column or type changed upstream, a table was
// not copied before, or one is now over the row cap) it rebuilds the
// shadow as Build does, under opts.LockTimeout. rebuilt says which.
func Refresh(ctx context.Context, adminDSN, upstreamDSN string, ds *policy.Dataset, shadowRole string, opts Options) (res *Result, rebuilt bool, err error) {
	res, ok, err := refreshRows(ctx, adminDSN, upstreamDSN, ds, opts)
	if err != nil || ok {
		return res, false, err
	}
	res, err = BuildWith(ctx, adminDSN, upstreamDSN, ds, shadowRole, opts)
	return res, true, err
}

// refreshRows is Refresh's path without DDL; ok is false when the shadow's
// tables differ from what a build would make (nothing is changed then).
func refreshRows(ctx context.Context, adminDSN, upstreamDSN string, ds *policy.Dataset, opts Options) (*Result, bool, error) {
	sess, err := openSession(ctx, adminDSN, upstreamDSN, ds)
	if err != nil {
		return nil, false, err
	}
	defer sess.close()
	up, tx, tables := sess.up, sess.tx, sess.tables
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		same, err := sameShadowTable(ctx, tx, t, tables[name])
		if err != nil || !same {
			return nil, false, err
		}
	}
	// The copy (mirrorPublic) fills empty tables; rows only, so no
	// analyst's read (AccessShareLock) waits for this or it for them, and
	// readers see the old rows until the commit.
	for _, name := range ds.TableOrder {
		if t := ds.Tables[name]; t.Public {
			if _, err := tx.Exec(ctx, "DELETE FROM "+qualified(t.Schema, t.Name)); err != nil {
				return nil, false, err
			}
		}
	}
	res, err := mirrorPublic(ctx, up, tx, ds, tables, "", opts)
	if errors.Is(err, errNeedsRebuild) {
		return nil, false, nil // now over the cap: a rebuild replaces it by a refusing view
	}
	if err != nil {
		return nil, false, err
	}
	return res, true, tx.Commit(ctx)
}

// sameShadowTable reports whether the shadow has t as a table (not a
// refusing view) with exactly cols, in order, with their types and NOT
// NULL.
func sameShadowTable(ctx context.Context, tx pgx.Tx, t *policy.Table, cols []Column) (bool, error) {
	rows, err := tx.Query(ctx, `
		SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, t.Schema, t.Name)
	if err != nil {
		return false, err
	}
	have, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Column, error) {
		var c Column
		return c, r.Scan(&c.Name, &c.Type, &c.NotNull)
	})
	if err != nil || len(have) != len(cols) {
		return false, err
	}
	for i := range cols {
		if have[i] != cols[i] {
			return false, nil
		}
	}
	return true, nil
}
