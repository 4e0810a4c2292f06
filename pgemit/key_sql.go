// Privacy-critical: needs DP review.
// Part of the emitter: what reaches the private database is built here
// (doc.go).

package pgemit

import (
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/policy"
)

// keyValueSQL is the value of key k that the SQL groups by and releases as
// its text. PostgreSQL groups numbers by value, but a group's text is that
// of whichever row represents it: 1.5 and 1.50 are one group of a numeric
// column without a declared scale, 0 and -0 one group of a float column,
// and the representative is a row of the data (of the smallest unit in the
// emitted SQL's order), so releasing its text released how one person's
// value was written (TestAttack55_NumericKeyTextFromOneUnit). A plain
// numeric column without a declared scale is therefore grouped and released
// as trim_scale(x) (PostgreSQL 13 and later), a float column as x + 0 (IEEE
// 754: -0 + 0 = +0; NaN stays NaN), a citext column (equal when their lower
// cases are) as lower(x) (internal/catalog requires its public values in
// lower case), each the value's one text. Key expressions (keyexpr.go)
// already have one text per value: integers, dates, constants.
//
// A private key's value is the data's, and the proxy reads each candidate
// group's (release/partition.go): one of a text or numeric column longer
// than MaxPrivateKeyBytes is NULL, so its rows are not grouped (a free-text
// column of notes as a key would otherwise make the proxy read each
// note whole, a size no public quantity bounds).
func keyValueSQL(t *policy.Table, k dpplan.Key) string {
	s := keySQL(k)
	if k.Func != "" {
		return s
	}
	raw, lowered := s, false
	switch c := t.Columns[k.Column]; {
	case k.Type == policy.TypeNumeric && (c == nil || c.Scale == 0):
		s = "trim_scale(" + s + ")"
	case k.Type == policy.TypeFloat:
		s = "(" + s + " + 0)"
	case c != nil && c.PGType == "citext":
		s, lowered = citextLower(s), true
	}
	switch {
	case k.Private && k.Type == policy.TypeText && lowered:
		// lower() reads and copies the whole value: a raw value over
		// 4·MaxPrivateKeyBytes bytes (its header's length) is not
		// lowered, as no lower case of it fits (a character has at most
		// 4 bytes, its lower case at least 1).
		s = "CASE WHEN octet_length(" + raw + ") > " + strconv.Itoa(4*MaxPrivateKeyBytes) + " THEN NULL WHEN octet_length(" + s + ") <= " + strconv.Itoa(MaxPrivateKeyBytes) + " THEN " + s + " END"
	case k.Private && k.Type == policy.TypeText:
		s = "CASE WHEN octet_length(" + s + ") <= " + strconv.Itoa(MaxPrivateKeyBytes) + " THEN " + s + " END"
	case k.Private && k.Type == policy.TypeNumeric:
		s = "CASE WHEN " + numericTextLongSQL(s, MaxPrivateKeyBytes) + " THEN NULL WHEN octet_length(" + s + "::text) <= " + strconv.Itoa(MaxPrivateKeyBytes) + " THEN " + s + " END"
	case !k.Private:
		if n, ok := publicKeyBytes(t, k); ok {
			s = "CASE WHEN octet_length(" + raw + ") <= " + strconv.Itoa(n) + " THEN " + s + " END"
		}
	}
	return s
}

// domainOperand is public key k as its domain test reads it: through the
// length test of publicKeyBytes where that applies.
func domainOperand(t *policy.Table, k dpplan.Key) string {
	s := keySQL(k)
	if n, ok := publicKeyBytes(t, k); ok && k.Func == "" {
		s = "CASE WHEN octet_length(" + s + ") <= " + strconv.Itoa(n) + " THEN " + s + " END"
	}
	return s
}

// publicKeyBytes bounds the raw bytes of a value of public text key k
// that its domain test can accept, and reports whether the key is read
// through that bound: 4 bytes a character of its longest public value (a
// citext value is lowered first, and a character has at most 4 bytes, its
// lower case at least 1), or of its char(n) length (stored padded). A
// longer value is read as NULL, outside the domain as it is, where the
// domain test would read it whole: an IN list of HashedInLength values or
// more hashes it, and lower() copies a citext value
// (TestAttack107_LongPublicKeyTime). Shorter lists compare the lengths in
// the headers first and
// are left unguarded (the guard hides the column's statistics from
// PostgreSQL's estimates).
func publicKeyBytes(t *policy.Table, k dpplan.Key) (int, bool) {
	c := t.Columns[k.Column]
	citext := c != nil && c.PGType == "citext"
	if k.Private || k.Func != "" || k.Type != policy.TypeText || len(k.Domain) == 0 || !citext && len(k.Domain) < HashedInLength {
		return 0, false
	}
	n := 0
	for _, v := range k.Domain {
		n = max(n, len(v))
	}
	if c != nil {
		n = max(n, c.PadChars)
	}
	return 4 * n, true
}

// unitSQL is the unit column as the emitted SQL reads it (dp_unit): one
// text per unit. Rows and groups are chosen by hashes of the unit's text
// (bounds_sql.go, sampleagg_sql.go), computed after GROUP BY, where a
// (unit, group) shows the text of whichever of its rows PostgreSQL read
// first; when one unit has several texts ('U7@x.org' and 'u7@x.org' of a
// citext, 1000 and 1000.0 of a numeric), that order, and so the groups
// and rows the unit keeps, would depend on every other person's rows
// (TestAttack61_GroupSelectUnitTextDependsOnOthers). A citext unit is read
// as lower(u), a numeric one as
// trim_scale(u); internal/catalog refuses unit types without one text per
// value that these cannot give (policy.Table.UnitPGType).
func unitSQL(t *policy.Table) string {
	u := QuoteIdent(t.UnitColumn)
	switch t.UnitPGType {
	case "citext":
		return citextLower(u)
	case "numeric":
		return "trim_scale(" + u + ")"
	}
	return u
}

// unitKeptSQL is the condition that a row's unit value (column u, quoted,
// of base type pgType) is at most dpplan.MaxUnitBytes long, "" for a
// fixed-size type: octet_length reads a text's or bytea's raw length from
// its header or TOAST pointer, pg_column_size a numeric's stored size,
// neither reading the value. A numeric's stored size is its compressed size
// when PostgreSQL compressed it (pglz or lz4: 131,000 digits of 7 are 765
// bytes), and numeric has no raw-length function, so a compressed numeric
// unit has no unit either (pg_column_compression, PostgreSQL 14 and later;
// a numeric of at most 1,024 bytes is compressed only in a row of over 2 kB
// whose other columns could not be moved out of line). A row with a longer
// unit has no unit and is excluded wherever the unit is read (sourceConds,
// SampleAggSQL, unitCutSQL): the unit is grouped, sorted and hashed, and a
// TOASTed value is fetched whole at each comparison
// (TestAttack104_LongUnitIDTime).
func unitKeptSQL(u, pgType string) string {
	n := strconv.Itoa(dpplan.MaxUnitBytes)
	switch pgType {
	case "text", "varchar", "bpchar", "citext", "bytea":
		return "octet_length(" + u + ") <= " + n
	case "numeric":
		return "pg_column_compression(" + u + ") IS NULL AND pg_column_size(" + u + ") <= " + n + " AND NOT COALESCE(" + numericTextLongSQL("trim_scale("+u+")", dpplan.MaxUnitBytes) + ", FALSE)"
	}
	return ""
}

// numericTextLongSQL is a condition, true when numeric x's text is longer
// than n characters for certain, read from the value's weight and scale
// without writing its text; false or NULL otherwise (NaN, ±Infinity and
// every value whose text may fit, which the caller measures). A numeric
// keeps its digits from the first to the last non-zero one, and its
// weight and display scale in the header, so its stored size does not
// bound its text (TestAttack108_NumericKeyTextTime): 9e131071 is 10 bytes
// stored and 131,072 characters of text, and 1e-16383 is 16,385
// characters. A value
// beyond ±10^(n+1) has over n digits before its point, one whose display
// scale is over n as many after it: comparisons with a constant and
// scale() read only the header. x = x * 0.5 holds for NaN and ±Infinity
// alone among the values beyond (a product by a one-digit constant, which
// no value's magnitude can overflow), so their short texts are measured.
func numericTextLongSQL(x string, n int) string {
	bound := "1e" + strconv.Itoa(n+1)
	return "(NOT (" + x + " BETWEEN -" + bound + " AND " + bound + " OR " + x + " = " + x + " * 0.5) OR scale(" + x + ") > " + strconv.Itoa(n) + ")"
}

// unitConds are the conditions that a row has a unit: unit (its SQL,
// unitSQL) is not NULL and the raw value is short enough (unitKeptSQL),
// the length test first.
func unitConds(t *policy.Table, unit string) []string {
	if c := unitKeptSQL(QuoteIdent(t.UnitColumn), t.UnitPGType); c != "" {
		return []string{c, unit + " IS NOT NULL"}
	}
	return []string{unit + " IS NOT NULL"}
}

// citextLower is a citext value's one text: its lower case under the
// database's default collation, the one citext's equality lowers both
// sides under, whatever the column's collation (under a Turkish collation
// lower('IRIS') is 'ırıs': TestAttack62_CitextUnitLowerUnderColumnCollation).
func citextLower(x string) string { return "lower(" + x + ` COLLATE "default")` }

// MaxPrivateKeyBytes bounds the text of a private group key's value
// (keyValueSQL).
const MaxPrivateKeyBytes = dpplan.MaxPrivateKeyBytes

// keySQL is the SQL of a key over the table's row: the quoted column, or
// the key expression with its constants (re-encoded by the planner:
// rewrite/casekey.go, keyexpr.go, datekey.go).
func keySQL(k dpplan.Key) string {
	c := QuoteIdent(k.Column)
	if s := dateKeySQL(k, c); s != "" {
		return s // rewrite/datekey.go
	}
	switch k.Func {
	case "width_bucket":
		// NaN would make width_bucket raise 2201G on that row (an error
		// that depends on the data): NULLIF turns it into NULL, outside
		// the domain. ±Infinity fall in buckets 0 and count+1.
		return "width_bucket(NULLIF(" + c + "::numeric, 'NaN'), " + NumericConst(k.Args[0]) + ", " + NumericConst(k.Args[1]) + ", " + k.Args[2] + ")"
	case "date_trunc":
		// date_trunc casts the date to timestamptz, which raises 22008
		// for dates after 294276 AD: only dates from the first key of the
		// domain to the end of its last are truncated (the others are
		// outside the domain anyway, and become NULL).
		//
		// The period start is computed as a date; a key typed timestamp,
		// timestamptz or text (Args[1], rewrite/trunckey.go) is written
		// as PostgreSQL's text of it: the date, " 00:00:00", and for a
		// timestamptz the session zone's offset on that date (Args[2] for
		// the first dates, then date/offset pairs from which the next
		// applies), so the key's text does not depend on the upstream
		// session's TimeZone.
		first, last := k.Domain[0][:10], k.Domain[len(k.Domain)-1][:10]
		end, _ := time.Parse("2006-01-02", last)
		end = PeriodNext(end, k.Args[0])
		d := "date_trunc(" + QuoteString(k.Args[0]) + ", CASE WHEN " + c + " >= " + QuoteString(first) + "::date AND " + c + " < " +
			QuoteString(end.Format("2006-01-02")) + "::date THEN " + c + " END)::date"
		switch {
		case len(k.Args) == 1:
			return d
		case len(k.Args) == 2 && k.Args[1] == "timestamp":
			return d + "::timestamp"
		case len(k.Args) == 2: // text of a timestamp
			return "(" + d + ")::text || ' 00:00:00'"
		case len(k.Args) == 3:
			return "(" + d + ")::text || " + QuoteString(" 00:00:00"+k.Args[2])
		}
		var b strings.Builder
		b.WriteString("(" + d + ")::text || CASE")
		for i := 2; i+2 < len(k.Args); i += 2 {
			b.WriteString(" WHEN " + d + " < " + QuoteString(k.Args[i+1]) + "::date THEN " + QuoteString(" 00:00:00"+k.Args[i]))
		}
		b.WriteString(" ELSE " + QuoteString(" 00:00:00"+k.Args[len(k.Args)-1]) + " END")
		return b.String()
	case "arith":
		// Integer arithmetic over a date field (rewrite/arithkey.go):
		// Args are the type, the field key's Func, its number of Args,
		// its Args, then operator and integer constant pairs.
		n, _ := strconv.Atoi(k.Args[2])
		e := keySQL(dpplan.Key{Column: k.Column, Func: k.Args[1], Args: k.Args[3 : 3+n]})
		if t := k.Args[0]; t != "numeric" && t != "float8" {
			// The integer cast is computed as int8 over finite dates
			// only: the planner checked that no value of the domain
			// overflows the key's type, but a row outside the domain (a
			// year past the policy's bounds, an infinite date, whose
			// field is ±Infinity) would make int2 or int4 raise 22003 or
			// 0A000 on that row, an error that depends on the data. In
			// int8 the field of a finite date plus or minus constants of
			// at most 10⁹ never overflows; such rows get a value outside
			// the domain, or NULL, and are left out like any other. The
			// domain's values are the same in either type.
			e = "(CASE WHEN isfinite(" + c + ") THEN " + e + " END)::int8"
		}
		for i := 3 + n; i+1 < len(k.Args); i += 2 {
			e = "(" + e + " " + k.Args[i] + " (" + k.Args[i+1] + "))"
		}
		return e
	case "case":
		// Built by caseKey from planned conditions and re-encoded
		// constants (rewrite/casekey.go).
		return k.Args[0]
	}
	return c
}

// PeriodNext is the start of the period after the one starting at t.
func PeriodNext(t time.Time, unit string) time.Time {
	switch unit {
	case "year":
		return t.AddDate(1, 0, 0)
	case "quarter":
		return t.AddDate(0, 3, 0)
	case "month":
		return t.AddDate(0, 1, 0)
	case "week":
		return t.AddDate(0, 0, 7)
	}
	return t.AddDate(0, 0, 1)
}

// dateKeySQL is the SQL of the keys above over the quoted column c, or ""
// for other keys.
func dateKeySQL(k dpplan.Key, c string) string {
	switch k.Func {
	case "extract":
		if len(k.Args) == 4 { // date_part: float8, within the bounds
			return "CASE WHEN " + c + " BETWEEN " + QuoteString(k.Args[2]) + "::date AND " + QuoteString(k.Args[3]) + "::date THEN date_part(" + QuoteString(k.Args[0]) + ", " + c + ") END"
		}
		return "EXTRACT(" + strings.ToUpper(k.Args[0]) + " FROM " + c + ")"
	case "epoch":
		// Within the bounds only: no infinite dates reach EXTRACT.
		e := "EXTRACT(EPOCH FROM " + c + ")"
		if k.Args[1] == "float8" { // date_part casts to timestamp: guarded too
			e = "date_part('epoch', " + c + ")"
		}
		if k.Args[0] != "" {
			e = "floor(" + e + " / " + k.Args[0] + ") * " + k.Args[0]
		}
		return "CASE WHEN " + c + " BETWEEN " + QuoteString(k.Args[2]) + "::date AND " + QuoteString(k.Args[3]) + "::date THEN " + e + " END"
	case "int_bucket":
		return "CASE WHEN " + c + " BETWEEN " + k.Args[1] + " AND " + k.Args[2] + " THEN floor(" + c + " / " + k.Args[0] + ") * " + k.Args[0] + " END"
	}
	return ""
}
