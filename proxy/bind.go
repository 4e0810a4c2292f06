package proxy

import (
	"encoding/binary"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Binding parameters of DP statements. The rewrite front end parses SQL
// text, so a DP statement's $n placeholders are replaced by SQL literals
// built here from the bound values (decoded by type and format, validated,
// quoted). The result is analyst input like any other statement text: it
// goes to rewrite, never upstream.

// maxParam returns the highest $n placeholder of a statement (0 if none,
// or if the text does not lex: it is then refused with the lexer's error
// when it is planned).
func maxParam(text string) int {
	toks, _ := pgsql.Lex(text) // the one lexer (pgsql/lex.go)
	max := 0
	for _, t := range toks {
		if t.Kind == pgsql.TokParam {
			if n, err := strconv.Atoi(t.Val); err == nil && n > max {
				max = n
			}
		}
	}
	return max
}

// bindLiterals replaces every $n of text by the literal of value n; the
// rest of the text is kept byte for byte. A literal written next to a
// string constant ('x'$1, or across a newline) lexes as one string with
// it, as adjacent constants do in PostgreSQL: a string, never structure. A text that does not lex is
// returned as it is: planning it reports the lexer's error, and no value
// enters it.
//
// The bound text's length is added up before any of it is built: a DP
// statement is at most rewrite.MaxStatementBytes (54000 beyond), and one
// value used in many places multiplies (issue 34's attack: 20,000 uses of
// an 8 KB value made 805 MB before the length check refused it).
func bindLiterals(text string, lits []string) (string, error) {
	return bindWith(text, len(lits), func(i int) (string, error) { return lits[i], nil })
}

// bindWith is bindLiterals with the literal of value i (0-based, of n)
// given by lit, called only for the values text uses, in the order it
// uses them, and the length added up after each: a caller that decodes
// values in lit holds at most rewrite.MaxStatementBytes of literals and
// one more (attack round 72: every declared value had been decoded
// first, 65,535 binary numerics of 10 bytes each into 5 KB literals,
// 330 MB for a statement that used one).
func bindWith(text string, n int, lit func(i int) (string, error)) (string, error) {
	if boundFloor(text) > rewrite.MaxStatementBytes {
		// Too long whatever the values: refused before lexing it (attack
		// round 93: a stored 1 MiB text was lexed again at each Execute).
		return "", errBoundTooLong()
	}
	toks, err := pgsql.Lex(text)
	if err != nil {
		return text, nil
	}
	size := len(text)
	lits := make(map[int]string)
	for _, t := range toks {
		if t.Kind != pgsql.TokParam {
			continue
		}
		k, err := strconv.Atoi(t.Val)
		if err != nil || k < 1 || k > n {
			return "", pgerr.New(undefinedParameter, "there is no parameter $%s", t.Val).WithPosition(utf8.RuneCountInString(text[:t.Pos]) + 1)
		}
		l, ok := lits[k-1]
		if !ok {
			if l, err = lit(k - 1); err != nil {
				return "", err
			}
			lits[k-1] = l
		}
		if size += len(l) - (t.End - t.Pos); size > rewrite.MaxStatementBytes {
			return "", errBoundTooLong()
		}
	}
	var b strings.Builder
	b.Grow(size)
	last := 0
	for _, t := range toks {
		if t.Kind != pgsql.TokParam {
			continue
		}
		k, _ := strconv.Atoi(t.Val)
		b.WriteString(text[last:t.Pos])
		b.WriteString(lits[k-1])
		last = t.End
	}
	b.WriteString(text[last:])
	return b.String(), nil
}

func errBoundTooLong() error {
	return pgerr.New(pgerr.ProgramLimitExceeded, "DP statement too long once its parameters are bound: over %d bytes", rewrite.MaxStatementBytes).
		WithHint("bind shorter values, or use each parameter in fewer places")
}

// boundFloor is a lower bound on the length of text once its parameters
// are bound, found without lexing it: each $n ('$' and digits) becomes a
// literal of at least one byte, and the rest is kept.
func boundFloor(text string) int {
	n := len(text)
	for i := strings.IndexByte(text, '$'); i >= 0; {
		j := i + 1
		for j < len(text) && text[j] >= '0' && text[j] <= '9' {
			j++
		}
		n -= j - i - 1
		k := strings.IndexByte(text[j:], '$')
		if k < 0 {
			break
		}
		i = j + k
	}
	return n
}

// checkValue checks bound parameter i as literalOf would decode it, for a
// value the statement does not use (PostgreSQL's Bind checks every
// value): a binary numeric's format without writing out its digits.
func checkValue(params [][]byte, formats []int16, oids []uint32, i int) error {
	if i < len(oids) && oids[i] == oidNumeric && formatFor(formats, i) == formatBinary && params[i] != nil {
		if err := checkNumeric(params[i]); err != nil {
			return paramErr(i, err)
		}
		return nil
	}
	_, err := literalOf(params, formats, oids, i)
	return err
}

// literalOf decodes bound parameter i into a SQL literal.
func literalOf(params [][]byte, formats []int16, oids []uint32, i int) (string, error) {
	var oid uint32
	if i < len(oids) {
		oid = oids[i]
	}
	lit, err := literal(params[i], formatFor(formats, i), oid)
	if err != nil {
		return "", paramErr(i, err)
	}
	return lit, nil
}

// paramErr is the refusal of bound parameter i's value.
func paramErr(i int, err error) error {
	return pgerr.New(invalidTextRepresentation, "invalid value for parameter $%d: %s", i+1, err.Error()).
		WithHint("bind a value of the parameter's type")
}

const invalidTextRepresentation = "22P02"

// dateWithZone is a date followed by a time zone offset or name, as
// pgjdbc's setDate writes it.
var dateWithZone = regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2})\s*(?:[+-][0-9]{1,2}(?::?[0-9]{2}){0,2}|Z|UTC|GMT)$`)

var numericText = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

type literalError string

func (e literalError) Error() string { return string(e) }

func literal(v []byte, format int16, oid uint32) (string, error) {
	if v == nil {
		return "NULL", nil
	}
	if format != formatText && format != formatBinary {
		return "", literalError("unknown format code")
	}
	binaryFmt := format == formatBinary
	switch oid {
	case oidInt2, oidInt4, oidInt8:
		if binaryFmt {
			var n int64
			switch len(v) {
			case 2:
				n = int64(int16(binary.BigEndian.Uint16(v)))
			case 4:
				n = int64(int32(binary.BigEndian.Uint32(v)))
			case 8:
				n = int64(binary.BigEndian.Uint64(v))
			default:
				return "", literalError("bad binary integer length")
			}
			return numberLiteral(strconv.FormatInt(n, 10)), nil
		}
		s := strings.TrimSpace(string(v))
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return "", literalError("not an integer")
		}
		return numberLiteral(s), nil
	case oidFloat4, oidFloat8:
		var f float64
		if binaryFmt {
			switch len(v) {
			case 4:
				f = float64(math.Float32frombits(binary.BigEndian.Uint32(v)))
			case 8:
				f = math.Float64frombits(binary.BigEndian.Uint64(v))
			default:
				return "", literalError("bad binary float length")
			}
		} else {
			var err error
			if f, err = strconv.ParseFloat(strings.TrimSpace(string(v)), 64); err != nil {
				return "", literalError("not a number")
			}
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "", literalError("NaN and infinity are not supported")
		}
		return numberLiteral(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case oidNumeric:
		s := strings.TrimSpace(string(v))
		if binaryFmt {
			var err error
			if s, err = decodeNumeric(v); err != nil {
				return "", err
			}
		}
		if !numericText.MatchString(s) {
			return "", literalError("not a number")
		}
		return numberLiteral(s), nil
	case oidBool:
		if binaryFmt {
			if len(v) != 1 {
				return "", literalError("bad binary boolean")
			}
			if v[0] != 0 {
				return "TRUE", nil
			}
			return "FALSE", nil
		}
		b, err := checkBool(nil, string(v))
		if err != nil {
			return "", literalError("not a boolean")
		}
		if b == "on" {
			return "TRUE", nil
		}
		return "FALSE", nil
	case oidDate:
		var d time.Time
		if binaryFmt {
			if len(v) != 4 {
				return "", literalError("bad binary date")
			}
			days := int32(binary.BigEndian.Uint32(v))
			d = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(days))
		} else {
			var err error
			text := strings.TrimSpace(string(v))
			if m := dateWithZone.FindStringSubmatch(text); m != nil {
				// pgjdbc's setDate sends the date with the zone offset of
				// its calendar ("2023-01-01 +00"); PostgreSQL's date input
				// ignores the zone, and so does this.
				text = m[1]
			}
			if d, err = time.Parse("2006-01-02", text); err != nil {
				// A timestamp sent for a date parameter (pgx's time.Time
				// in exec mode): the date it names, its time of day and
				// zone ignored, as PostgreSQL's date input reads it.
				day, _, terr := rewrite.TimestampDate(text)
				if terr != nil {
					return "", literalError("not a date (YYYY-MM-DD)")
				}
				d = day
			}
		}
		return "'" + d.Format("2006-01-02") + "'", nil
	case oidTimestamp, oidTimestamptz:
		// Drivers bind dates as timestamps (JDBC setTimestamp and
		// LocalDateTime, pgx time.Time): bound as a literal of the
		// parameter's own type, so that rewrite compares it with a date
		// column as PostgreSQL does (the date promoted to midnight:
		// visit_date >= TIMESTAMP '2023-01-01 10:30' is visit_date >=
		// 2023-01-02; rewrite/datefold.go). An untyped literal would be
		// read as a date (2023-01-01), which is not what the driver asked.
		cast := "::timestamp"
		if oid == oidTimestamptz {
			cast = "::timestamptz"
		}
		if !binaryFmt {
			lit, err := stringLiteral(strings.TrimSpace(string(v)))
			if err != nil {
				return "", err
			}
			return lit + cast, nil
		}
		if len(v) != 8 {
			return "", literalError("bad binary timestamp")
		}
		us := int64(binary.BigEndian.Uint64(v))
		if us == math.MaxInt64 || us == math.MinInt64 {
			return "", literalError("infinite timestamps are not supported")
		}
		// Whole days first: a time.Duration holds only ±292 years.
		const usPerDay = 86_400_000_000
		days, rem := us/usPerDay, us%usPerDay
		if rem < 0 {
			days, rem = days-1, rem+usPerDay
		}
		t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(days)).Add(time.Duration(rem) * time.Microsecond)
		if oid == oidTimestamptz {
			// Binary timestamptz is an instant in UTC.
			return "'" + t.Format("2006-01-02 15:04:05.999999") + "+00'" + cast, nil
		}
		return "'" + t.Format("2006-01-02 15:04:05.999999") + "'" + cast, nil
	}
	// text, varchar, unknown and anything else: a string literal. A binary
	// value of those types is its bytes.
	if binaryFmt && oid != oidText && oid != oidVarchar && oid != 0 && oid != oidUnknown {
		return "", literalError("binary format is not supported for this parameter type")
	}
	return stringLiteral(string(v))
}

// numberLiteral parenthesises negative numbers so that "x-$1" cannot turn
// into a "--" comment.
func numberLiteral(s string) string {
	if strings.HasPrefix(s, "-") {
		return "(" + s + ")"
	}
	return strings.TrimPrefix(s, "+")
}

// stringLiteral quotes s as a standard-conforming string literal.
func stringLiteral(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", literalError("invalid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", literalError("NUL bytes are not allowed")
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
}

// checkNumeric checks numeric's binary format without writing out its
// digits: decodeNumeric's checks.
func checkNumeric(v []byte) error {
	if len(v) < 8 {
		return literalError("bad binary numeric")
	}
	ndigits := int(binary.BigEndian.Uint16(v[0:2]))
	weight := int(int16(binary.BigEndian.Uint16(v[2:4])))
	sign := binary.BigEndian.Uint16(v[4:6])
	dscale := int(int16(binary.BigEndian.Uint16(v[6:8])))
	if len(v) != 8+2*ndigits || dscale < 0 || dscale > 1000 || ndigits > 1000 || weight > 1000 || weight < -1000 {
		return literalError("bad binary numeric")
	}
	if sign == numericNaN || (sign != numericPos && sign != numericNeg) {
		return literalError("NaN and infinity are not supported")
	}
	for k := 0; k < ndigits; k++ {
		if binary.BigEndian.Uint16(v[8+2*k:]) > 9999 {
			return literalError("bad binary numeric digit")
		}
	}
	return nil
}

// decodeNumeric decodes numeric's binary format into decimal text (the
// inverse of encodeNumeric).
func decodeNumeric(v []byte) (string, error) {
	if err := checkNumeric(v); err != nil {
		return "", err
	}
	ndigits := int(binary.BigEndian.Uint16(v[0:2]))
	weight := int(int16(binary.BigEndian.Uint16(v[2:4])))
	sign := binary.BigEndian.Uint16(v[4:6])
	dscale := int(int16(binary.BigEndian.Uint16(v[6:8])))
	var ip, fp strings.Builder
	for k := 0; k < ndigits; k++ {
		d := binary.BigEndian.Uint16(v[8+2*k:])
		g := strconv.Itoa(int(d))
		g = strings.Repeat("0", 4-len(g)) + g
		if w := weight - k; w >= 0 {
			ip.WriteString(g)
		} else {
			if k == 0 {
				fp.WriteString(strings.Repeat("0000", -w-1))
			}
			fp.WriteString(g)
		}
	}
	if ndigits > 0 && weight >= ndigits {
		ip.WriteString(strings.Repeat("0000", weight-ndigits+1))
	}
	is := strings.TrimLeft(ip.String(), "0")
	if is == "" {
		is = "0"
	}
	fs := fp.String()
	if len(fs) > dscale {
		fs = fs[:dscale]
	} else {
		fs += strings.Repeat("0", dscale-len(fs))
	}
	out := is
	if fs != "" {
		out += "." + fs
	}
	if sign == numericNeg && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, nil
}
