package release

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestClipChoice_Bounds: the walk from each declared bound stops at the
// first candidate whose noisy units beyond, plus twice their noise's
// standard deviation, exceed 2% of the units. With age in [0, 110] (upper
// candidates 1, 2, 3, 7, 14, 28, 55; lower 55, 83, 96, 103, 107, 108,
// 109) and 22,500 units aged 0–12, the upper bound must never cut the
// data (the bin of 7–13 holds 9,500 units) and comes down to 14: three
// empty bins, whose noise (σ√3 ≈ 48 units, twice that 97) is far below 2%
// of the units (450), so in practically every release (the test asks 295
// of 300). The lower bound stays 0 (4,000 units aged 0). With the data
// reaching 110 (4,000 units at 55 and above), the declared [0, 110]
// stays. With a tenth of the units (2,250: 2% is 45, below the noise's
// 97 at three bins) the bound comes down to 14 rarely (a bin passes only
// on a noise below about −50), never below: the price of the rule.
func TestClipChoice_Bounds(t *testing.T) {
	ds := loadPolicy(t)
	p, err := rewrite.RewriteWith(ds, "SELECT AVG(age) FROM visits", rewrite.Options{AutoClip: true, NoBias: true})
	if err != nil || p.Clip == nil {
		t.Fatalf("%v %+v", err, p)
	}
	col := p.Clip.Columns[0]
	if fmt.Sprint(col.UpperEdges) != "[1 2 3 7 14 28 55]" || fmt.Sprint(col.LowerEdges) != "[55 83 96 103 107 108 109]" {
		t.Fatalf("edges %v and %v", col.UpperEdges, col.LowerEdges)
	}
	r := newTestReleaser(t, &memLedger{limit: 1e9}, 11)
	// ε_clip = 0.1 of 1, one column (2 histograms): one bin's noise σ =
	// √2·2/0.1 ≈ 28 units.
	req := Request{Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace}
	hist := func(largest, smallest map[int]int) [][]*string {
		var rows [][]*string
		for side, counts := range []map[int]int{largest, smallest} {
			for b, n := range counts {
				rows = append(rows, []*string{s("0"), s(strconv.Itoa(side)), s(strconv.Itoa(b)), s(strconv.Itoa(n))})
			}
		}
		return rows
	}
	// Ages 0–12, one row per unit: largest values in the upper
	// candidates' bins 0 (age 0), 1, 2, 3 (3–6), 4 (7–13); smallest all
	// below 55, the lower candidates' bin 0.
	low := hist(map[int]int{0: 4000, 1: 1500, 2: 1500, 3: 6000, 4: 9500}, map[int]int{0: 22500})
	small := hist(map[int]int{0: 400, 1: 150, 2: 150, 3: 600, 4: 950}, map[int]int{0: 2250})
	// Ages up to 110: 4,000 units' largest values at 55 and above (bin
	// 7); smallest values below 55 for all.
	high := hist(map[int]int{0: 4000, 4: 9500, 7: 4000}, map[int]int{0: 17500})
	at14, small14 := 0, 0
	for range 300 {
		cc, _, err := r.newClipChoice(req)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cc.choose(low)
		if err != nil {
			t.Fatal(err)
		}
		b := res[0].bounds
		if b.Upper < 14 || b.Lower != 0 {
			t.Fatalf("bounds [%v, %v] for ages 0–12: cut the data", b.Lower, b.Upper)
		}
		if b.Upper == 14 {
			at14++
		}
		res, err = cc.choose(high)
		if err != nil {
			t.Fatal(err)
		}
		if b := res[0].bounds; b.Upper != 110 || b.Lower != 0 || res[0].changed {
			t.Fatalf("bounds [%v, %v] for data reaching 110, want the declared [0, 110]", b.Lower, b.Upper)
		}
		res, err = cc.choose(small)
		if err != nil {
			t.Fatal(err)
		}
		if b := res[0].bounds; b.Upper < 14 || b.Lower != 0 {
			t.Fatalf("bounds [%v, %v] for 2,250 units aged 0–12: cut the data", b.Lower, b.Upper)
		} else if b.Upper == 14 {
			small14++
		}
	}
	t.Logf("upper bound 14 in %d of 300 releases (2,250 units: %d)", at14, small14)
	if small14 > 45 {
		t.Fatalf("with 2,250 units the upper bound came down to 14 in %d of 300 releases, want rarely (≤ 45; about 8%% expected)", small14)
	}
	if at14 < 295 {
		t.Fatalf("upper bound came down to 14 in %d of 300 releases, want ≥ 295", at14)
	}
}

// pgUpstream runs the proxy's SQL on a test database.
type pgUpstream struct {
	conn  *pgx.Conn
	calls []string
}

func (u *pgUpstream) Query(ctx context.Context, sql string, args ...any) ([][]*string, error) {
	u.calls = append(u.calls, sql)
	rows, err := u.conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]*string
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]*string, len(raw))
		for i, v := range raw {
			if v != nil {
				x := string(v)
				row[i] = &x
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// TestAutoClip_EndToEndOnPostgres releases SUM(age) and AVG(age) of 30,000
// patients aged 0–12 under the declared [0, 110], with dp.clipping = auto
// and fixed, on PostgreSQL: auto chooses an upper bound of 14 or 28 (never
// below the data), says so in the NOTICE, charges one query's ε in all
// (the histogram's tenth first), and states a SUM half-width at least 3×
// smaller than fixed (110 → 14 or 28 is 4–8×); both cover the truth in
// ≥ 85% of 60 releases (a calibrated 95% interval falls below with
// probability under 10⁻³).
func TestAutoClip_EndToEndOnPostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE visits (visit_id bigint, patient_id bigint, visit_date date, department text,
		diagnosis text, age int, cost numeric(10,2), length_of_stay int);
		INSERT INTO visits SELECT g, g, '2021-01-01', 'cardiology', 'flu', g % 13, 10, 1 FROM generate_series(1, 30000) g`); err != nil {
		t.Fatal(err)
	}
	truthSum, truthAvg := 0.0, 0.0
	for g := 1; g <= 30000; g++ {
		truthSum += float64(g % 13)
	}
	truthAvg = truthSum / 30000
	ds := loadPolicy(t)
	const q = "SELECT SUM(age) AS s, AVG(age) AS a FROM visits"
	half := regexp.MustCompile(`±([0-9.e+]+) \(s, `)
	at14 := 0
	run := func(auto bool) (widths []float64, covered int) {
		p, err := rewrite.RewriteWith(ds, q, rewrite.Options{AutoClip: auto, NoBias: true})
		if err != nil {
			t.Fatal(err)
		}
		led := &memLedger{limit: 1e9}
		r := newTestReleaser(t, led, 5)
		up := &pgUpstream{conn: conn}
		for i := range 60 {
			res, err := r.Run(ctx, Request{Analyst: "a", Dataset: ds, Plan: p, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true})
			if err != nil {
				t.Fatal(err)
			}
			m := half.FindStringSubmatch(res.Notice)
			if m == nil {
				t.Fatalf("NOTICE %q has no half-width of s", res.Notice)
			}
			h, _ := strconv.ParseFloat(m[1], 64)
			widths = append(widths, h)
			sum, _ := strconv.ParseFloat(*res.Rows[0][0], 64)
			avg, _ := strconv.ParseFloat(*res.Rows[0][1], 64)
			ha := noticeHalfWidth(t, res.Notice, "a")
			if math.Abs(sum-truthSum) <= h && math.Abs(avg-truthAvg) <= ha {
				covered++
			}
			if auto {
				m := regexp.MustCompile(`age clamped to \[0, ([0-9]+)\] \(declared \[0, 110\]; about -?[0-9]+ units with values beyond, ±[0-9.]+\) \(bounds chosen by DP, epsilon 0\.1\)`).FindStringSubmatch(res.Notice)
				switch {
				case m == nil && !strings.Contains(res.Notice, "age clamped to [0, 110] as declared"):
					t.Fatalf("NOTICE %q does not state the clamping bounds", res.Notice)
				case m != nil && m[1] == "14":
					at14++
				case m != nil && m[1] < "14" && len(m[1]) <= 2:
					t.Fatalf("NOTICE %q: the upper bound cut the data (ages up to 12)", res.Notice)
				}
				c := led.reserved[i]
				total := 0.0
				for _, e := range c.Events {
					total += e.Epsilon
				}
				if c.Events[0].Mechanism != "laplace" || math.Abs(c.Events[0].Epsilon-0.1) > 1e-12 || math.Abs(total-1) > 1e-9 {
					t.Fatalf("charge %+v: want the histogram's 0.1 first and 1 in all", c.Events)
				}
			}
		}
		return widths, covered
	}
	fixedW, fixedCov := run(false)
	autoW, autoCov := run(true)
	med := func(x []float64) float64 {
		y := append([]float64{}, x...)
		for i := range y {
			for j := i + 1; j < len(y); j++ {
				if y[j] < y[i] {
					y[i], y[j] = y[j], y[i]
				}
			}
		}
		return y[len(y)/2]
	}
	t.Logf("SUM half-width: fixed %v, auto %v (median); coverage fixed %d/60, auto %d/60; upper bound 14 in %d/60", med(fixedW), med(autoW), fixedCov, autoCov, at14)
	if at14 < 51 {
		t.Errorf("upper bound 14 in %d of 60 releases, want ≥ 51 (about 97%% expected)", at14)
	}
	if med(fixedW) < 3*med(autoW) {
		t.Errorf("auto clipping stated ±%v against fixed ±%v: want at least 3× narrower", med(autoW), med(fixedW))
	}
	if fixedCov < 51 || autoCov < 51 {
		t.Errorf("coverage fixed %d/60, auto %d/60: want ≥ 51", fixedCov, autoCov)
	}
}
