package proxy

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// A DP answer in the types the client was told.
//
// A client that described a prepared statement (asyncpg, pgx, pgjdbc)
// decodes every Execute of it by the types that Describe gave, in the
// result formats it asked for at Bind. Describe of a statement whose
// plan depends on its parameters' values falls back to the shadow's
// types (describeStatement, dpTypeOf), which may differ from the
// answer's: regr_slope is float8 in the answer, numeric by dpTypeOf. So
// an Execute of a DP portal answers in the types last described for it
// (the portal's own Describe, else the statement's), converting each
// value's text to the described type. Where a value cannot be written in
// the described type (a fraction as an integer, a number as a date), it
// is refused before the charge with PostgreSQL's own error for a
// prepared statement whose result type changed.

// errResultTypeChanged is PostgreSQL's error (plancache.c) when the
// result of a prepared statement no longer has its described columns.
func errResultTypeChanged() *pgerr.Error {
	return pgerr.New(pgerr.FeatureNotSupported, "cached plan must not change result type").
		WithHint("the answer's columns differ from those Describe gave (they follow the bound values and settings such as dp.error_columns): prepare the statement again, or describe the portal after Bind and the SETs")
}

// describedFits reports whether an answer with columns got can be sent as
// columns told: the same number, and each value convertible (convertible).
func describedFits(told, got []column) bool {
	if len(told) != len(got) {
		return false
	}
	for i := range told {
		if !convertible(got[i].oid, told[i].oid) {
			return false
		}
	}
	return true
}

// numericOID reports whether oid is one of the number types a DP answer
// has.
func numericOID(oid uint32) bool {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidNumeric:
		return true
	}
	return false
}

func integerOID(oid uint32) bool { return oid == oidInt2 || oid == oidInt4 || oid == oidInt8 }

// convertible reports whether every value of type from can be written as
// type to, possibly up to the range of a narrower integer, which asDescribed
// checks per value. Text takes anything; numbers become numeric or a float
// (PostgreSQL's implicit casts); an integer type takes integer types only.
func convertible(from, to uint32) bool {
	switch {
	case from == to, to == oidText, to == oidVarchar:
		return true
	case integerOID(to):
		return integerOID(from)
	case to == oidNumeric, to == oidFloat8, to == oidFloat4:
		return numericOID(from)
	}
	return false
}

// asDescribed rewrites rs in the told columns' types (describedFits must
// hold): names and OIDs from told, each value's text as told's type
// reads it. The rows are copied before a cell is replaced: they may be
// the answer cache's (release/cache.go), which other sessions read.
func asDescribed(rs *resultSet, told []column) error {
	copied := false
	for i, col := range told {
		from := rs.cols[i].oid
		if from == col.oid {
			continue
		}
		if !copied {
			rows := make([][]*string, len(rs.rows))
			for r, row := range rs.rows {
				rows[r] = append([]*string(nil), row...)
			}
			rs.rows, copied = rows, true
		}
		for _, row := range rs.rows {
			if i >= len(row) || row[i] == nil {
				continue
			}
			v, err := convertText(from, col.oid, *row[i])
			if err != nil {
				return errResultTypeChanged()
			}
			row[i] = &v
		}
	}
	cols := make([]column, len(told))
	copy(cols, told)
	rs.cols = cols
	return nil
}

// convertText writes v, a value of type from in PostgreSQL's text form,
// in type to's text form.
func convertText(from, to uint32, v string) (string, error) {
	switch {
	case integerOID(to):
		bits := map[uint32]int{oidInt2: 16, oidInt4: 32, oidInt8: 64}[to]
		if _, err := strconv.ParseInt(v, 10, bits); err != nil {
			return "", err
		}
	case to == oidNumeric && (from == oidFloat8 || from == oidFloat4):
		// numeric reads 1.5e-05 and NaN but not the infinities.
		if strings.Contains(v, "Infinity") {
			return "", strconv.ErrRange
		}
	}
	return v, nil
}
