package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestMinUnitsPerCell_EndToEnd runs the tests' fixed policy with
// min_units_per_cell: 11 (and a budget of ε 1000) through `dpproxy serve`
// with pgx:
//
//   - EXPLAIN lists the unit count as one more measurement;
//   - at ε = 1 every department (thousands of patients each) is released,
//     and the ledger charge has one event more than the measures;
//   - at ε = 20, the same query over three patients keeps the 7 keys and
//     releases every count and its error column as NULL, with a NOTICE
//     saying why; so does the ungrouped count, a join on the unit and
//     sample-and-aggregate;
//   - with automatic clipping the replanned statement keeps the minimum;
//   - a join of protected tables on another key is refused with 0A000 and
//     a hint, before any charge.
//
// False failures: at ε = 1 the unit count gets ε 0.405 (a tenth chooses
// the rows per unit, a tenth of the rest the bias estimate, COUNT(*) and
// the unit count share the rest), Laplace scale 4/0.405 ≈ 9.9; a
// department with more than 1,000 patients is suppressed only if the
// noise is below −989 (probability ½e^{−100} per department). At ε = 20
// the count gets ε 8.1, scale 4/8.1 ≈ 0.49: a group of at most 3 patients
// is released only if the noise is ≥ 8 (≤ ½e^{−16.2} < 5e-8 per group);
// the join's count (L0 = 2) and the ungrouped one (L0 = 1) are tighter
// still; the sample-and-aggregate count gets a tenth of ε (2, L0 = 1,
// scale 0.5): ≤ ½e^{−16} < 1e-7. In all < 1e-6.
func TestMinUnitsPerCell_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigPolicy(t, pinnedPolicy,
		[2]string{"privacy_unit: patient\n", "privacy_unit: patient\nmin_units_per_cell: 11\n"},
		[2]string{"  epsilon: 3.0 ", "  epsilon: 1000 "})
	withAnalyst(t, cfgPath, "kay")
	p := startProxy(t, cfgPath, addr)
	c, notices := connectWithNotices(t, ctx, p.dsn("kay"))
	exec := func(q string) {
		t.Helper()
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	lastNotice := func() string {
		t.Helper()
		ns := notices()
		if len(ns) == 0 {
			t.Fatal("no NOTICE")
		}
		return ns[len(ns)-1]
	}
	exec("SET dp.epsilon = 1")
	const grouped = "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY 1"

	var lines []string
	for _, r := range textRows(t, ctx, c, "EXPLAIN "+grouped) {
		lines = append(lines, r[0])
	}
	explain := strings.Join(lines, "\n")
	for _, want := range []string{"Minimum units per cell: noisy count(distinct unit) per group", "min_units_per_cell=11"} {
		if !strings.Contains(explain, want) {
			t.Fatalf("EXPLAIN lacks %q:\n%s", want, explain)
		}
	}

	rows := textRows2(t, ctx, c, grouped)
	if len(rows) != 7 {
		t.Fatalf("released %v, want the 7 departments", rows)
	}
	for _, r := range rows {
		if r[1] == nil {
			t.Fatalf("department %s suppressed at ε 1: %v", *r[0], rows)
		}
	}
	if n := lastNotice(); !strings.Contains(n, "0 of 7 groups suppressed") || !strings.Contains(n, "fewer than about 11 patients") {
		t.Fatalf("NOTICE %q", n)
	}
	ledger := connect(t, ctx, ledgerDSN())
	var events string
	if err := ledger.QueryRow(ctx, "SELECT events::text FROM dpproxy_ledger.charge WHERE analyst = 'kay' ORDER BY id LIMIT 1").Scan(&events); err != nil {
		t.Fatal(err)
	}
	// The choice of rows per unit (ε/10), then COUNT(*), the bias
	// estimate and the unit count, in one charge.
	if got := strings.Count(strings.ToLower(events), "\"mechanism\""); got != 4 || !strings.Contains(events, `"epsilon": 0.405, "mechanism": "laplace", "noise_multiplier": 2.4691358024691357}]`) {
		t.Fatalf("ledger events %s: want 4 (rows per unit, COUNT(*), the bias estimate, the unit count last, ε 0.405)", events)
	}

	exec("SET dp.epsilon = 20")
	exec("SET dp.error_columns = on")
	for _, tc := range []struct {
		q     string
		keys  int
		want  int // rows
		label string
	}{
		{"SELECT department, COUNT(*) FROM visits WHERE patient_id <= 3 GROUP BY department ORDER BY 1", 1, 7, "7 of 7 groups suppressed"},
		{"SELECT COUNT(*), AVG(cost) FROM visits WHERE patient_id <= 3", 0, 1, "1 of 1 groups suppressed"},
		{"SELECT p.sex, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.patient_id <= 3 GROUP BY p.sex ORDER BY 1", 1, 2, "2 of 2 groups suppressed"},
		{"SELECT corr(cost, age) FROM visits WHERE patient_id <= 3", 0, 1, "1 of 1 groups suppressed"},
		// A post-processing statement over a suppressed leaf.
		{"SELECT t.department, t.n FROM (SELECT department, COUNT(*) AS n FROM visits WHERE patient_id <= 3 GROUP BY department) t ORDER BY 1", 1, 7, "7 of 7 groups suppressed"},
		// Sample-and-aggregate with k fixed still measures its unit count.
		{"SET dp.sample_blocks = 2; SELECT corr(cost, age) FROM visits WHERE patient_id <= 3", 0, 1, "1 of 1 groups suppressed"},
	} {
		if set, q, ok := strings.Cut(tc.q, "; "); ok {
			exec(set)
			tc.q = q
		}
		seen := len(notices())
		rows := textRows2(t, ctx, c, tc.q)
		if len(rows) != tc.want {
			t.Fatalf("%s: %v, want %d rows", tc.q, rows, tc.want)
		}
		for _, r := range rows {
			for i, v := range r {
				if i < tc.keys && v == nil {
					t.Fatalf("%s: a key is NULL: %v", tc.q, r)
				}
				if i >= tc.keys && v != nil {
					t.Fatalf("%s: column %d released (%s), want NULL (values and error columns)", tc.q, i, *v)
				}
			}
		}
		// A post-processing statement sends its leaf's NOTICE, then its
		// own.
		if ns := notices()[seen:]; !slices.ContainsFunc(ns, func(n string) bool { return strings.Contains(n, tc.label) }) {
			t.Fatalf("%s: NOTICEs %q, want %q", tc.q, ns, tc.label)
		}
	}

	// Automatic clipping plans the statement again with the bounds it
	// chose: the replanned plan keeps the minimum and the unit count.
	exec("RESET dp.sample_blocks")
	exec("SET dp.clipping = auto")
	seen := len(notices())
	clipped := textRows2(t, ctx, c, "SELECT department, SUM(length_of_stay) FROM visits GROUP BY department ORDER BY 1")
	if len(clipped) != 7 {
		t.Fatalf("auto clipping: %v, want 7 departments", clipped)
	}
	for _, r := range clipped {
		if r[1] == nil || r[2] == nil {
			t.Fatalf("auto clipping: %s suppressed: %v", *r[0], r)
		}
	}
	if ns := notices()[seen:]; len(ns) == 0 || !strings.Contains(ns[len(ns)-1], "0 of 7 groups suppressed") || !strings.Contains(ns[len(ns)-1], "bounds chosen by DP") {
		t.Fatalf("auto clipping NOTICEs %q", ns)
	}
	// The demo's stays are under 30 days for all but a handful of its
	// 50,000 patients: the bound moves (the histogram's noise at ε 2 has
	// scale 1 per bin against the 1,000 units of the 2% rule), and the
	// replanned statement answers only if it kept the minimum (clipPlan).
	if n := notices()[len(notices())-1]; !strings.Contains(n, "(declared [0, 60]") {
		t.Fatalf("auto clipping kept the declared bounds: %q", n)
	}
	exec("SET dp.clipping = fixed")

	var before int
	if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'kay'").Scan(&before); err != nil {
		t.Fatal(err)
	}
	_, err := c.Exec(ctx, "SELECT v1.department, COUNT(*) FROM visits v1 JOIN visits v2 ON v1.department = v2.department GROUP BY v1.department")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Hint, "a.patient_id = b.patient_id") {
		t.Fatalf("a join on another key under min_units_per_cell: %v, want 0A000 with a hint", err)
	}
	var after int
	if err := ledger.QueryRow(ctx, "SELECT count(*) FROM dpproxy_ledger.charge WHERE analyst = 'kay'").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the refused join was charged (%d → %d charges)", before, after)
	}
}

// textRows2 runs q and returns its rows as text (NULL as nil).
func textRows2(t *testing.T, ctx context.Context, c *pgx.Conn, q string) [][]*string {
	t.Helper()
	rows, err := c.Query(ctx, q, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]*string
	for rows.Next() {
		raw := rows.RawValues()
		r := make([]*string, len(raw))
		for i, b := range raw {
			if b != nil {
				s := string(b)
				r[i] = &s
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}
