// Package catalog checks a policy's declared column types against the live
// PostgreSQL catalog of the data database (issue 14: "policy types
// verified against the live catalog"; SECURITY.md G5).
//
// The planner proves its emitted SQL total from the declared types: a
// column declared int is compared with integer literals and summed as
// integers, a text column is matched with LIKE, a float column is clamped
// as float8. If the live column cannot honour its declared type — a
// `type: int` column that is numeric and holds a fraction (or, as
// numeric(p, 0), a NaN) for one person,
// a float column declared numeric whose ±Infinity does not fit, a text
// column under a nondeterministic collation that LIKE refuses — the emitted
// SQL can fail on one person's row, after the charge. So a mismatch is a
// configuration error found at start-up (and by `dpproxy doctor`), never a
// runtime error.
//
// Verify also learns the type of each protected table's unit column, which
// the policy does not declare, so literals compared with it are checked at
// plan time (policy.Table.UnitType).
//
// It reads only pg_catalog, never a row.
package catalog

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// Querier is what Verify needs of a connection (pgx.Conn, pgxpool.Pool).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// liveColumn is one column as the catalog describes it.
type liveColumn struct {
	base          string // the type's name, of the base type for a domain
	shown         string // format_type: what to print
	scale         int    // numeric's declared scale, -1 when unconstrained
	deterministic bool   // the collation is deterministic (or none)
	pad           int    // n of char(n), whose values are padded to n characters; else 0
}

// Verify checks every table of ds: the table exists, a protected table's
// unit column exists, and each declared visible column exists with a type
// that can honour its declaration (accepts). Public tables are checked
// like protected ones (attack round 58): a public column joined to a
// protected table is read per person's row, so its type, collation and
// citext values matter as much, and the emitter reads their live types. It returns one problem per
// mismatch (a sentence naming the column, both types and the fix) and sets
// each table's UnitType and UnitTypeName when there are none.
func Verify(ctx context.Context, q Querier, ds *policy.Dataset) ([]string, error) {
	var problems []string
	unitTypes := map[string][3]string{}
	var version int32 // the data server's, read once for a numeric unit (numericUnitServer)
	colTypes := map[*policy.Column]liveColumn{}
	for _, name := range ds.TableOrder {
		t := ds.Tables[name]
		cols, err := readColumns(ctx, q, t.Schema, t.Name)
		if err != nil {
			return nil, err
		}
		where := fmt.Sprintf("%s: table %s.%s", ds.Name, t.Schema, t.Name)
		if len(cols) == 0 {
			problems = append(problems, where+" does not exist in the data database (or the data role cannot see it); create it or fix tables."+t.Name+" in the policy")
			continue
		}
		if !t.Public { // a public table has no unit column
			if u, ok := cols[t.UnitColumn]; !ok {
				problems = append(problems, fmt.Sprintf("%s has no unit column %q; fix unit_column in the policy", where, t.UnitColumn))
			} else if msg := unitAccepts(u); msg != "" {
				problems = append(problems, fmt.Sprintf("%s unit column %s is %s: %s", where, t.UnitColumn, u.shown, msg))
			} else if msg, err := numericUnitServer(ctx, q, u, &version); err != nil {
				return nil, err
			} else if msg != "" {
				problems = append(problems, fmt.Sprintf("%s unit column %s is %s: %s", where, t.UnitColumn, u.shown, msg))
			} else {
				unitTypes[name] = [3]string{string(unitType(u)), u.shown, u.base}
			}
		}
		for _, cn := range t.ColumnOrder {
			c := t.Columns[cn]
			if c.Hidden || c.Type == "" {
				continue
			}
			lc, ok := cols[cn]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s has no column %q declared in the policy; remove it from the policy or fix its name", where, cn))
				continue
			}
			if msg := accepts(c.Type, lc); msg != "" {
				problems = append(problems, fmt.Sprintf("%s column %s is %s in the database but type: %s in the policy: %s", where, cn, lc.shown, c.Type, msg))
			}
			if lc.base == "citext" {
				// A citext key is grouped and released as lower(x), one
				// text per value (pgemit keyValueSQL): its public values
				// must be those texts.
				for _, v := range c.PublicValues {
					if v != strings.ToLower(v) {
						problems = append(problems, fmt.Sprintf("%s column %s is citext (its equality ignores case, and dpproxy releases its groups in lower case) but public value %q is not in lower case; list the public values in lower case", where, cn, v))
						break
					}
				}
			}
			colTypes[c] = lc
		}
	}
	sort.Strings(problems)
	if len(problems) == 0 {
		for name, ut := range unitTypes {
			ds.Tables[name].UnitType, ds.Tables[name].UnitTypeName, ds.Tables[name].UnitPGType = policy.Type(ut[0]), ut[1], ut[2]
		}
		for c, lc := range colTypes {
			c.PGType, c.Scale, c.PadChars = lc.base, max(lc.scale, 0), lc.pad
		}
	}
	return problems, nil
}

func readColumns(ctx context.Context, q Querier, schema, table string) (map[string]liveColumn, error) {
	rows, err := q.Query(ctx, `SELECT a.attname, bt.typname, format_type(a.atttypid, a.atttypmod),
			CASE WHEN bt.typname = 'numeric' AND coalesce(nullif(t.typtypmod, -1), a.atttypmod) >= 4
				THEN (coalesce(nullif(t.typtypmod, -1), a.atttypmod) - 4) & 65535 ELSE -1 END,
			coalesce(co.collisdeterministic, true),
			CASE WHEN bt.typname = 'bpchar' AND coalesce(nullif(t.typtypmod, -1), a.atttypmod) > 4
				THEN coalesce(nullif(t.typtypmod, -1), a.atttypmod) - 4 ELSE 0 END
		FROM pg_catalog.pg_attribute a
		JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		JOIN pg_catalog.pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
		LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, schema, table)
	if err != nil {
		return nil, fmt.Errorf("read the catalog of %s.%s: %w", schema, table, err)
	}
	defer rows.Close()
	out := map[string]liveColumn{}
	for rows.Next() {
		var name string
		var c liveColumn
		if err := rows.Scan(&name, &c.base, &c.shown, &c.scale, &c.deterministic, &c.pad); err != nil {
			return nil, err
		}
		out[strings.ToLower(name)] = c
	}
	return out, rows.Err()
}

var (
	intTypes  = map[string]bool{"int2": true, "int4": true, "int8": true}
	textTypes = map[string]bool{"text": true, "varchar": true, "bpchar": true, "citext": true}
)

// accepts returns "" when a live column can honour the declared type, else
// what is wrong and how to fix it.
func accepts(t policy.Type, c liveColumn) string {
	switch t {
	case policy.TypeInt:
		switch {
		case intTypes[c.base]:
			return ""
		case c.base == "numeric" && c.scale == 0:
			// numeric(p, 0) holds NaN too, which an int column's answers
			// (int8 keys, whole-number sums) cannot carry: a private key
			// of NaN went out as the text NaN in a bigint column, and
			// failed in binary after the charge.
			return "it can hold NaN, which an int column's answers cannot carry; declare type: numeric"
		case c.base == "numeric":
			return "it can hold fractions, which an int column's SQL would not expect; declare type: numeric"
		case c.base == "float4" || c.base == "float8":
			return "it can hold fractions, NaN and ±Infinity; declare type: float"
		}
	case policy.TypeNumeric:
		switch {
		case intTypes[c.base] || c.base == "numeric":
			return ""
		case c.base == "float4" || c.base == "float8":
			return "declare type: float (a float's ±Infinity and NaN are handled as float, not numeric)"
		}
	case policy.TypeFloat:
		switch {
		case intTypes[c.base] || c.base == "float4" || c.base == "float8":
			return ""
		case c.base == "numeric":
			return "a numeric value beyond float8's range would fail to convert; declare type: numeric"
		}
	case policy.TypeText:
		if textTypes[c.base] {
			if !c.deterministic {
				return "its collation is nondeterministic, under which PostgreSQL refuses LIKE; give the column a deterministic collation or declare it access: none"
			}
			return ""
		}
	case policy.TypeDate:
		if c.base == "date" {
			return ""
		}
	case policy.TypeBool:
		if c.base == "bool" {
			return ""
		}
	}
	return fmt.Sprintf("declare the type that matches (%s)", suggest(c))
}

func suggest(c liveColumn) string {
	switch {
	case intTypes[c.base]:
		return "type: int"
	case c.base == "numeric":
		return "type: numeric"
	case c.base == "float4" || c.base == "float8":
		return "type: float"
	case textTypes[c.base]:
		return "type: text"
	case c.base == "date":
		return "type: date"
	case c.base == "bool":
		return "type: bool"
	}
	return "no policy type fits " + c.shown + "; declare the column access: none"
}

// unitBases are the unit column types whose values the emitter reads as one
// text per value (pgemit unitSQL): their text is a function of the value
// (integers, uuid, bytea, bool, dates and times under the upstream
// session's pinned DateStyle and TimeZone, text and varchar under a
// deterministic collation, bpchar whose text drops the trailing blanks its
// equality ignores), or is made so (numeric as trim_scale, citext as
// lower).
var unitBases = map[string]bool{"int2": true, "int4": true, "int8": true, "numeric": true, "text": true, "varchar": true,
	"bpchar": true, "citext": true, "uuid": true, "bytea": true, "bool": true, "date": true, "timestamp": true, "timestamptz": true}

// unitAccepts returns "" when a unit column's values have one text per
// value as the emitter reads them, else why not and what to do. The
// emitter hashes a unit's text to choose its rows and groups; where two
// texts of one value exist (a float's 0 and -0, an interval's '1 day' and
// '24:00:00', a case-insensitive collation's 'Zed' and 'zed'), which text
// a (unit, group) shows depends on the order PostgreSQL reads rows in,
// which every other person's rows change (attack round 61).
func unitAccepts(c liveColumn) string {
	switch {
	case !unitBases[c.base]:
		return "a unit column must have one text per value (integer, numeric, text, varchar, char, citext, uuid, bytea, date or timestamp); use such a column (or a generated column) as the unit"
	case textTypes[c.base] && c.base != "citext" && !c.deterministic:
		return "its collation is nondeterministic (two texts can be equal), so one person can be written several ways; use a deterministic collation or citext"
	}
	return ""
}

// numericUnitServer refuses a numeric unit column on a data server older
// than PostgreSQL 14: the emitted SQL tests a numeric unit's length with
// pg_column_compression (pgemit unitKeptSQL; review 107), which such a
// server lacks, so every DP query would fail after its charge.
// *version is the server's version number, read here when 0.
func numericUnitServer(ctx context.Context, q Querier, c liveColumn, version *int32) (string, error) {
	if c.base != "numeric" {
		return "", nil
	}
	if *version == 0 {
		rows, err := q.Query(ctx, "SELECT current_setting('server_version_num')::int")
		if err != nil {
			return "", fmt.Errorf("read the data server's version: %w", err)
		}
		if *version, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[int32]); err != nil {
			return "", fmt.Errorf("read the data server's version: %w", err)
		}
	}
	if *version < 140000 {
		return "a numeric unit needs PostgreSQL 14 or later on the data server (its length is tested with pg_column_compression); upgrade it, or use an integer or text unit column", nil
	}
	return "", nil
}

// unitType maps a unit column's live type to the policy type its literals
// are checked against; "" for other types (uuid, …), whose comparisons
// with literals the planner refuses.
func unitType(c liveColumn) policy.Type {
	switch {
	case intTypes[c.base], c.base == "numeric" && c.scale == 0:
		return policy.TypeInt
	case textTypes[c.base] && c.deterministic:
		return policy.TypeText
	}
	return ""
}
