package rewrite

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// joinQuantileGoldens returns the accepted join goldens with a quantile.
func joinQuantileGoldens(t *testing.T) ([]goldenCase, []*Plan) {
	cases, plans := joinGoldens(t)
	var gs []goldenCase
	var ps []*Plan
	for i, p := range plans {
		for _, m := range p.Measures {
			if m.Kind == MeasureQuantile {
				gs, ps = append(gs, cases[i]), append(ps, p)
				break
			}
		}
	}
	return gs, ps
}

// joinDBs builds one join database per dataset (newJoinDB), without
// NULL-unit rows when clean (the analyst's query would count them).
func joinDBs(t *testing.T, ctx context.Context, rng *rand.Rand, clean bool) func(ds *policy.Dataset) *joinDB {
	dbs := map[*policy.Dataset]*joinDB{}
	return func(ds *policy.Dataset) *joinDB {
		if db, ok := dbs[ds]; ok {
			return db
		}
		db := newJoinDB(t, ctx, ds, rng)
		if clean {
			for _, a := range db.tables {
				if a.t.Public {
					continue
				}
				if _, err := db.conn.Exec(ctx, "DELETE FROM "+pgemit.QuoteIdent(a.t.Schema)+"."+pgemit.QuoteIdent(a.t.Name)+" WHERE "+pgemit.QuoteIdent(a.t.UnitColumn)+" IS NULL"); err != nil {
					t.Fatal(err)
				}
			}
		}
		dbs[ds] = db
		return db
	}
}

// TestQuantile_PostgresJoins is the differential test of quantiles over
// every join shape (join_quantile.go): on a real PostgreSQL with data
// within every limit of the join goldens (newJoinDB: one row per unit and
// table, multiplicities far below the declared ones), the emitted SQL with
// noise off reproduces PostgreSQL's own answer to the analyst's query:
//
//   - exponential method: PostgreSQL's value lies in the zero-utility
//     buckets of each group's histogram (checkQuantileRows), and the other
//     outputs are equal;
//   - smooth and ptr methods: f, the released function of the summary
//     "f;S" or "f;D", equals PostgreSQL's value (within 1e-9 relative;
//     PostgreSQL's percentile_cont computes in float8).
func TestQuantile_PostgresJoins(t *testing.T) {
	cases, plans := joinQuantileGoldens(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := joinDBs(t, ctx, rand.New(rand.NewPCG(31, 37)), true)
	shapes := map[string]int{}
	for i, gc := range cases {
		p := plans[i]
		conn := db(gc.ds).conn
		shapes[p.Join.Shape]++
		t.Run(gc.name, func(t *testing.T) {
			emitted, err := queryText(ctx, conn, p.SQL)
			if err != nil {
				t.Fatalf("emitted SQL failed: %v\n%s", err, p.SQL)
			}
			direct, err := queryText(ctx, conn, gc.query)
			if err != nil {
				t.Fatalf("analyst query failed on PostgreSQL: %v", err)
			}
			checkQuantileRows(t, p, emitted, direct)
			for _, method := range []string{QuantileSmooth, QuantilePTR} {
				mp, err := withQuantilesTest(gc.ds, p, method, 1, 1e-6, policy.MechanismLaplace)
				if err != nil {
					t.Fatal(err)
				}
				emitted, err := queryText(ctx, conn, mp.SQL)
				if err != nil {
					t.Fatalf("%s: emitted SQL failed: %v\n%s", method, err, mp.SQL)
				}
				checkOrderStatF(t, mp, emitted, direct)
			}
		})
	}
	for _, s := range []string{JoinPublic, JoinUnit, JoinKey} {
		if shapes[s] == 0 {
			t.Errorf("no quantile golden of join shape %s was checked", s)
		}
	}
}

// checkOrderStatF compares, per group, the f of each quantile summary with
// PostgreSQL's answer.
func checkOrderStatF(t *testing.T, p *Plan, emitted, direct [][]*string) {
	t.Helper()
	want := map[string][]*string{}
	for _, r := range direct {
		var key []string
		for i, o := range p.Outputs {
			if o.Kind == OutputKey {
				if r[i] == nil {
					key = nil
					break
				}
				key = append(key, *r[i])
			}
		}
		if key == nil && len(p.Keys) > 0 {
			continue // the NULL group is not released
		}
		want[strings.Join(key, "\x00")] = r
	}
	nk := len(p.Keys)
	checked := 0
	for _, r := range emitted {
		var key []string
		for _, v := range r[:nk] {
			key = append(key, *v)
		}
		w, ok := want[strings.Join(key, "\x00")]
		if !ok {
			t.Fatalf("%s: group %q not in PostgreSQL's answer", p.Measures[0].Quantile.Method, key)
		}
		for i, o := range p.Outputs {
			if o.Kind != OutputQuantile {
				continue
			}
			m := p.Measures[o.Measure]
			fs, _, _ := strings.Cut(*r[nk+o.Measure], ";")
			f, err := strconv.ParseFloat(fs, 64)
			if err != nil {
				t.Fatalf("summary %q: %v", *r[nk+o.Measure], err)
			}
			v := pgQuantileNumber(t, m, w[i])
			if math.Abs(f-v) > 1e-9*math.Max(1, math.Abs(v)) {
				t.Errorf("%s group %q %s: f = %v, PostgreSQL %v", m.Quantile.Method, key, o.Name, f, v)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no quantile summary was compared")
	}
}

// TestAudit_QuantileJoins is the neighbouring-database check of the smooth
// and ptr methods over every join shape (the exponential method's
// histograms are audited by TestAudit_Joins): D is the join database
// (within limits) and D' = D plus one adversarial unit in every protected
// table of the join (joinAdversary). Per group, with f, S, D the SQL's
// summaries, it asserts what the proofs of quantile_smooth.go use, with
// R = Quantile.Rows (max_rows_per_unit after the join, E for an elastic
// join):
//
//   - |f(D) − f(D')| ≤ S(D) and ≤ S(D') (S bounds the local sensitivity);
//   - S(D') ≤ e^β·S(D) and S(D) ≤ e^β·S(D') (β-smoothness);
//   - |D(D) − D(D')| ≤ 1 (the distance has sensitivity 1);
//   - at most Plan.MaxGroupsPerUnit groups change.
func TestAudit_QuantileJoins(t *testing.T) {
	cases, plans := joinQuantileGoldens(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(41, 43))
	db := joinDBs(t, ctx, rng, false)
	summaries := func(q rowQuerier, p *Plan) (map[string][][2]float64, error) {
		return orderStatSummaries(ctx, q, p)
	}
	shapes := map[string]int{}
	for i, gc := range cases {
		jdb := db(gc.ds)
		for _, method := range []string{QuantileSmooth, QuantilePTR} {
			p, err := withQuantilesTest(gc.ds, plans[i], method, 1, 1e-6, policy.MechanismLaplace)
			if err != nil {
				t.Fatal(err)
			}
			var qs []Measure
			for _, m := range p.Measures {
				if m.Kind == MeasureQuantile {
					qs = append(qs, m)
				}
			}
			shapes[p.Join.Shape]++
			d, err := summaries(jdb.conn, p)
			if err != nil {
				t.Fatalf("%s %s on D: %v", gc.name, method, err)
			}
			for run := 0; run < auditRuns; run++ {
				tx, err := jdb.conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				jdb.addAdversary(t, ctx, tx, rng, p.Join, 2_000_000+run)
				d2, err := summaries(tx, p)
				_ = tx.Rollback(ctx)
				if err != nil {
					t.Fatalf("%s %s on D': %v", gc.name, method, err)
				}
				checkOrderStatNeighbours(t, gc.name, method, qs, p.MaxGroupsPerUnit, d, d2)
			}
		}
	}
	for _, s := range []string{JoinPublic, JoinUnit, JoinKey} {
		if shapes[s] == 0 {
			t.Errorf("no quantile golden of join shape %s was audited", s)
		}
	}
	t.Logf("audited smooth and ptr summaries of %d join quantile goldens (shapes %v) × %d runs", len(cases), shapes, auditRuns)
}

// TestAudit_ElasticL1Saturated checks the direct L1 bound of elastic joins
// (join_l1.go) where it matters: on a database whose join values are
// filled to their declared multiplicities (every ward value has exactly
// m_A = 50 visits and m_B = 20 labs rows, one per unit), so that an added
// unit's rows push other rows out of the per-value truncation and change
// close to E joined rows. Grouped by a key with ten public values (L0 =
// min(E, 10) = 10), the change summed over groups must stay within L1 =
// E·M for every measure, including the quantile's histograms (the L1
// distance of the bucket counts); the largest observed fraction of L1 is
// logged, next to L0·L∞ = 10·L1, the bound the noise used before.
func TestAudit_ElasticL1Saturated(t *testing.T) {
	ds, err := policy.Load("testdata/clinic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Rewrite(ds, "SELECT v.kind, COUNT(*), SUM(l.result), MIN(v.cost) FROM visits v JOIN labs l ON v.ward_id = l.ward_id GROUP BY v.kind")
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxGroupsPerUnit != 10 || p.Join.Changed != 320 {
		t.Fatalf("L0 %d, E %d; want 10 and 320", p.MaxGroupsPerUnit, p.Join.Changed)
	}
	ctx, conn := freshConn(t, 2*time.Minute)
	setup := `CREATE TABLE visits (patient_id bigint, ward_id bigint, kind text, cost numeric);
CREATE TABLE labs (patient_id bigint, ward_id bigint, result float8);
SELECT setseed(0.5);
INSERT INTO visits SELECT w * 1000 + i, w, 'k' || floor(random() * 10)::int, round((random() * 100)::numeric, 2)
  FROM generate_series(1, 5) AS w, generate_series(1, 50) AS i;
INSERT INTO labs SELECT 100000 + w * 1000 + i, w, round((random() * 14 - 4)::numeric, 2)::float8
  FROM generate_series(1, 5) AS w, generate_series(1, 20) AS i;`
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatal(err)
	}
	base, err := runAudit(ctx, conn, p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(51, 53))
	worst := make([]float64, len(p.Measures))
	for run := 0; run < 8; run++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The added unit: 60 rows in each table on the saturated ward
		// values, with typical and extreme values.
		unit := 7_000_000 + run
		for r := 0; r < 60; r++ {
			w := 1 + rng.IntN(5)
			ins := fmt.Sprintf("INSERT INTO visits VALUES (%d, %d, 'k%d', %s); INSERT INTO labs VALUES (%d, %d, %s)",
				unit, w, rng.IntN(10), []string{"1e9", "-5", "50", "NULL"}[r%4], unit, w, []string{"'Infinity'", "-1e300", "3.5", "10"}[r%4])
			if _, err := tx.Exec(ctx, ins); err != nil {
				_ = tx.Rollback(ctx)
				t.Fatal(err)
			}
		}
		d2, err := runAudit(ctx, tx, p)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if bad := auditDiff(p, base, d2, 1); len(bad) > 0 {
			t.Fatalf("run %d: the saturated elastic join violates the declared sensitivity:\n  %s", run, strings.Join(bad, "\n  "))
		}
		// The L1 change of each measure, as a fraction of its L1 bound.
		pos := 0
		for i, m := range p.Measures {
			width := 1
			if m.Kind == MeasureQuantile {
				width = m.Quantile.Buckets
			}
			total := 0.0
			for k := range keysOf(base, d2) {
				for e := pos; e < pos+width; e++ {
					a, b := 0.0, 0.0
					if base[k] != nil {
						a, _ = base[k][e].Float64()
					}
					if d2[k] != nil {
						b, _ = d2[k][e].Float64()
					}
					total += math.Abs(b - a)
				}
			}
			pos += width
			worst[i] = math.Max(worst[i], total/m.L1)
		}
	}
	for i, m := range p.Measures {
		t.Logf("measure %d (%s %s): largest L1 change %.3g·L1 (L1 = E·M = %g; L0·L∞ = %g)", i, m.Kind, m.Column, worst[i], m.L1, float64(p.MaxGroupsPerUnit)*m.LInf)
	}
	// The saturated database makes the bound nearly tight for the
	// histogram (every changed joined row moves one bucket count): the
	// adversary changes far more than L1/L0 = E·M/10, so calibrating to
	// min(E, groups)·L∞ wasted a factor of about 10, not less.
	if worst[0] < 0.2 {
		t.Errorf("the adversary changed COUNT(*) by only %.3g·L1: the saturated database does not exercise the bound", worst[0])
	}
}

func keysOf(a, b auditResult) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
