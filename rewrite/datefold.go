package rewrite

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Timestamps compared with date columns (issue 17, item 3), folded to the
// exact date comparison PostgreSQL performs:
//
//   - An untyped string ('2024-03-31T23:59:59Z', Grafana's $__timeFilter)
//     compared with a date is read as a date: date_in keeps the day as
//     written and ignores the time and the zone.
//   - TIMESTAMP '…' (and '…'::timestamp, CAST('…' AS timestamp)): the date
//     is promoted to timestamp at midnight; a zone written in the literal
//     is ignored, as timestamp_in ignores it.
//   - TIMESTAMPTZ '…', TIMESTAMP WITH TIME ZONE '…', to_timestamp(epoch)
//     and to_timestamp('…', 'YYYY-MM-DD HH24:MI:SS'): the date is promoted
//     to timestamptz at midnight of the session's TimeZone, and a literal
//     without zone is read in it. The instant is converted to the wall
//     clock of the session zone (Options.Location, the tz database both
//     PostgreSQL and Go read); the fold is refused when the session zone is
//     not one dpproxy can reproduce (a numeric offset) or when a zone
//     transition lies within 3 hours of a midnight involved (or of a
//     literal without zone), where the wall clock is not monotonic.
//
// With the literal's wall clock t, F its day and C = F when t is midnight,
// else F + 1 (midnight(d) ≥ t ⇔ d ≥ C, midnight(d) ≤ t ⇔ d ≤ F):
//
//	d >= t → d >= C    d > t → d > F    d <= t → d <= F    d < t → d < C
//	d = t  → d = F (midnight) or (d > F AND d < C): false, NULL for NULL
//	d <> t → d <> F (midnight) or (d <= F OR d >= C): true, NULL for NULL
//	BETWEEN s AND t → BETWEEN C(s) AND F(t)
//
// TestDateFold_MatchesPostgres checks every rule against PostgreSQL on
// random literals and session zones.

const (
	typTimestamp   policy.Type = "timestamp"
	typTimestampTZ policy.Type = "timestamptz"
)

// timestampRE is the timestamp text dpproxy reads (PostgreSQL reads
// more; other texts are refused): ISO date, optional time with up to
// microseconds, optional zone Z, UTC, ±hh, ±hhmm, ±hh:mm.
var timestampRE = regexp.MustCompile(`^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:\s+|[Tt])(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?\s*(?:([Zz]|UTC|utc)|([+-])(\d{2})(?::?(\d{2}))?)?\s*$`)

// tsText is a parsed timestamp text.
type tsText struct {
	wall    time.Time // fields as written, in UTC
	hasZone bool
	offset  int // seconds east of UTC
}

func parseTimestampText(v string) (tsText, bool) {
	m := timestampRE.FindStringSubmatch(v)
	if m == nil {
		return tsText{}, false
	}
	n := func(s string) int { x, _ := strconv.Atoi(s); return x }
	y, mo, d := n(m[1]), n(m[2]), n(m[3])
	h, mi, s := n(m[4]), n(m[5]), n(m[6])
	us := 0
	if m[7] != "" {
		us = n((m[7] + "000000")[:6])
	}
	if y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59 {
		return tsText{}, false
	}
	wall := time.Date(y, time.Month(mo), d, h, mi, s, us*1000, time.UTC)
	if wall.Day() != d || wall.Month() != time.Month(mo) {
		return tsText{}, false // 2023-02-30
	}
	t := tsText{wall: wall}
	switch {
	case m[8] != "":
		t.hasZone = true
	case m[9] != "":
		oh, om := n(m[10]), n(m[11])
		if oh > 15 || om > 59 {
			return tsText{}, false
		}
		t.hasZone, t.offset = true, (oh*3600+om*60)*map[string]int{"+": 1, "-": -1}[m[9]]
	}
	return t, true
}

// dayOf is midnight (UTC) of t's wall-clock day.
func dayOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// dateFold is a literal compared with a date column: floor F and ceiling
// C of its wall clock (equal for dates and midnights).
type dateFold struct {
	floor, ceil time.Time
}

func (f dateFold) exact() bool { return f.floor.Equal(f.ceil) }

func dateConst(d time.Time) string { return "'" + d.Format("2006-01-02") + "'::date" }

// transitionMargin is how far a zone transition must be from a midnight
// (or a literal without zone) for the wall clock there to be monotonic and
// unambiguous. Transitions move clocks by at most 2 hours.
const transitionMargin = 3 * time.Hour

func nearTransition(t time.Time) bool {
	start, end := t.ZoneBounds()
	return !start.IsZero() && t.Sub(start) < transitionMargin || !end.IsZero() && end.Sub(t) < transitionMargin
}

// UTCZone reports whether a TimeZone setting is UTC under another name.
func UTCZone(tz string) bool {
	switch strings.ToLower(strings.TrimSpace(tz)) {
	case "", "utc", "gmt", "z", "zulu", "universal", "uct", "greenwich", "etc/utc", "etc/gmt", "etc/uct", "etc/universal", "etc/zulu", "etc/greenwich", "gmt0", "etc/gmt0", "gmt+0", "gmt-0", "etc/gmt+0", "etc/gmt-0":
		return true
	}
	return false
}

// dateFoldOf reads e as a timestamp compared with the date column ci:
// ok is false when e is no timestamp (a plain date literal is left to
// typedLit).
func (b *builder) dateFoldOf(e ast.ExprNode, ci colInfo) (dateFold, bool, error) {
	var ts tsText
	tz := false
	if fc, isCall := unparen(e).(*ast.FuncCallExpr); isCall && strings.EqualFold(fc.FnName.O, "to_timestamp") {
		var err error
		if ts, err = b.toTimestamp(fc); err != nil {
			return dateFold{}, true, err
		}
		tz = true
	} else {
		l, isLit := b.lit(e)
		if !isLit || l.kind != litString || l.typ != "" && l.typ != typTimestamp && l.typ != typTimestampTZ {
			return dateFold{}, false, nil
		}
		parsed, okTS := parseTimestampText(l.val)
		if l.typ == "" {
			// date_in: the day as written; a text it reads differently
			// from us is left to typedLit, which refuses it.
			if !okTS || b.tsCast && !dayOf(parsed.wall).Equal(parsed.wall) {
				if okTS {
					return dateFold{}, true, b.errAt(e, pgerr.FeatureNotSupported, "comparing a column cast to timestamp with %q is not supported", l.val).
						WithHint("compare %s itself with the literal, e.g. %s >= TIMESTAMP '%s'", ci.name, ci.name, l.val)
				}
				return dateFold{}, false, nil
			}
			d := dayOf(parsed.wall)
			return dateFold{floor: d, ceil: d}, true, nil
		}
		if !okTS {
			return dateFold{}, true, b.errAt(e, "22007", "unsupported timestamp text %q", l.val).
				WithHint("write timestamps as 'YYYY-MM-DD HH:MM:SS[.ffffff][Z|±hh[:mm]]'")
		}
		ts, tz = parsed, l.typ == typTimestampTZ
	}
	wall := ts.wall
	if tz {
		var err error
		if wall, err = b.sessionWall(e, ts); err != nil {
			return dateFold{}, true, err
		}
	}
	f := dayOf(wall)
	c := f
	if !wall.Equal(f) {
		c = f.AddDate(0, 0, 1)
	}
	if f.Year() < 1 || c.Year() > 9999 {
		return dateFold{}, true, b.errAt(e, "22008", "timestamp out of the supported range").WithHint("compare %s with a date between 0001-01-01 and 9999-12-31", ci.name)
	}
	return dateFold{floor: f, ceil: c}, true, nil
}

// sessionWall converts a timestamptz literal to the wall clock of the
// session's TimeZone (see above for when that is exact).
func (b *builder) sessionWall(at ast.Node, ts tsText) (time.Time, error) {
	loc := b.opts.Location
	if loc == nil {
		if !UTCZone(b.opts.TimeZone) {
			return time.Time{}, b.errAt(at, pgerr.FeatureNotSupported, "cannot compare a date column with a timestamptz exactly under TimeZone %q", b.opts.TimeZone).
				WithHint("SET TIME ZONE 'UTC' (or a named zone such as 'Europe/Paris'), or compare with a date or a TIMESTAMP without time zone")
		}
		loc = time.UTC
	}
	refuse := func() error {
		return b.errAt(at, pgerr.FeatureNotSupported, "this timestamptz is within %v of a time zone transition of %s", transitionMargin, loc).
			WithHint("compare with a date or a TIMESTAMP without time zone")
	}
	var local time.Time
	if ts.hasZone {
		local = ts.wall.Add(-time.Duration(ts.offset) * time.Second).In(loc)
	} else {
		w := ts.wall
		local = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
		if loc != time.UTC && nearTransition(local) {
			return time.Time{}, refuse()
		}
	}
	wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
	if loc != time.UTC {
		for _, d := range []time.Time{dayOf(wall), dayOf(wall).AddDate(0, 0, 1)} {
			if nearTransition(time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc)) {
				return time.Time{}, refuse()
			}
		}
	}
	return wall, nil
}

// toTimestampFormats are the to_timestamp formats read, with the text
// each needs (exact digit counts: PostgreSQL reads more liberally).
var toTimestampFormats = map[string]*regexp.Regexp{
	"YYYY-MM-DD":               regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`),
	"YYYY-MM-DD HH24:MI:SS":    regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$`),
	"YYYY-MM-DD HH24:MI:SS.MS": regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$`),
	"YYYY-MM-DD HH24:MI:SS.US": regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$`),
	`YYYY-MM-DD"T"HH24:MI:SS`:  regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$`),
}

// maxEpochLiteral bounds to_timestamp(n): integers below 2^53 / 10^6, which
// PostgreSQL's float8 microsecond arithmetic holds exactly.
const maxEpochLiteral = 9_000_000_000

const toTimestampHint = "write to_timestamp(integer_epoch_seconds) or to_timestamp('YYYY-MM-DD HH:MM:SS', 'YYYY-MM-DD HH24:MI:SS')"

// toTimestamp reads to_timestamp(epoch) or to_timestamp(text, format).
func (b *builder) toTimestamp(fc *ast.FuncCallExpr) (tsText, error) {
	bad := func(at ast.Node) error {
		return b.errAt(at, pgerr.FeatureNotSupported, "this to_timestamp call is not supported against a date column").WithHint("%s", toTimestampHint)
	}
	switch len(fc.Args) {
	case 1:
		l, ok := b.lit(fc.Args[0])
		if !ok || l.kind != litNumber || l.typ != "" && !l.typ.Numeric() || !intRE.MatchString(l.val) {
			return tsText{}, bad(fc)
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(l.val, "+"), 10, 64)
		if err != nil || n > maxEpochLiteral || n < -maxEpochLiteral {
			return tsText{}, bad(fc)
		}
		return tsText{wall: time.Unix(n, 0).UTC(), hasZone: true}, nil
	case 2:
		v, ok1 := b.lit(fc.Args[0])
		f, ok2 := b.lit(fc.Args[1])
		if !ok1 || !ok2 || v.kind != litString || f.kind != litString || v.typ != "" && v.typ != policy.TypeText || f.typ != "" && f.typ != policy.TypeText {
			return tsText{}, bad(fc)
		}
		re, ok := toTimestampFormats[strings.ToUpper(f.val)]
		if !ok || !re.MatchString(v.val) {
			return tsText{}, bad(fc)
		}
		ts, ok := parseTimestampText(v.val)
		if !ok || ts.hasZone {
			return tsText{}, bad(fc)
		}
		return ts, nil
	}
	return tsText{}, bad(fc)
}

// foldCmp is col op t for a date column and a folded timestamp.
func foldCmp(col, op string, f dateFold) dpplan.Pred {
	if f.exact() {
		return dpplan.PredCmp{Col: col, Op: op, Lit: dateConst(f.floor)}
	}
	fl, ce := dateConst(f.floor), dateConst(f.ceil)
	switch op {
	case ">=":
		return dpplan.PredCmp{Col: col, Op: ">=", Lit: ce}
	case "<":
		return dpplan.PredCmp{Col: col, Op: "<", Lit: ce}
	case ">":
		return dpplan.PredCmp{Col: col, Op: ">", Lit: fl}
	case "<=":
		return dpplan.PredCmp{Col: col, Op: "<=", Lit: fl}
	case "=":
		return dpplan.PredBool{Op: "AND", L: dpplan.PredCmp{Col: col, Op: ">", Lit: fl}, R: dpplan.PredCmp{Col: col, Op: "<", Lit: ce}}
	case "<>":
		return dpplan.PredBool{Op: "OR", L: dpplan.PredCmp{Col: col, Op: "<=", Lit: fl}, R: dpplan.PredCmp{Col: col, Op: ">=", Lit: ce}}
	case "IS NOT DISTINCT FROM":
		return dpplan.PredConst{V: "FALSE"}
	}
	return dpplan.PredConst{V: "TRUE"} // IS DISTINCT FROM
}
