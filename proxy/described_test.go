package proxy

import (
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestAsDescribed: an answer is sent in the described types where each
// value can be written in them (numbers as numeric or float, anything as
// text, integers as a wider or equal integer within range), and refused
// with PostgreSQL's 0A000 "cached plan must not change result type"
// otherwise (a fraction as an integer, a number as a date, another number
// of columns, an infinity as numeric).
func TestAsDescribed(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name      string
		got, told uint32
		value     string
		ok        bool
	}{
		{"float8 as numeric", oidFloat8, oidNumeric, "1.5e-05", true},
		{"float8 NaN as numeric", oidFloat8, oidNumeric, "NaN", true},
		{"float8 infinity as numeric", oidFloat8, oidNumeric, "Infinity", false},
		{"numeric as float8", oidNumeric, oidFloat8, "12.25", true},
		{"int8 as numeric", oidInt8, oidNumeric, "42", true},
		{"int4 as int8", oidInt4, oidInt8, "7", true},
		{"int8 as int4 in range", oidInt8, oidInt4, "7", true},
		{"int8 as int4 out of range", oidInt8, oidInt4, "4294967296", false},
		{"numeric as int8", oidNumeric, oidInt8, "1.5", false},
		{"timestamptz as text", oidTimestamptz, oidText, "2024-01-01 00:00:00+00", true},
		{"numeric as date", oidNumeric, oidDate, "3", false},
	}
	for _, c := range cases {
		got := []column{{"x", c.got}}
		told := []column{{"x", c.told}}
		rs := &resultSet{cols: got, rows: [][]*string{{str(c.value)}, {nil}}}
		var err error
		if describedFits(told, got) {
			err = asDescribed(rs, told)
		} else {
			err = errResultTypeChanged()
		}
		if c.ok != (err == nil) {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			var pe *pgerr.Error
			if !errors.As(err, &pe) || pe.Code != pgerr.FeatureNotSupported {
				t.Errorf("%s: %v, want 0A000", c.name, err)
			}
			continue
		}
		if rs.cols[0].oid != c.told || *rs.rows[0][0] != c.value || rs.rows[1][0] != nil {
			t.Errorf("%s: cols %+v rows %v", c.name, rs.cols, rs.rows)
		}
		if _, err := encodeBinary(c.told, c.value); err != nil {
			t.Errorf("%s: the value does not encode as the described type: %v", c.name, err)
		}
	}
	if describedFits([]column{{"a", oidInt8}}, []column{{"a", oidInt8}, {"b", oidInt8}}) {
		t.Error("another number of columns fits")
	}
}

// TestAsDescribed_CopiesRows: the rows converted may be the answer cache's
// (release/cache.go), shared with other sessions; asDescribed must not
// write into them.
func TestAsDescribed_CopiesRows(t *testing.T) {
	v := "1.5e-05"
	shared := [][]*string{{&v}}
	rs := &resultSet{cols: []column{{"x", oidFloat8}}, rows: shared}
	if err := asDescribed(rs, []column{{"x", oidText}}); err != nil {
		t.Fatal(err)
	}
	if err := asDescribed(rs, []column{{"x", oidNumeric}}); err != nil {
		t.Fatal(err)
	}
	rs.rows[0][0] = nil
	if shared[0][0] != &v || v != "1.5e-05" {
		t.Fatalf("the shared rows were written: %v", shared)
	}
}
