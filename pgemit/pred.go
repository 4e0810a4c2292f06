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
		return "(" + p.Col + " " + p.Op + " " + p.Lit + ")"
	case dpplan.PredIn:
		not := ""
		if p.Not {
			not = "NOT "
		}
		return "(" + p.Col + " " + not + "IN (" + strings.Join(p.Lits, ", ") + "))"
	case dpplan.PredBetween:
		not := ""
		if p.Not {
			not = "NOT "
		}
		return "(" + p.Col + " " + not + "BETWEEN " + p.Lo + " AND " + p.Hi + ")"
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
		return "(" + likeOperand(p.Col) + " " + op + " " + p.Pattern + ")"
	}
	panic("pgemit: unknown WHERE condition")
}

// likeOperand is the value a LIKE or ILIKE condition reads: col, or NULL
// when it has more than dpplan.MaxLikeTextBytes bytes (octet_length reads
// the length from the value's header, without detoasting it). A LIKE's
// work grows with the value's bytes, and one person's long values had made
// an answer overrun its time slot (dpplan/like.go, attack round 101).
func likeOperand(col string) string {
	return "CASE WHEN octet_length(" + col + "::text) <= " + strconv.Itoa(dpplan.MaxLikeTextBytes) + " THEN " + col + " END"
}
