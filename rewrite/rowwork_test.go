package rewrite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestRowWork_Bounded replays the attacks on expressions inside aggregates
// (issue 14): an intermediate value that overflows numeric only on the rows
// a CASE selects (a data-dependent 22003 after the charge), dense constants
// whose products cost seconds per selected row (a timing oracle), and
// chains of tiny constants that made planning quadratic (minutes, not
// cancellable). Each is refused at plan time, before any charge, and
// planning stays fast.
func TestRowWork_Bounded(t *testing.T) {
	ds := loadHospital(t)
	chain := func(f string, n int) string { return strings.Repeat(f, n) }
	refused := map[string]string{
		// The attacker's F1: overflow in the middle, small at the end.
		"SELECT SUM(CASE WHEN diagnosis = 'C18' THEN (age + 1)" + chain(" * 1e999", 140) + chain(" * 1e-999", 140) + " ELSE 0 END) FROM visits": "22003",
		"SELECT SUM(LEAST(GREATEST((age + 1)" + chain(" * 1e999", 140) + ", 0), 1)) FROM visits":                                                "22003",
		// Constants: too many digits, too large, too small.
		"SELECT SUM(age * 1.23456789012345678901234567890123) FROM visits": "22003",
		"SELECT SUM(age * 1e31) FROM visits":                               "22003",
		"SELECT SUM(age * 1e-31) FROM visits":                              "22003",
		// An intermediate product beyond 1e100.
		"SELECT SUM(LEAST(cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost * cost, 1)) FROM visits": "22003",
		// The attacker's F3/F4: long chains.
		"SELECT SUM(((age + 1)" + chain(" * 1e-30", 110) + ") / 1.5) FROM visits": "54001",
		"SELECT SUM(age" + chain(" + 1", 260) + ") FROM visits":                   "54001",
	}
	for q, code := range refused {
		start := time.Now()
		_, err := Rewrite(ds, q)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("planning took %v: %.80s…", d, q)
		}
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != code {
			t.Errorf("%.100s…\n  got %v, want %s before any charge", q, err, code)
		}
	}
	for _, q := range []string{
		"SELECT SUM(cost * 0.000001), AVG(age * 1.5 + 2), SUM(CASE WHEN age > 65 THEN cost / 100.0 ELSE 0 END) FROM visits",
		"SELECT SUM(age" + chain(" + 1", 240) + ") FROM visits",
		"SELECT SUM(cost / NULLIF(length_of_stay, 0) / 2.5) FROM visits",
	} {
		if _, err := Rewrite(ds, q); err != nil {
			t.Errorf("%.100s…: %v", q, err)
		}
	}
}

// TestRowWork_ConditionsAndSize: the second attack round hid per-row work
// in CASE conditions, function arguments and the copies a division makes,
// outside the operation count; and in long ILIKE patterns. Conditions and
// arguments now count, patterns have at most 256 characters, and the
// emitted SQL at most 256 KiB.
func TestRowWork_ConditionsAndSize(t *testing.T) {
	ds := loadHospital(t)
	long := strings.Repeat("é", 300)
	var whens strings.Builder
	for i := range 260 {
		fmt.Fprintf(&whens, " WHEN diagnosis LIKE 'x%d%%' THEN cost", i)
	}
	for q, code := range map[string]string{
		"SELECT SUM(CASE WHEN diagnosis ILIKE '%" + long + "%' THEN cost ELSE 0 END) FROM visits":                                   "54000",
		"SELECT COUNT(*) FROM visits WHERE diagnosis LIKE '" + long + "'":                                                           "54000",
		"SELECT SUM(CASE" + whens.String() + " ELSE 0 END) FROM visits":                                                             "54001",
		"SELECT SUM(LEAST(cost" + strings.Repeat(", cost", 99) + ") + LEAST(cost" + strings.Repeat(", cost", 99) + ")) FROM visits": "54001",
		"SELECT COUNT(*) FROM visits WHERE age IN (1" + strings.Repeat(", 2", 60000) + ")":                                          "54000",
	} {
		_, err := Rewrite(ds, q)
		if pe, ok := pgerr.As(err); !ok || pe.Code != code {
			t.Errorf("%.90s…: %v, want %s", q, err, code)
		}
	}
}
