package rewrite

import (
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// AT TIME ZONE over a date column (issue 31), as Cube writes its time
// dimensions and filters:
//
//	date_trunc('month', ("visits".visit_date::timestamptz AT TIME ZONE 'UTC'))
//	"visits".visit_date::timestamptz AT TIME ZONE 'UTC' >= $1::timestamptz
//
// d::timestamptz is midnight of d in the session's TimeZone, and AT TIME
// ZONE 'Z' its wall clock in Z, a timestamp without time zone. When Z is
// the session's zone that wall clock is midnight of d again (a zone whose
// transitions come near a midnight within the column's policy bounds is
// refused, where PostgreSQL would move a missing midnight), so the
// expression is d as a timestamp: the same keys (date_trunc of it is a
// timestamp, released with PostgreSQL's type and text) and the same
// comparisons (a timestamptz compared with it is converted in the session
// zone, as datefold.go does for the date). Under another zone the day of
// the result would move with the offset between the zones; that, a zone
// that is not a constant, and d::timestamp AT TIME ZONE (a timestamptz)
// are refused with a hint.
//
// The normalizer writes `col[::timestamptz] AT TIME ZONE 'Z'` as the call
// "dp_at_time_zone"(col, 'Z', 'cast') for the builder.

const atZoneMarker = "dp_at_time_zone"

const atZoneHint = "write date_col::timestamptz AT TIME ZONE 'zone' with the session's TimeZone as the zone (SET TIME ZONE 'zone'), e.g. date_trunc('month', visit_date::timestamptz AT TIME ZONE 'UTC') under TimeZone UTC"

// atTimeZone reads AT TIME ZONE 'zone' at toks[i] after the operand
// already written to the pieces, and wraps that operand in the marker
// call. It returns the index of the zone's token.
func (n *normalized) atTimeZone(src string, toks []pgsql.Token, i int, cast policy.Type) (int, error) {
	at := toks[i]
	if i+3 >= len(toks) || !toks[i+2].Is("zone") {
		return 0, pgsql.SyntaxErr(src, at.Pos, "syntax error at or near \"at\"").WithHint("write AT TIME ZONE 'zone'")
	}
	z := toks[i+3]
	if z.Kind != pgsql.TokString {
		return 0, pgerr.New(pgerr.FeatureNotSupported, "AT TIME ZONE needs a constant zone name").
			WithPosition(pgsql.CharPos(src, z.Pos)).WithHint("%s", atZoneHint)
	}
	if i+4 < len(toks) && toks[i+4].IsPunct("::") {
		return 0, pgerr.New(pgerr.FeatureNotSupported, "a cast of the zone of AT TIME ZONE is not supported").
			WithPosition(pgsql.CharPos(src, toks[i+4].Pos)).WithHint("%s", atZoneHint)
	}
	// The operand: a possibly qualified column name, as written.
	ps := n.pieces
	j := len(ps) - 1
	if j < 0 || !ps[j].word || ps[j].lit >= 0 || len(ps[j].text) == 0 || ps[j].text[0] != '"' {
		return 0, pgerr.New(pgerr.FeatureNotSupported, "AT TIME ZONE is supported over a date column only").
			WithPosition(pgsql.CharPos(src, at.Pos)).WithHint("%s", atZoneHint)
	}
	for j >= 2 && ps[j-1].text == "." && len(ps[j-2].text) > 0 && ps[j-2].text[0] == '"' {
		j -= 2
	}
	operand := append([]piece(nil), ps[j:]...)
	n.pieces = append(ps[:j], piece{text: pgemit.QuoteIdent(atZoneMarker), pos: at.Pos, lit: -1, word: true},
		piece{text: "(", pos: at.Pos, lit: -1})
	n.pieces = append(n.pieces, operand...)
	n.pieces = append(n.pieces, piece{text: ",", pos: at.Pos, lit: -1})
	n.lits = append(n.lits, literal{kind: litString, val: z.Val, pos: z.Pos})
	n.pieces = append(n.pieces, piece{text: "?", pos: z.Pos, lit: len(n.lits) - 1, word: true})
	n.pieces = append(n.pieces, piece{text: ",", pos: at.Pos, lit: -1})
	n.lits = append(n.lits, literal{kind: litString, val: string(cast), pos: at.Pos})
	n.pieces = append(n.pieces, piece{text: "?", pos: at.Pos, lit: len(n.lits) - 1, word: true},
		piece{text: ")", pos: at.Pos, lit: -1})
	return i + 3, nil
}

// atZoneCall returns e as the marker call, if it is one.
func atZoneCall(e ast.ExprNode) (*ast.FuncCallExpr, bool) {
	fc, ok := unparen(e).(*ast.FuncCallExpr)
	if !ok || fc.FnName.L != atZoneMarker || len(fc.Args) != 3 {
		return nil, false
	}
	return fc, true
}

// isColumnSide reports whether e is a column, or a date column AT TIME
// ZONE, in a comparison.
func isColumnSide(e ast.ExprNode) bool {
	if _, ok := unparen(e).(*ast.ColumnNameExpr); ok {
		return true
	}
	if _, ok := atZoneCall(e); ok {
		return true
	}
	_, ok := intCastCall(e)
	return ok
}

// atZoneColumn checks a marker call and returns its date column, which
// then stands for it (as a timestamp: b.tsCast).
func (b *builder) atZoneColumn(fc *ast.FuncCallExpr) (colInfo, error) {
	c, ok := unparen(fc.Args[0]).(*ast.ColumnNameExpr)
	if !ok {
		return colInfo{}, b.errAt(fc, pgerr.FeatureNotSupported, "AT TIME ZONE is supported over a date column only").WithHint("%s", atZoneHint)
	}
	ci, err := b.column(c)
	if err != nil {
		return colInfo{}, err
	}
	if ci.typ() != policy.TypeDate {
		return colInfo{}, b.errAt(fc, pgerr.FeatureNotSupported, "AT TIME ZONE is supported over date columns; %s is %s", ci.name, typeName(ci)).WithHint("%s", atZoneHint)
	}
	zl, _ := b.lit(fc.Args[1])
	cl, _ := b.lit(fc.Args[2])
	if cl.val == string(typTimestamp) {
		return colInfo{}, b.errAt(fc, pgerr.FeatureNotSupported, "%s::timestamp AT TIME ZONE (a timestamptz) is not supported", ci.name).WithHint("%s", atZoneHint)
	}
	zone := zl.val
	session := b.opts.Location
	if session == nil && UTCZone(b.opts.TimeZone) {
		session = time.UTC
	}
	var loc *time.Location
	if UTCZone(zone) {
		loc = time.UTC
	} else if loc, err = time.LoadLocation(zone); err != nil || zone == "" || zone == "Local" {
		return colInfo{}, b.errAt(fc.Args[1], pgerr.FeatureNotSupported, "time zone %q is not one dpproxy reproduces", zone).
			WithHint("use a zone name of the tz database, such as 'UTC' or 'Europe/Paris' (not an abbreviation or an offset); %s", atZoneHint)
	}
	if session == nil || session.String() != loc.String() {
		tz := b.opts.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		return colInfo{}, b.errAt(fc.Args[1], pgerr.FeatureNotSupported, "AT TIME ZONE %q of date column %s under TimeZone %q is not supported: its day would move by the offset between the zones", zone, ci.name, tz).
			WithHint("SET TIME ZONE '%s' (the zone of AT TIME ZONE) before the query, or compare and group %s without AT TIME ZONE", zone, ci.name)
	}
	if loc != time.UTC {
		if err := b.midnightsExact(fc, ci, loc); err != nil {
			return colInfo{}, err
		}
	}
	b.tsCast = true
	return ci, nil
}

// midnightsExact refuses a zone whose clock skips or repeats a midnight
// (a transition at midnight) within the column's policy bounds.
func (b *builder) midnightsExact(at ast.Node, ci colInfo, loc *time.Location) error {
	refuse := func() error {
		return b.errAt(at, pgerr.FeatureNotSupported, "time zone %s skips or repeats a midnight within the policy bounds of %s", loc, ci.name).
			WithHint("SET TIME ZONE 'UTC' and write AT TIME ZONE 'UTC', or group and compare %s without AT TIME ZONE", ci.name)
	}
	if ci.col == nil || !ci.col.HasBounds {
		return refuse()
	}
	lo, err1 := time.Parse("2006-01-02", ci.col.Lower)
	hi, err2 := time.Parse("2006-01-02", ci.col.Upper)
	if err1 != nil || err2 != nil {
		return refuse()
	}
	t := time.Date(lo.Year(), lo.Month(), lo.Day(), 0, 0, 0, 0, loc).Add(-transitionMargin)
	end := time.Date(hi.Year(), hi.Month(), hi.Day(), 0, 0, 0, 0, loc).AddDate(0, 0, 1)
	for steps := 0; t.Before(end); steps++ {
		_, next := t.ZoneBounds()
		if next.IsZero() || !next.Before(end.Add(transitionMargin)) || steps > 100_000 {
			return nil
		}
		// The wall clock jumps from before to after (or back): a
		// midnight within [min, max] is skipped or repeated.
		before, after := wallUTC(next.Add(-time.Nanosecond).In(loc)).Add(time.Nanosecond), wallUTC(next.In(loc))
		lo, hi := before, after
		if hi.Before(lo) {
			lo, hi = hi, lo
		}
		if m := dayOf(hi); !m.Before(lo) {
			return refuse()
		}
		t = next
	}
	return nil
}
