// Privacy-critical: needs DP review.
// Part of the emitter: what reaches the private database is built here
// (doc.go).

package pgemit

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
)

// PredSQL writes a validated WHERE condition as PostgreSQL SQL.
func PredSQL(w dpplan.Pred) string {
	switch p := w.(type) {
	case dpplan.PredBool:
		return "(" + PredSQL(p.L) + " " + p.Op + " " + PredSQL(p.R) + ")"
	case dpplan.PredNot:
		return "(NOT " + PredSQL(p.X) + ")"
	case dpplan.PredConst:
		return p.V
	case dpplan.PredCol:
		return p.Col
	case dpplan.PredCmp:
		col := p.Col
		if BoundedCmp(p.Op) {
			col = operand(col, p.Lit)
		}
		return "(" + col + " " + p.Op + " " + p.Lit + ")"
	case dpplan.PredIn:
		not := ""
		if p.Not {
			not = "NOT "
		}
		col := p.Col
		if len(p.Lits) >= HashedInLength {
			col = operand(col, p.Lits...)
		}
		return "(" + col + " " + not + "IN (" + strings.Join(p.Lits, ", ") + "))"
	case dpplan.PredBetween:
		not := ""
		if p.Not {
			not = "NOT "
		}
		return "(" + operand(p.Col, p.Lo, p.Hi) + " " + not + "BETWEEN " + p.Lo + " AND " + p.Hi + ")"
	case dpplan.PredNull:
		if p.Not {
			return "(" + p.Col + " IS NOT NULL)"
		}
		return "(" + p.Col + " IS NULL)"
	case dpplan.PredLike:
		op := "LIKE"
		if p.ILike {
			op = "ILIKE"
		}
		if p.Not {
			op = "NOT " + op
		}
		return "(" + boundedText(p.Col, dpplan.MaxConditionTextBytes) + " " + op + " " + p.Pattern + ")"
	}
	panic("pgemit: unknown WHERE condition")
}

// A condition reads a text value whole in three cases, where its work grows
// with the value's bytes (TestAttack101_ConditionsReadLongText): LIKE
// (dpplan/like.go), an ordering comparison or BETWEEN (varstr_cmp detoasts
// both sides), and an IN list PostgreSQL hashes (hashtext reads the whole
// value; lists of HashedInLength values or more, PostgreSQL 14 and later).
// There the column is read through boundedText, so a value over
// dpplan.MaxConditionTextBytes is NULL to the condition. `=`, `<>` and
// shorter IN lists compare the lengths in the values' headers first
// (texteq, textne, without detoasting) and are left as they are: the guard
// hides the column's statistics from PostgreSQL's estimates, so it is used
// only where it is needed.

// BoundedCmp reports whether a comparison with operator op reads a text
// column through boundedText: an ordering comparison, not =, <> or IS
// [NOT] DISTINCT FROM.
func BoundedCmp(op string) bool {
	return op != "=" && op != "<>" && !strings.Contains(op, "DISTINCT")
}

// HashedInLength is the shortest IN list PostgreSQL probes through a hash
// table (MIN_ARRAY_SIZE_FOR_HASHED_SAOP).
const HashedInLength = 9

// operand is a condition's column as it reads it: bounded to
// dpplan.MaxConditionTextBytes (boundedText) when it is compared with a
// text constant (the planner writes a text column's constants '…'::text;
// a unit column's are integers, written untyped), as it stands otherwise;
// a constant compared with constants as it stands.
func operand(col string, lits ...string) string {
	if !strings.HasPrefix(col, `"`) {
		return col
	}
	for _, l := range lits {
		if strings.HasSuffix(l, "::text") {
			return boundedText(col, dpplan.MaxConditionTextBytes)
		}
	}
	return col
}

// boundedText is text column col, or NULL when its value has more than n
// bytes: octet_length reads the length from the value's header without
// detoasting it (text, varchar and citext through textoctetlen, char(n)
// through bpcharoctetlen). A condition's work on a text value grows with
// its bytes (above; dpplan/like.go).
func boundedText(col string, n int) string {
	return "CASE WHEN octet_length(" + col + ") <= " + strconv.Itoa(n) + " THEN " + col + " END"
}
