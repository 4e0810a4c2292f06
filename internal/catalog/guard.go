package catalog

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// # The types checked at start-up, held for every answer
//
// Verify learns the live types once, at start-up, and the planner trusts
// them from then on: a unit column read as its one text (pgemit's
// unitSQL: trim_scale for numeric, lower for citext), a column clamped
// and summed as its declared type. A column whose type changed while the
// proxy runs (ALTER TABLE … ALTER COLUMN … TYPE: a text unit made citext,
// an int made numeric) would be read under the start-up's assumption, and
// attack round 61 showed where that ends: one person read as two units,
// or groups that move with other persons' rows.
//
// GuardSQL is the statement that catches it. It returns a fingerprint of
// the type, type modifier and collation of every column the policy names
// (unit columns and visible columns), read from pg_catalog only. The
// upstream pool runs it in the transaction of every DP query, after the
// query (internal/upstream): the query holds ACCESS SHARE locks on its
// tables until the transaction ends, and ALTER TABLE needs ACCESS
// EXCLUSIVE, so a type change either committed before the query took its
// locks — and then the fingerprint read after it differs — or waits until
// the transaction ends. A fingerprint different from the one taken at
// start-up withholds the answer and every later one, until a restart
// verifies the catalog again.

// GuardSQL is the fingerprint query of ds's columns (see above): one row,
// one text, ” when none of the columns exists.
func GuardSQL(ds *policy.Dataset) string {
	var cols []string
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		names := map[string]bool{}
		if !t.Public && t.UnitColumn != "" {
			names[t.UnitColumn] = true
		}
		for _, cn := range t.ColumnOrder {
			if c := t.Columns[cn]; c != nil && !c.Hidden && c.Type != "" {
				names[cn] = true
			}
		}
		for cn := range names {
			cols = append(cols, "("+pgemit.QuoteString(t.Schema)+", "+pgemit.QuoteString(t.Name)+", "+pgemit.QuoteString(strings.ToLower(cn))+")")
		}
	}
	if len(cols) == 0 {
		return "SELECT ''"
	}
	sort.Strings(cols)
	return `SELECT coalesce(md5(string_agg(n.nspname || '.' || c.relname || '.' || lower(a.attname) || ':' ||
			a.atttypid::text || ':' || a.atttypmod::text || ':' || a.attcollation::text, ','
			ORDER BY n.nspname, c.relname, lower(a.attname))), '')
		FROM pg_catalog.pg_attribute a
		JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE a.attnum > 0 AND NOT a.attisdropped
			AND (n.nspname, c.relname, lower(a.attname)) IN (VALUES ` + strings.Join(cols, ", ") + `)`
}

// Fingerprint runs GuardSQL on q: the value every later answer's
// transaction must read again.
func Fingerprint(ctx context.Context, q Querier, ds *policy.Dataset) (string, error) {
	rows, err := q.Query(ctx, GuardSQL(ds))
	if err != nil {
		return "", fmt.Errorf("read the catalog's column types: %w", err)
	}
	defer rows.Close()
	var fp string
	for rows.Next() {
		if err := rows.Scan(&fp); err != nil {
			return "", err
		}
	}
	return fp, rows.Err()
}
