package proxy

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

func TestBindLiterals(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		params [][]byte
		oids   []uint32
		want   string
	}{
		{name: "int", text: "SELECT COUNT(*) FROM t WHERE age > $1", params: [][]byte{[]byte("30")}, oids: []uint32{oidInt4},
			want: "SELECT COUNT(*) FROM t WHERE age > 30"},
		{name: "negative after minus", text: "SELECT SUM(x-$1) FROM t", params: [][]byte{[]byte("-5")}, oids: []uint32{oidInt8},
			want: "SELECT SUM(x-(-5)) FROM t"},
		{name: "string with quote", text: "SELECT COUNT(*) FROM t WHERE d = $1", params: [][]byte{[]byte("x'; DROP TABLE t; --")}, oids: []uint32{oidText},
			want: "SELECT COUNT(*) FROM t WHERE d = 'x''; DROP TABLE t; --'"},
		{name: "unknown type is a string", text: "SELECT $1", params: [][]byte{[]byte("a")}, oids: nil, want: "SELECT 'a'"},
		{name: "null", text: "SELECT $1", params: [][]byte{nil}, oids: []uint32{oidInt4}, want: "SELECT NULL"},
		{name: "placeholders in quotes and comments stay", text: "SELECT '$1', \"$1\", $$ $1 $$, a$1 -- $1\n, $2 /* $1 */",
			params: [][]byte{[]byte("1"), []byte("2")}, oids: []uint32{oidInt4, oidInt4},
			want: "SELECT '$1', \"$1\", $$ $1 $$, a$1 -- $1\n, 2 /* $1 */"},
		{name: "escape string", text: `SELECT E'\'$1', $1`, params: [][]byte{[]byte("7")}, oids: []uint32{oidInt4}, want: `SELECT E'\'$1', 7`},
		{name: "date", text: "SELECT $1", params: [][]byte{[]byte("2024-01-31")}, oids: []uint32{oidDate}, want: "SELECT '2024-01-31'"},
		{name: "bool", text: "SELECT $1", params: [][]byte{[]byte("t")}, oids: []uint32{oidBool}, want: "SELECT TRUE"},
		{name: "numeric", text: "SELECT $1", params: [][]byte{[]byte("12.50")}, oids: []uint32{oidNumeric}, want: "SELECT 12.50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lits, err := literals(tt.params, nil, tt.oids)
			if err != nil {
				t.Fatal(err)
			}
			got, err := bindLiterals(tt.text, lits)
			if err != nil || got != tt.want {
				t.Errorf("bindLiterals = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLiterals_Binary(t *testing.T) {
	i8 := binary.BigEndian.AppendUint64(nil, uint64(^uint64(0))) // -1
	i4 := binary.BigEndian.AppendUint32(nil, 42)
	num, _ := encodeNumeric("-0.5")
	d, _ := encodeBinary(oidDate, "2020-02-29")
	lits, err := literals([][]byte{i8, i4, num, d, {1}}, []int16{1}, []uint32{oidInt8, oidInt4, oidNumeric, oidDate, oidBool})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"(-1)", "42", "(-0.5)", "'2020-02-29'", "TRUE"}
	if strings.Join(lits, "|") != strings.Join(want, "|") {
		t.Errorf("literals = %v, want %v", lits, want)
	}
}

func TestLiterals_Invalid(t *testing.T) {
	for _, tc := range []struct {
		v   string
		oid uint32
	}{
		{"30 OR 1=1", oidInt4}, {"1; DROP", oidNumeric}, {"NaN", oidFloat8}, {"2020-13-01", oidDate}, {"maybe", oidBool},
		{"a\x00b", oidText}, {"\xff", oidText},
	} {
		_, err := literals([][]byte{[]byte(tc.v)}, nil, []uint32{tc.oid})
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != "22P02" {
			t.Errorf("literal(%q, %d) = %v, want 22P02", tc.v, tc.oid, err)
		}
	}
	if _, err := bindLiterals("SELECT $3", []string{"1"}); err == nil {
		t.Error("bindLiterals accepted $3 with one parameter")
	}
}

func TestMaxParam(t *testing.T) {
	for text, want := range map[string]int{
		"SELECT 1": 0, "SELECT $1 + $12": 12, "SELECT '$5'": 0, "SELECT a$3": 0, "SELECT $2 -- $9": 2,
	} {
		if got := maxParam(text); got != want {
			t.Errorf("maxParam(%q) = %d, want %d", text, got, want)
		}
	}
}

func TestFingerprint_IgnoresLiterals(t *testing.T) {
	a := fingerprint("SELECT COUNT(*) FROM visits WHERE age > 30 AND dept = 'x'")
	b := fingerprint("select count(*)  from visits where age > 45 and dept = 'secret' -- c")
	c := fingerprint("SELECT SUM(cost) FROM visits WHERE age > 30")
	if a != b {
		t.Errorf("fingerprints differ for the same shape: %s %s", a, b)
	}
	if a == c {
		t.Error("fingerprints equal for different statements")
	}
}

func TestParseOptions(t *testing.T) {
	got, err := parseOptions(`-c dp.epsilon=0.5 --search-path=a\ b -cstatement_timeout=5s`)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"dp.epsilon", "0.5"}, {"search_path", "a b"}, {"statement_timeout", "5s"}}
	if len(got) != len(want) {
		t.Fatalf("parseOptions = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("option %d = %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := parseOptions("-x"); err == nil {
		t.Error("parseOptions(-x) succeeded")
	}
}

func TestStartupOptionsApply(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc, err := pgconnConnect(t, ts.dsn("alice", "alice", "hospital")+"&options=-c%20dp.epsilon%3D0.7")
	if err != nil {
		t.Fatal(err)
	}
	if got := show(t, pc, "dp.epsilon"); got != "0.7" {
		t.Errorf("dp.epsilon from options = %s", got)
	}
	_, err = pgconnConnect(t, ts.dsn("alice", "alice", "hospital")+"&options=-c%20dp.epsilon%3D99")
	if sqlstate(err) != "22023" {
		t.Errorf("bad dp.epsilon in options: %v, want 22023", err)
	}
}

func TestDurations(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "100": "100ms", "1000": "1s", "90s": "90s", "2min": "2min", "1h": "1h", "1.5s": "1500ms", "1d": "1d"} {
		got, err := checkDuration(nil, in)
		if err != nil || got != want {
			t.Errorf("checkDuration(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "abc", "5 parsecs", "NaN"} {
		if _, err := checkDuration(nil, bad); err == nil {
			t.Errorf("checkDuration(%q) succeeded", bad)
		}
	}
}

func TestServerVersionNum(t *testing.T) {
	if got := serverVersionNum("15.0 (dpproxy)"); got != "150000" {
		t.Errorf("serverVersionNum = %s", got)
	}
	if got := serverVersionNum("16.4"); got != "160004" {
		t.Errorf("serverVersionNum = %s", got)
	}
}

// TestLiterals_Timestamps: binary timestamp and timestamptz (µs since
// 2000-01-01, beyond time.Duration's ±292 years too) and text timestamps
// become timestamp texts for rewrite; a timestamp sent for a date
// parameter is that date at midnight and refused otherwise.
func TestLiterals_Timestamps(t *testing.T) {
	us := func(tm time.Time) []byte {
		days := int64(math.Floor(tm.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Hours() / 24))
		rest := tm.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(days)))
		return binary.BigEndian.AppendUint64(nil, uint64(days*86_400_000_000+rest.Microseconds()))
	}
	for _, c := range []struct {
		v      []byte
		format int16
		oid    uint32
		want   string // "" = refused
	}{
		{us(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)), 1, oidTimestamptz, "'2024-03-01 00:00:00+00'::timestamptz"},
		{us(time.Date(1900, 1, 1, 10, 30, 0, 0, time.UTC)), 1, oidTimestamp, "'1900-01-01 10:30:00'::timestamp"},
		{[]byte("2024-03-01 00:00:00+01"), 0, oidTimestamptz, "'2024-03-01 00:00:00+01'::timestamptz"},
		{[]byte("2024-03-01 00:00:00Z"), 0, oidDate, "'2024-03-01'"},
		{[]byte("2024-03-01T00:00:00.000"), 0, oidDate, "'2024-03-01'"},
		// A time of day sent for a date: PostgreSQL's date input keeps
		// the date.
		{[]byte("2024-03-01 10:30:00"), 0, oidDate, "'2024-03-01'"},
		// pgjdbc's setDate: the date with its calendar's zone offset.
		{[]byte("2024-03-01 +00"), 0, oidDate, "'2024-03-01'"},
		{[]byte("2024-03-01 -05:30"), 0, oidDate, "'2024-03-01'"},
		{[]byte("2024-03-01 +00 junk"), 0, oidDate, ""},
		{binary.BigEndian.AppendUint64(nil, uint64(math.MaxInt64)), 1, oidTimestamp, ""},
	} {
		got, err := literal(c.v, c.format, c.oid)
		if c.want == "" {
			if err == nil {
				t.Errorf("%q (oid %d): %s, want refused", c.v, c.oid, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q (oid %d): %s, %v; want %s", c.v, c.oid, got, err, c.want)
		}
	}
}

// literals decodes every bound value, as the Execute of a statement that
// uses each does.
func literals(params [][]byte, formats []int16, oids []uint32) ([]string, error) {
	out := make([]string, len(params))
	for i := range params {
		lit, err := literalOf(params, formats, oids, i)
		if err != nil {
			return nil, err
		}
		out[i] = lit
	}
	return out, nil
}
