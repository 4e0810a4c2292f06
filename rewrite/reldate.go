package rewrite

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// Relative dates (issue 31): now(), current_date, current_timestamp,
// localtimestamp, transaction_timestamp(), statement_timestamp(), typed
// date and timestamp literals, ± interval '…' and date ± integer, casts
// between date, timestamp and timestamptz, and date_trunc of these, are
// folded to one constant literal before the statement is normalized:
//
//	visit_date >= now() - interval '2 years'
//	  → visit_date >= '2024-11-28 10:38:20.123456+00'::timestamptz
//	visit_date > current_date - 365 → visit_date > '2025-11-28'::date
//
// The literal then goes where any literal goes (datefold.go compares a
// timestamp with a date column exactly), so the emitter only ever sees
// constants. The clock is read once per statement: Options.Now, which the
// proxy sets when the statement starts (or, when zero, plan reads it
// once), so every relative date of a statement, its automatic bounds and
// its replans see the same instant. PostgreSQL's now() is the start of the
// transaction; dpproxy's transactions never write, and it folds at the
// start of the statement (docs/SQL.md, "Supported SQL").
//
// Arithmetic follows PostgreSQL: timestamp + interval adds the months
// (the day clamped to the month's last), then the days, then the time;
// timestamptz + interval does so on the wall clock of the session's
// TimeZone and converts back; date ± integer is a date; date ± interval a
// timestamp. Under a named TimeZone other than UTC, a result within 3
// hours of a zone transition is refused (the wall clock is not monotonic
// there, as in datefold.go); under a numeric-offset TimeZone, which
// dpproxy does not reproduce, clock reads and zone conversions are
// refused.

// clockWords are the constants read from the clock; fn: written with ().
var clockWords = map[string]struct {
	typ policy.Type
	fn  bool
}{
	"now": {typTimestampTZ, true}, "transaction_timestamp": {typTimestampTZ, true}, "statement_timestamp": {typTimestampTZ, true},
	"current_timestamp": {typTimestampTZ, false}, "localtimestamp": {typTimestamp, false}, "current_date": {policy.TypeDate, false},
}

const relDateHint = "write now(), current_date, current_timestamp or a date/timestamp literal, plus or minus interval '…' constants (or, for a date, an integer of days), e.g. visit_date >= current_date - interval '2 years'"

// clockEnv is what relative dates are folded in.
type clockEnv struct {
	now time.Time      // the statement's start; zero: no clock (tests of normalize)
	loc *time.Location // the session's zone; nil when not reproducible
	tz  string         // the session's TimeZone setting, for errors
}

func clockOf(opts Options) clockEnv {
	e := clockEnv{now: opts.Now, loc: opts.Location, tz: opts.TimeZone}
	if e.loc == nil && UTCZone(opts.TimeZone) {
		e.loc = time.UTC
	}
	return e
}

// relValue is a folded constant: a date or timestamp holds its wall clock
// (in UTC), a timestamptz its instant.
type relValue struct {
	typ policy.Type
	t   time.Time
}

// relFolder parses one relative-date expression of the token stream.
type relFolder struct {
	src   string
	toks  []pgsql.Token
	match []int
	env   clockEnv
	// changed: the expression read the clock or computed something, so
	// it is replaced by its value.
	changed bool
}

// foldClock replaces every relative-date expression of toks by a literal
// of its value ('…'::date, '…'::timestamp or '…'::timestamptz).
func foldClock(src string, toks []pgsql.Token, env clockEnv) ([]pgsql.Token, error) {
	match := matchParens(toks)
	if match == nil {
		return toks, nil // unbalanced: the normalizer reports it
	}
	var out []pgsql.Token
	for i := 0; i < len(toks); i++ {
		if !relStart(toks, i) {
			out = append(out, toks[i])
			continue
		}
		f := &relFolder{src: src, toks: toks, match: match, env: env}
		var v relValue
		var end int
		var ok bool
		var err error
		if i > 0 && toks[i-1].Kind == pgsql.TokOp && !cmpOp(toks[i-1].Val) || i > 0 && toks[i-1].IsPunct("::") {
			// The right operand of an operator that binds at least as
			// tightly as + and -: only the primary is folded.
			v, end, ok, err = f.primary(i)
		} else {
			v, end, ok, err = f.sum(i)
		}
		if err != nil {
			return nil, err
		}
		if !ok || !f.changed {
			out = append(out, toks[i])
			continue
		}
		if out == nil {
			out = append(make([]pgsql.Token, 0, len(toks)), toks[:i]...)
		}
		out = append(out, relTokens(v, toks[i].Pos, toks[end-1].End)...)
		i = end - 1
	}
	if out == nil {
		return toks, nil
	}
	return out, nil
}

func cmpOp(op string) bool {
	switch op {
	case "=", "<>", "!=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

// relStart reports whether a relative-date expression may start at toks[i].
func relStart(toks []pgsql.Token, i int) bool {
	t := toks[i]
	switch {
	case t.Kind == pgsql.TokIdent && !t.Quoted:
		if i > 0 && toks[i-1].IsPunct(".") {
			return false // a qualified name
		}
		if _, ok := clockWords[t.Val]; ok {
			return true
		}
		switch t.Val {
		case "cast", "date_trunc", "date", "timestamp", "timestamptz":
			return true
		}
	case t.Kind == pgsql.TokString:
		return true
	case t.IsPunct("("):
		if i == 0 {
			return false
		}
		p := toks[i-1]
		if p.Kind == pgsql.TokIdent {
			// A call's or IN's parentheses are not an expression's.
			switch {
			case p.Quoted:
				return false
			case p.Val == "and" || p.Val == "or" || p.Val == "not" || p.Val == "where" || p.Val == "when" || p.Val == "then" ||
				p.Val == "else" || p.Val == "between" || p.Val == "having" || p.Val == "select" || p.Val == "on":
				return true
			}
			return false
		}
		return true
	}
	return false
}

func (f *relFolder) err(k int, format string, args ...any) *pgerr.Error {
	return pgerr.New(pgerr.FeatureNotSupported, format, args...).WithPosition(pgsql.CharPos(f.src, posAt(f.src, f.toks, k))).WithHint("%s", relDateHint)
}

func (f *relFolder) tok(k int) pgsql.Token {
	if k < len(f.toks) {
		return f.toks[k]
	}
	return pgsql.Token{Kind: pgsql.TokPunct, Pos: len(f.src), End: len(f.src)}
}

// sum reads primary { (+|-) term } at k.
func (f *relFolder) sum(k int) (relValue, int, bool, error) {
	v, k, ok, err := f.primary(k)
	if !ok || err != nil {
		return v, k, ok, err
	}
	for {
		op := f.tok(k)
		if !op.IsOp("+") && !op.IsOp("-") {
			return v, k, true, nil
		}
		neg := op.Val == "-"
		t := f.tok(k + 1)
		switch {
		case t.Is("interval") || t.Kind == pgsql.TokString && f.tok(k+2).IsPunct("::") && f.tok(k+3).Is("interval"):
			iv, end, err := f.interval(k + 1)
			if err != nil {
				return v, k, true, err
			}
			if err := f.afterTerm(end); err != nil {
				return v, k, true, err
			}
			if neg {
				iv = iv.neg()
			}
			if v, err = f.addInterval(k, v, iv); err != nil {
				return v, k, true, err
			}
			k = end
		case t.Kind == pgsql.TokNumber && v.typ == policy.TypeDate:
			n, err := strconv.ParseInt(t.Val, 10, 32)
			if err != nil {
				return v, k, true, f.err(k+1, "a date plus or minus %s is not supported", t.Val)
			}
			if err := f.afterTerm(k + 2); err != nil {
				return v, k, true, err
			}
			if neg {
				n = -n
			}
			v.t = v.t.AddDate(0, 0, int(n))
			k += 2
		default:
			if f.changed {
				return v, k, true, f.err(k, "a relative date plus or minus this expression is not supported")
			}
			return v, k, true, nil // e.g. a literal minus a column: not ours
		}
		f.changed = true
		if err := f.inRange(k, v); err != nil {
			return v, k, true, err
		}
	}
}

// afterTerm refuses an operator after a term that binds more tightly than
// + and - (the term would be its operand).
func (f *relFolder) afterTerm(k int) error {
	t := f.tok(k)
	if t.Kind == pgsql.TokOp && !cmpOp(t.Val) && !t.IsOp("+") && !t.IsOp("-") || t.IsPunct("::") || t.IsPunct("[") || t.Is("at") || t.Is("collate") {
		return f.err(k, "only + and - of constant intervals or integers are folded in a relative date")
	}
	return nil
}

// primary reads a clock word, a typed literal, CAST(… AS type),
// date_trunc('unit', …) or ( sum ), with :: casts after it.
func (f *relFolder) primary(k int) (relValue, int, bool, error) {
	t := f.tok(k)
	var v relValue
	switch {
	case t.Kind == pgsql.TokIdent && !t.Quoted && clockWords[t.Val].typ != "":
		cw := clockWords[t.Val]
		end := k + 1
		if cw.fn {
			if !f.tok(k+1).IsPunct("(") || !f.tok(k+2).IsPunct(")") {
				return v, k, false, nil
			}
			end = k + 3
		} else if f.tok(k + 1).IsPunct("(") {
			return v, k, true, f.err(k+1, "%s with a precision is not supported", t.Val)
		}
		if f.env.now.IsZero() {
			return v, k, true, f.err(k, "%s is not available here", t.Val)
		}
		if f.env.loc == nil {
			return v, k, true, pgerr.New(pgerr.FeatureNotSupported, "cannot fold %s under TimeZone %q", t.Val, f.env.tz).
				WithPosition(pgsql.CharPos(f.src, t.Pos)).
				WithHint("SET TIME ZONE 'UTC' (or a named zone such as 'Europe/Paris'), or write a date literal")
		}
		now := f.env.now.Truncate(time.Microsecond).UTC()
		switch cw.typ {
		case typTimestampTZ:
			v = relValue{typTimestampTZ, now}
		case typTimestamp:
			v = relValue{typTimestamp, wallUTC(now.In(f.env.loc))}
		default:
			v = relValue{policy.TypeDate, dayOf(wallUTC(now.In(f.env.loc)))}
		}
		f.changed = true
		k = end
	case t.Kind == pgsql.TokString && f.tok(k+1).IsPunct("::"):
		typ, end, ok := relType(f.toks, k+2)
		if !ok {
			return v, k, false, nil
		}
		lv, err := f.literal(k, t.Val, typ)
		if err != nil {
			return v, k, true, err
		}
		v, k = lv, end
	case t.Kind == pgsql.TokIdent && !t.Quoted && (t.Val == "date" || t.Val == "timestamp" || t.Val == "timestamptz"):
		typ, end, ok := relType(f.toks, k)
		if !ok || f.tok(end).Kind != pgsql.TokString {
			return v, k, false, nil
		}
		lv, err := f.literal(end, f.tok(end).Val, typ)
		if err != nil {
			return v, k, true, err
		}
		v, k = lv, end+1
	case t.Is("cast") && f.tok(k+1).IsPunct("("):
		close := f.match[k+1]
		var end int
		var err error
		var ok bool
		if s := f.tok(k + 2); s.Kind == pgsql.TokString && f.tok(k+3).Is("as") {
			typ, e, tok := relType(f.toks, k+4)
			if !tok || e != close {
				return v, k, false, nil
			}
			if v, err = f.literal(k+2, s.Val, typ); err != nil {
				return v, k, true, err
			}
			end = e
		} else {
			if v, end, ok, err = f.sum(k + 2); !ok || err != nil {
				return v, k, ok, err
			}
			if !f.tok(end).Is("as") {
				return v, k, false, nil
			}
			typ, e, tok := relType(f.toks, end+1)
			if !tok || e != close {
				return v, k, false, nil
			}
			if v, err = f.cast(end+1, v, typ); err != nil {
				return v, k, true, err
			}
			end = e
		}
		k = end + 1
	case t.Is("date_trunc") && f.tok(k+1).IsPunct("(") && f.tok(k+2).Kind == pgsql.TokString && f.tok(k+3).IsPunct(","):
		close := f.match[k+1]
		a, end, ok, err := f.sum(k + 4)
		if !ok || err != nil || end != close {
			return v, k, ok && end == close, err
		}
		if v, err = f.trunc(k+2, strings.ToLower(f.tok(k+2).Val), a); err != nil {
			return v, k, true, err
		}
		f.changed = true
		k = close + 1
	case t.IsPunct("("):
		close := f.match[k]
		a, end, ok, err := f.sum(k + 1)
		if !ok || err != nil || end != close {
			return v, k, ok && end == close, err
		}
		v, k = a, close+1
	default:
		return v, k, false, nil
	}
	// Casts after the primary.
	for f.tok(k).IsPunct("::") {
		typ, end, ok := relType(f.toks, k+1)
		if !ok {
			if f.changed {
				return v, k, true, f.err(k+1, "a relative date cast to this type is not supported")
			}
			return v, k, false, nil
		}
		var err error
		if v, err = f.cast(k+1, v, typ); err != nil {
			return v, k, true, err
		}
		k = end
	}
	if f.tok(k).Is("at") && f.tok(k+1).Is("time") && f.changed {
		return v, k, true, f.err(k, "AT TIME ZONE of a relative date is not supported")
	}
	return v, k, true, nil
}

// relType reads date, timestamp [with[out] time zone] or timestamptz at k.
func relType(toks []pgsql.Token, k int) (policy.Type, int, bool) {
	if k >= len(toks) {
		return "", k, false
	}
	switch {
	case toks[k].Is("date"):
		return policy.TypeDate, k + 1, true
	case toks[k].Is("timestamptz"):
		return typTimestampTZ, k + 1, true
	case toks[k].Is("timestamp"):
		typ, end := timestampZone(toks, k+1, typTimestamp)
		return typ, end, true
	}
	return "", k, false
}

// literal reads the text of a typed date or timestamp literal.
func (f *relFolder) literal(k int, text string, typ policy.Type) (relValue, error) {
	ts, ok := parseTimestampText(text)
	if !ok {
		return relValue{}, pgerr.New("22007", "unsupported %s text %q", typ, text).
			WithPosition(pgsql.CharPos(f.src, f.tok(k).Pos)).
			WithHint("write dates as 'YYYY-MM-DD' and timestamps as 'YYYY-MM-DD HH:MM:SS[.ffffff][Z|±hh[:mm]]'")
	}
	switch typ {
	case policy.TypeDate:
		return relValue{typ, dayOf(ts.wall)}, nil
	case typTimestamp:
		return relValue{typ, ts.wall}, nil // a zone is ignored, as timestamp_in does
	}
	if ts.hasZone {
		return relValue{typ, ts.wall.Add(-time.Duration(ts.offset) * time.Second)}, nil
	}
	inst, err := f.instant(k, ts.wall)
	return relValue{typ, inst}, err
}

// instant is the wall clock w of the session's zone as an instant.
func (f *relFolder) instant(k int, w time.Time) (time.Time, error) {
	if f.env.loc == nil {
		return time.Time{}, pgerr.New(pgerr.FeatureNotSupported, "cannot convert to timestamptz exactly under TimeZone %q", f.env.tz).
			WithPosition(pgsql.CharPos(f.src, posAt(f.src, f.toks, k))).
			WithHint("SET TIME ZONE 'UTC' (or a named zone such as 'Europe/Paris'), or use dates and timestamps without time zone")
	}
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), f.env.loc)
	if f.env.loc != time.UTC && nearTransition(t) {
		return time.Time{}, f.transition(k)
	}
	return t.UTC(), nil
}

// wall is the session's wall clock of an instant.
func (f *relFolder) wall(k int, t time.Time) (time.Time, error) {
	if f.env.loc == nil {
		return time.Time{}, pgerr.New(pgerr.FeatureNotSupported, "cannot convert a timestamptz exactly under TimeZone %q", f.env.tz).
			WithPosition(pgsql.CharPos(f.src, posAt(f.src, f.toks, k))).
			WithHint("SET TIME ZONE 'UTC' (or a named zone such as 'Europe/Paris'), or use dates and timestamps without time zone")
	}
	return wallUTC(t.In(f.env.loc)), nil
}

func (f *relFolder) transition(k int) error {
	return pgerr.New(pgerr.FeatureNotSupported, "this relative date is within %v of a time zone transition of %s", transitionMargin, f.env.loc).
		WithPosition(pgsql.CharPos(f.src, posAt(f.src, f.toks, k))).
		WithHint("use dates, or timestamps without time zone (localtimestamp)")
}

func wallUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// cast converts v to typ as PostgreSQL's casts do.
func (f *relFolder) cast(k int, v relValue, typ policy.Type) (relValue, error) {
	if v.typ == typ {
		return v, nil
	}
	f.changed = true
	var err error
	switch {
	case v.typ == typTimestampTZ: // to the session's wall clock
		if v.t, err = f.wall(k, v.t); err != nil {
			return v, err
		}
	case typ == typTimestampTZ: // from the session's wall clock
		if v.t, err = f.instant(k, v.t); err != nil {
			return v, err
		}
	}
	if typ == policy.TypeDate {
		v.t = dayOf(v.t)
	}
	v.typ = typ
	return v, nil
}

// relInterval is an interval constant: months, days and microseconds, as
// PostgreSQL keeps them.
type relInterval struct {
	months, days int64
	micros       int64
}

func (iv relInterval) neg() relInterval {
	return relInterval{-iv.months, -iv.days, -iv.micros}
}

// intervalUnits maps PostgreSQL's interval unit words to months, days or
// microseconds per unit.
var intervalUnits = map[string]relInterval{
	"millennium": {months: 12000}, "millennia": {months: 12000}, "millenniums": {months: 12000},
	"century": {months: 1200}, "centuries": {months: 1200},
	"decade": {months: 120}, "decades": {months: 120},
	"year": {months: 12}, "years": {months: 12}, "y": {months: 12}, "yr": {months: 12}, "yrs": {months: 12},
	"month": {months: 1}, "months": {months: 1}, "mon": {months: 1}, "mons": {months: 1},
	"week": {days: 7}, "weeks": {days: 7}, "w": {days: 7},
	"day": {days: 1}, "days": {days: 1}, "d": {days: 1},
	"hour": {micros: 3600e6}, "hours": {micros: 3600e6}, "h": {micros: 3600e6}, "hr": {micros: 3600e6}, "hrs": {micros: 3600e6},
	"minute": {micros: 60e6}, "minutes": {micros: 60e6}, "min": {micros: 60e6}, "mins": {micros: 60e6}, "m": {micros: 60e6},
	"second": {micros: 1e6}, "seconds": {micros: 1e6}, "sec": {micros: 1e6}, "secs": {micros: 1e6}, "s": {micros: 1e6},
}

var intervalPartRE = regexp.MustCompile(`^([+-]?[0-9]{1,9})\s*([a-z]+)$`)

// interval reads interval '…' [unit] or '…'::interval at k.
func (f *relFolder) interval(k int) (relInterval, int, error) {
	var text string
	var end int
	if f.tok(k).Is("interval") {
		s := f.tok(k + 1)
		if s.Kind != pgsql.TokString {
			return relInterval{}, k, f.err(k, "this interval is not supported")
		}
		text, end = s.Val, k+2
		if u := f.tok(end); u.Kind == pgsql.TokIdent && !u.Quoted && intervalUnits[u.Val] != (relInterval{}) && !strings.Contains(strings.TrimSpace(text), " ") {
			// interval '2' year
			text += " " + u.Val
			end++
		}
	} else {
		text, end = f.tok(k).Val, k+3
	}
	iv, ok := parseInterval(text)
	if !ok {
		return relInterval{}, k, pgerr.New(pgerr.FeatureNotSupported, "interval %q is not supported in a relative date", text).
			WithPosition(pgsql.CharPos(f.src, f.tok(k).Pos)).
			WithHint("write integer quantities of years, months, weeks, days, hours, minutes or seconds, e.g. interval '2 years 3 months' or interval '-30 days'")
	}
	return iv, end, nil
}

// parseInterval reads "N unit [N unit …] [ago]" with integer N.
func parseInterval(text string) (relInterval, bool) {
	fields := strings.Fields(strings.ToLower(text))
	ago := len(fields) > 0 && fields[len(fields)-1] == "ago"
	if ago {
		fields = fields[:len(fields)-1]
	}
	if len(fields) > 0 && fields[0] == "@" {
		fields = fields[1:]
	}
	var iv relInterval
	if len(fields) == 0 {
		return iv, false
	}
	for i := 0; i < len(fields); i++ {
		part := fields[i]
		if i+1 < len(fields) && !intervalPartRE.MatchString(part) {
			part += fields[i+1]
			i++
		}
		m := intervalPartRE.FindStringSubmatch(part)
		if m == nil {
			return iv, false
		}
		u, ok := intervalUnits[m[2]]
		if !ok {
			return iv, false
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		iv.months += n * u.months
		iv.days += n * u.days
		iv.micros += n * u.micros
	}
	if ago {
		iv = iv.neg()
	}
	const lim = 1 << 40
	if iv.months > lim || iv.months < -lim || iv.days > lim || iv.days < -lim {
		return iv, false
	}
	return iv, true
}

// addInterval is v + iv.
func (f *relFolder) addInterval(k int, v relValue, iv relInterval) (relValue, error) {
	if v.typ == policy.TypeDate {
		v.typ = typTimestamp // date + interval is a timestamp
	}
	var err error
	w := v.t
	if v.typ == typTimestampTZ {
		if iv.months == 0 && iv.days == 0 {
			v.t = v.t.Add(time.Duration(iv.micros) * time.Microsecond)
			return v, nil
		}
		if w, err = f.wall(k, v.t); err != nil {
			return v, err
		}
	}
	if iv.months != 0 {
		y, m := int64(w.Year()), int64(w.Month())-1+iv.months
		y += floorDiv64(m, 12)
		m -= floorDiv64(m, 12) * 12
		if y < 1 || y > 9999 {
			return v, f.err(k, "this relative date is out of range")
		}
		last := time.Date(int(y), time.Month(m+2), 0, 0, 0, 0, 0, time.UTC).Day()
		w = time.Date(int(y), time.Month(m+1), min(w.Day(), last), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
	}
	w = w.AddDate(0, 0, int(iv.days))
	if v.typ == typTimestampTZ {
		if w, err = f.instant(k, w); err != nil {
			return v, err
		}
	}
	v.t = w.Add(time.Duration(iv.micros) * time.Microsecond)
	return v, nil
}

func floorDiv64(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// relTruncUnits are the date_trunc units folded.
var relTruncUnits = map[string]bool{"year": true, "quarter": true, "month": true, "week": true, "day": true, "hour": true, "minute": true, "second": true}

// trunc is date_trunc(unit, v): timestamp for a timestamp, timestamptz
// (truncated on the session's wall clock) for a date or a timestamptz.
func (f *relFolder) trunc(k int, unit string, v relValue) (relValue, error) {
	if !relTruncUnits[unit] {
		return v, f.err(k, "date_trunc unit %q is not supported in a relative date", unit)
	}
	var err error
	if v.typ == policy.TypeDate {
		// date_trunc(text, date) is date_trunc(text, timestamptz).
		if v, err = f.cast(k, v, typTimestampTZ); err != nil {
			return v, err
		}
	}
	tz := v.typ == typTimestampTZ
	if v, err = f.cast(k, v, typTimestamp); err != nil {
		return v, err
	}
	w := v.t
	switch unit {
	case "year":
		w = time.Date(w.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	case "quarter":
		w = time.Date(w.Year(), (w.Month()-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC)
	case "month":
		w = time.Date(w.Year(), w.Month(), 1, 0, 0, 0, 0, time.UTC)
	case "week":
		w = dayOf(w).AddDate(0, 0, -((int(w.Weekday()) + 6) % 7))
	case "day":
		w = dayOf(w)
	case "hour":
		w = w.Truncate(time.Hour)
	case "minute":
		w = w.Truncate(time.Minute)
	case "second":
		w = w.Truncate(time.Second)
	}
	v.t = w
	if tz {
		return f.cast(k, v, typTimestampTZ)
	}
	return v, nil
}

func (f *relFolder) inRange(k int, v relValue) error {
	if y := v.t.Year(); y < 1 || y > 9999 {
		return f.err(k, "this relative date is out of range")
	}
	return nil
}

// relTokens are the tokens of v's literal, at the span [pos, end).
func relTokens(v relValue, pos, end int) []pgsql.Token {
	var text, typ string
	switch v.typ {
	case policy.TypeDate:
		text, typ = v.t.Format("2006-01-02"), "date"
	case typTimestamp:
		text, typ = v.t.Format("2006-01-02 15:04:05.999999"), "timestamp"
	default:
		text, typ = v.t.UTC().Format("2006-01-02 15:04:05.999999")+"+00", "timestamptz"
	}
	return []pgsql.Token{
		{Kind: pgsql.TokString, Val: text, Pos: pos, End: end},
		{Kind: pgsql.TokPunct, Val: "::", Pos: pos, End: end},
		{Kind: pgsql.TokIdent, Val: typ, Pos: pos, End: end},
	}
}

// UsesClock reports whether a statement's plan depends on the clock
// (a relative date): such plans must not be reused for a later statement.
// A statement that does not lex is reported as using it.
func UsesClock(stmt string) bool {
	toks, err := pgsql.Lex(stmt)
	if err != nil {
		return true
	}
	for _, t := range toks {
		if t.Kind == pgsql.TokIdent && !t.Quoted && clockWords[t.Val].typ != "" {
			return true
		}
	}
	return false
}
