package rewrite

import (
	"fmt"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// The type and text of a date_trunc key (issue 31), as PostgreSQL gives
// them: date_trunc(text, date) is date_trunc(text, timestamptz), so
// date_trunc('month', visit_date) is a timestamptz, midnight of the
// period's first day in the session's TimeZone, which psql shows as
// "2024-01-01 00:00:00+01" (the zone's offset on that day). Over a column
// cast to timestamp, or AT TIME ZONE the session's zone (attz.go), it is a
// timestamp ("2024-01-01 00:00:00"); cast to date (Metabase's
// CAST(date_trunc(…) AS date)), a date; cast to text, the text of the
// value. The key's Args after the unit are its type and, for the texts
// with an offset, the offsets: the first, then each date from which the
// next applies (pgemit/key_sql.go writes the text from them). A zone
// that dpproxy cannot reproduce (a numeric offset) keeps the date key, as
// before; a zone whose clock skips a period's midnight (PostgreSQL would
// show 01:00) is refused.

// truncKey builds date_trunc(unit, col) over the period starts dates.
func (b *builder) truncKey(fc *ast.FuncCallExpr, ci colInfo, unit string, dates []time.Time) (Key, *policy.Column, error) {
	inner := "timestamptz"
	if _, ok := atZoneCall(fc.Args[1]); ok {
		inner = "timestamp"
	} else if c, ok := unparen(fc.Args[1]).(*ast.ColumnNameExpr); ok {
		switch b.intCasts[b.norm.srcPos(c.OriginTextPosition())] {
		case "timestamp":
			inner = "timestamp"
		}
	}
	typ := inner
	switch t := b.intCasts[b.norm.srcPos(fc.OriginTextPosition())]; t {
	case "date", "timestamp", "timestamptz", "text":
		typ = t
	}
	loc := b.opts.Location
	if loc == nil && UTCZone(b.opts.TimeZone) {
		loc = time.UTC
	}
	if typ == "date" || loc == nil && (typ == "timestamptz" || typ == "text" && inner == "timestamptz") {
		// A date key (or the zone cannot be reproduced: the date, as
		// before).
		dom := make([]string, len(dates))
		for i, d := range dates {
			dom[i] = d.Format("2006-01-02")
		}
		return Key{Column: ci.name, Type: policy.TypeDate, Domain: dom, Func: "date_trunc", Args: []string{unit}}, ci.col, nil
	}
	args := []string{unit, typ}
	dom := make([]string, len(dates))
	offsets := typ == "timestamptz" || typ == "text" && inner == "timestamptz"
	var last string
	for i, d := range dates {
		dom[i] = d.Format("2006-01-02") + " 00:00:00"
		if inner != "timestamptz" {
			continue
		}
		// Truncated as a timestamptz: the period starts at midnight in
		// the session's zone, which must exist once (PostgreSQL moves a
		// skipped midnight to the end of the gap). A numeric-offset zone
		// (loc nil here only for a timestamp result) has no transitions.
		if loc == nil {
			continue
		}
		m := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc)
		if m.Hour() != 0 || m.Day() != d.Day() || dayOf(wallUTC(m.Add(-time.Nanosecond))).Equal(dayOf(d)) {
			return Key{}, nil, b.errAt(fc, pgerr.FeatureNotSupported, "time zone %s skips or repeats the midnight of %s", loc, d.Format("2006-01-02")).
				WithHint("SET TIME ZONE 'UTC' for date_trunc keys of %s, or CAST(date_trunc(…) AS date)", ci.name)
		}
		if !offsets {
			continue
		}
		_, off := m.Zone()
		o := offsetText(off)
		dom[i] += o
		switch {
		case i == 0:
			args = append(args, o)
		case o != last:
			args = append(args, d.Format("2006-01-02"), o)
		}
		last = o
	}
	return Key{Column: ci.name, Type: policy.TypeDate, Domain: dom, Func: "date_trunc", Args: args}, ci.col, nil
}

// offsetText is PostgreSQL's text of a UTC offset in seconds east:
// +01, -03:30, +00:19:32.
func offsetText(off int) string {
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	s := fmt.Sprintf("%c%02d", sign, off/3600)
	if m, sec := off%3600/60, off%60; m != 0 || sec != 0 {
		s += fmt.Sprintf(":%02d", m)
		if sec != 0 {
			s += fmt.Sprintf(":%02d", sec)
		}
	}
	return s
}
