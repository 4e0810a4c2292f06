package proxy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pipeline"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Type OIDs of the values the proxy builds itself (pg_type.dat).
const (
	oidBool    uint32 = 16
	oidInt8    uint32 = 20
	oidInt2    uint32 = 21
	oidInt4    uint32 = 23
	oidText    uint32 = 25
	oidFloat4  uint32 = 700
	oidFloat8  uint32 = 701
	oidUnknown uint32 = 705
	oidVarchar uint32 = 1043
	oidDate    uint32 = 1082
	// timestamp and timestamptz: bound parameters (bind.go) and
	// date_trunc keys (rewrite/attz.go).
	oidTimestamp   uint32 = 1114
	oidTimestamptz uint32 = 1184
	oidNumeric     uint32 = 1700
)

// Wire formats.
const (
	formatText   int16 = 0
	formatBinary int16 = 1
)

// oidOf maps release/rewrite type names to type OIDs.
func oidOf(pgType string) uint32 {
	switch pipeline.CanonicalType(pgType) {
	case "int8":
		return oidInt8
	case "int4":
		return oidInt4
	case "int2":
		return oidInt2
	case "numeric":
		return oidNumeric
	case "bool":
		return oidBool
	case "date":
		return oidDate
	case "float8":
		return oidFloat8
	case "float4":
		return oidFloat4
	case "timestamp":
		return oidTimestamp
	case "timestamptz":
		return oidTimestamptz
	}
	return oidText
}

// typeSize is pg_type.typlen for RowDescription.
func typeSize(oid uint32) int16 {
	switch oid {
	case oidBool:
		return 1
	case oidInt2:
		return 2
	case oidInt4, oidDate, oidFloat4, oidVoid:
		return 4
	case oidInt8, oidFloat8, oidTimestamp, oidTimestamptz:
		return 8
	}
	return -1
}

// formatFor returns the format of column i from a Bind's result format
// codes: none means all text, one applies to all columns, else one each.
func formatFor(formats []int16, i int) int16 {
	switch len(formats) {
	case 0:
		return formatText
	case 1:
		return formats[0]
	}
	if i < len(formats) {
		return formats[i]
	}
	return formatText
}

func rowDescription(cols []column, formats []int16) *pgproto3.RowDescription {
	fields := make([]pgproto3.FieldDescription, len(cols))
	for i, col := range cols {
		fields[i] = pgproto3.FieldDescription{
			Name:         []byte(col.name),
			DataTypeOID:  col.oid,
			DataTypeSize: typeSize(col.oid),
			TypeModifier: -1,
			Format:       formatFor(formats, i),
		}
	}
	return &pgproto3.RowDescription{Fields: fields}
}

// encodeRow encodes text values in the requested formats.
func encodeRow(cols []column, row []*string, formats []int16) ([][]byte, error) {
	out := make([][]byte, len(cols))
	for i, col := range cols {
		if i >= len(row) || row[i] == nil {
			continue // NULL
		}
		v := *row[i]
		if formatFor(formats, i) == formatText {
			out[i] = []byte(v)
			continue
		}
		b, err := encodeBinary(col.oid, v)
		if err != nil {
			// The value stays out of the message and the logs.
			return nil, pgerr.New(pgerr.FeatureNotSupported, "a value of column %q has no binary form of its type (oid %d)", col.name, col.oid).
				WithHint("read the column in text format; a DP answer just released is cached, so asking again costs nothing")
		}
		out[i] = b
	}
	return out, nil
}

// encodeBinary encodes one text value in PostgreSQL's binary format of the
// type (the send functions of int8, int4, int2, bool, date, float8, float4,
// numeric, text).
func encodeBinary(oid uint32, v string) ([]byte, error) {
	switch oid {
	case oidInt8:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
	case oidInt4:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint32(nil, uint32(int32(n))), nil
	case oidBool:
		switch strings.ToLower(v) {
		case "t", "true", "on", "yes", "1":
			return []byte{1}, nil
		case "f", "false", "off", "no", "0":
			return []byte{0}, nil
		}
		return nil, fmt.Errorf("invalid boolean %q", v)
	case oidDate:
		switch v {
		case "infinity":
			return binary.BigEndian.AppendUint32(nil, math.MaxInt32), nil
		case "-infinity":
			return binary.BigEndian.AppendUint32(nil, 1<<31), nil
		}
		d, err := parseISO(v, "2006-01-02")
		if err != nil {
			return nil, err
		}
		// Days since 2000-01-01 (PostgreSQL's epoch).
		return binary.BigEndian.AppendUint32(nil, uint32(int32((d.Unix()-pgEpoch)/86400))), nil
	case oidInt2:
		n, err := strconv.ParseInt(v, 10, 16)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint16(nil, uint16(int16(n))), nil
	case oidFloat8:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)), nil
	case oidFloat4:
		f, err := strconv.ParseFloat(v, 32)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(f))), nil
	case oidNumeric:
		return encodeNumeric(v)
	case oidTimestamp, oidTimestamptz:
		// Microseconds since 2000-01-01 00:00 (UTC for timestamptz),
		// from the ISO text PostgreSQL writes ("2024-01-01 00:00:00",
		// "+01", "+05:30", and "+00:09:21" for a local mean time).
		switch v {
		case "infinity":
			return binary.BigEndian.AppendUint64(nil, math.MaxInt64), nil
		case "-infinity":
			return binary.BigEndian.AppendUint64(nil, 1<<63), nil
		}
		layout := "2006-01-02 15:04:05.999999"
		if oid == oidTimestamptz {
			layout += "Z07"
			w := strings.TrimSuffix(v, " BC")
			if len(w) > 3 && w[len(w)-3] == ':' {
				layout += ":00"
				if len(w) > 6 && w[len(w)-6] == ':' {
					layout += ":00"
				}
			}
		}
		t, err := parseISO(v, layout)
		if err != nil {
			return nil, err
		}
		us := (t.Unix()-pgEpoch)*1_000_000 + int64(t.Nanosecond()/1000)
		return binary.BigEndian.AppendUint64(nil, uint64(us)), nil
	}
	return []byte(v), nil
}

// pgEpoch is PostgreSQL's epoch, 2000-01-01 00:00 UTC, in Unix seconds.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// parseISO parses a date or timestamp as PostgreSQL writes it in the ISO
// style: layout's, with a year of four or more digits and " BC" after a
// year before 1 (year y BC is the proleptic year 1 − y). Differences are
// taken in Unix seconds by the caller: time.Duration spans ±292 years.
func parseISO(v, layout string) (time.Time, error) {
	w, bc := strings.CutSuffix(v, " BC")
	year, rest, ok := strings.Cut(w, "-")
	y, err := strconv.Atoi(year)
	if !ok || err != nil || len(year) < 4 || y < 1 {
		return time.Time{}, fmt.Errorf("invalid date %q", v)
	}
	t, err := time.Parse(layout, "2000-"+rest) // a leap year: Feb 29 parses
	if err != nil {
		return time.Time{}, err
	}
	if bc {
		y = 1 - y
	}
	// The parsed offset, not its location: time.Parse names time.Local
	// when Local had that offset in 2000, and Local's rules in year y
	// may differ (review 74: an hour off under America/New_York).
	_, off := t.Zone()
	return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.FixedZone("", off)), nil
}

// Numeric sign words of the binary format (PostgreSQL's numeric.c).
const (
	numericPos = 0x0000
	numericNeg = 0x4000
	numericNaN = 0xC000
)

// encodeNumeric encodes a decimal text ("-12.3400", "1e-3", "NaN") in
// numeric's binary format: int16 ndigits, int16 weight, uint16 sign,
// int16 dscale, then ndigits base-10000 digits, the first of which has
// weight `weight` (value = Σ digit·10000^(weight−k)).
func encodeNumeric(v string) ([]byte, error) {
	s := strings.TrimSpace(v)
	switch {
	case strings.EqualFold(s, "nan"):
		return []byte{0, 0, 0, 0, 0xC0, 0, 0, 0}, nil
	case strings.EqualFold(s, "infinity"):
		return []byte{0, 0, 0, 0, 0xD0, 0, 0, 0}, nil
	case strings.EqualFold(s, "-infinity"):
		return []byte{0, 0, 0, 0, 0xF0, 0, 0, 0}, nil
	}
	sign := uint16(numericPos)
	switch {
	case strings.HasPrefix(s, "-"):
		sign, s = numericNeg, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return nil, fmt.Errorf("invalid numeric %q", v)
		}
		exp, s = e, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return nil, fmt.Errorf("invalid numeric %q", v)
	}
	for _, r := range intPart + frac {
		if r < '0' || r > '9' {
			return nil, fmt.Errorf("invalid numeric %q", v)
		}
	}
	// Shift the decimal point by the exponent.
	digits := intPart + frac
	point := len(intPart) + exp // position of the decimal point in digits
	dscale := len(frac) - exp
	if dscale < 0 {
		dscale = 0
	}
	for point < 0 {
		digits = "0" + digits
		point++
	}
	for point > len(digits) {
		digits += "0"
	}
	ip, fp := digits[:point], digits[point:]
	// Pad to whole groups of four digits around the decimal point.
	if r := len(ip) % 4; r != 0 {
		ip = strings.Repeat("0", 4-r) + ip
	}
	if r := len(fp) % 4; r != 0 {
		fp += strings.Repeat("0", 4-r)
	}
	all := ip + fp
	groups := make([]uint16, 0, len(all)/4)
	for i := 0; i < len(all); i += 4 {
		g, _ := strconv.Atoi(all[i : i+4])
		groups = append(groups, uint16(g))
	}
	weight := len(ip)/4 - 1
	// Strip leading and trailing zero groups.
	for len(groups) > 0 && groups[0] == 0 {
		groups = groups[1:]
		weight--
	}
	for len(groups) > 0 && groups[len(groups)-1] == 0 {
		groups = groups[:len(groups)-1]
	}
	if len(groups) == 0 {
		weight, sign = 0, numericPos
	}
	out := make([]byte, 0, 8+2*len(groups))
	out = binary.BigEndian.AppendUint16(out, uint16(len(groups)))
	out = binary.BigEndian.AppendUint16(out, uint16(int16(weight)))
	out = binary.BigEndian.AppendUint16(out, sign)
	out = binary.BigEndian.AppendUint16(out, uint16(int16(dscale)))
	for _, g := range groups {
		out = binary.BigEndian.AppendUint16(out, g)
	}
	return out, nil
}
