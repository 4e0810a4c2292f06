package integration

// The black-box privacy auditor (issue 29, item 7; `make audit`, and a short
// run inside `make test`). It treats the proxy as an opaque mechanism: two
// neighbouring databases D and D′, which differ in all the rows of one
// adversarial unit, are served by a real `dpproxy serve` as two datasets
// with the same policy; the same query is released N times on each; a
// threshold event S over the released value is chosen on the first half of
// the releases and its frequencies on the second half give Clopper–Pearson
// limits p̂₁_lo ≤ P_D(S) and p̂₀_hi ≥ P_D′(S). An (ε, δ)-DP mechanism has
// P_D(S) ≤ e^ε·P_D′(S) + δ for every S, so
//
//	ε̂_lo = ln((p̂₁_lo − δ) / p̂₀_hi)
//
// is a lower bound on the ε the mechanism really spends, at the stated
// confidence (the method of Ding et al., "Detecting violations of
// differential privacy", CCS 2018; Jagielski et al., "Auditing
// differentially private machine learning", NeurIPS 2020; Nasr et al.,
// "Adversary instantiation", IEEE S&P 2021). The test fails when ε̂_lo
// exceeds the ε charged. Either orientation (D as "1", or D′) and either
// tail ({x ≥ c} or {x ≤ c}) may be chosen: the inequality holds for both
// (neighbouring is symmetric).
//
// False rejection. S is fixed by the first half, which is independent of
// the second; each Clopper–Pearson limit fails with probability ≤ α, so
// ε̂_lo exceeds the true privacy loss with probability ≤ 2α per audit.
// With α = 10⁻⁶ one audit fails falsely with probability ≤ 2·10⁻⁶, and the
// whole auditor (≤ 12 audits) with probability ≤ 2.4·10⁻⁵.
//
// Positive control. Every mechanism is also run with less noise than it
// claims (the same query at m·ε, audited against the claim ε; m per
// mechanism below), with the same N and the same procedure: the auditor
// must find ε̂_lo > ε there, or it is powerless and the test fails. The
// probability that a control is not caught (a false failure) is stated per
// mechanism next to its m.

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// auditAlpha is the one-sided level of each Clopper–Pearson limit.
const auditAlpha = 1e-6

// The audit policy: small bounds, so that one unit's most rows and
// largest values are a large part of each answer, and a budget no audit
// can exhaust (δ stays below 1: the policy requires it).
const auditPolicy = `dataset: %s
privacy_unit: person
budget: {epsilon: 100000000, delta: 0.99, accountant: pure}
defaults: {epsilon: 1, mechanism: laplace}
tables:
  obs:
    unit_column: unit_id
    max_groups_per_unit: 2
    max_rows_per_unit: 3
    columns:
      g: {type: text, public_values: [a, b, c, d, e]}
      k: {type: text}
      v: {type: int, lower: 0, upper: 10}
  people:
    unit_column: unit_id
    max_groups_per_unit: 1
    max_rows_per_unit: 1
    columns:
      age: {type: int, lower: 0, upper: 100}
`

// The two datasets: auditd holds the adversarial unit, auditn does not.
const auditD, auditN = "auditd", "auditn"

// The same two databases under the audit policy with min_units_per_cell
// 21: D has 21 units, D′ 20, so the adversary decides whether the one
// cell of an ungrouped query reaches the minimum.
const auditDK, auditNK = "auditdk", "auditnk"

// auditMinUnits is the minimum of the auditDK and auditNK datasets.
const auditMinUnits = 21

// auditBase is the data both databases hold: 20 ordinary units, one row
// each in obs (values 0..5 in groups a..e, private key "common") and in
// people.
var auditBase = []string{
	`CREATE TABLE obs (unit_id int, g text, k text, v int)`,
	`CREATE TABLE people (unit_id int, age int)`,
	`INSERT INTO obs SELECT i, chr(97 + i % 5), 'common', i % 6 FROM generate_series(1, 20) i`,
	`INSERT INTO people SELECT i, 30 + i FROM generate_series(1, 20) i`,
}

// auditAdversary is the unit only D holds: 40 rows in obs (13 times the
// 3 rows allowed per group, 20 times the 6 over all groups), spread over
// all 5 groups (2 allowed), every value 1000 (the bound is 10), half of them
// under a private key no other unit has; and one people row beyond its
// bound too.
var auditAdversary = []string{
	`INSERT INTO obs SELECT 0, chr(97 + j % 5), CASE WHEN j % 2 = 0 THEN 'secret' ELSE 'common' END, 1000 FROM generate_series(1, 40) j`,
	`INSERT INTO people VALUES (0, 1000)`,
}

// auditProxy is a `dpproxy serve` of the two audit datasets, whose data
// live in the demo's PostgreSQL and whose shadow catalogs in a cluster of
// the test's own. It returns the DSN maker for an analyst on a dataset.
func auditProxy(t *testing.T, ctx context.Context, analysts []string) func(analyst, dataset string) string {
	t.Helper()
	sh, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(t.TempDir(), "shadow"), NoFsync: true})
	if err != nil {
		t.Fatalf("start the shadow cluster: %v", err)
	}
	t.Cleanup(func() { _ = sh.Stop() })
	up, err := url.Parse(env.upstreamDSN)
	if err != nil {
		t.Fatal(err)
	}
	dataDSN := func(user, db string) string {
		u := *up
		u.User = url.User(user)
		u.Path = "/" + db
		return u.String()
	}
	super := up.User.Username()
	exec := func(dsn string, sqls ...string) {
		t.Helper()
		if err := pgtest.Exec(ctx, dsn, sqls...); err != nil {
			t.Fatal(err)
		}
	}
	exec(dataDSN(super, "postgres"), `DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'audit_reader') THEN
		CREATE ROLE audit_reader LOGIN; END IF; END$$`, `ALTER ROLE audit_reader SET default_transaction_read_only = on`)
	exec(sh.DSN("postgres"), "CREATE ROLE audit_shadow_owner LOGIN", "CREATE ROLE audit_shadow LOGIN")
	dir := t.TempDir()
	datasets := map[string]any{}
	for _, db := range []string{auditD, auditN, auditDK, auditNK} {
		exec(dataDSN(super, "postgres"), "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db)
		t.Cleanup(func() {
			_ = pgtest.Exec(context.Background(), dataDSN(super, "postgres"), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		})
		exec(dataDSN(super, db), auditBase...)
		if db == auditD || db == auditDK {
			exec(dataDSN(super, db), auditAdversary...)
		}
		exec(dataDSN(super, db), `GRANT SELECT (unit_id, g, k, v) ON obs TO audit_reader`, `GRANT SELECT (unit_id, age) ON people TO audit_reader`)
		exec(sh.DSN("postgres"), "CREATE DATABASE "+db+" OWNER audit_shadow_owner", "REVOKE ALL ON DATABASE "+db+" FROM PUBLIC",
			"GRANT CONNECT ON DATABASE "+db+" TO audit_shadow")
		exec(sh.DSN(db), "REVOKE ALL ON SCHEMA public FROM PUBLIC", "ALTER SCHEMA public OWNER TO audit_shadow_owner")
		pol := fmt.Sprintf(auditPolicy, db)
		if db == auditDK || db == auditNK {
			pol = strings.Replace(pol, "privacy_unit: person\n", fmt.Sprintf("privacy_unit: person\nmin_units_per_cell: %d\n", auditMinUnits), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, db+".yaml"), []byte(pol), 0o600); err != nil {
			t.Fatal(err)
		}
		datasets[db] = map[string]any{
			"upstream":     dataDSN("audit_reader", db),
			"shadow":       sh.RoleDSN("audit_shadow", "", db),
			"shadow_admin": sh.RoleDSN("audit_shadow_owner", "", db),
		}
	}
	cfgPath, addr := extraConfigWith(t, func(cfg map[string]any) {
		cfg["policies"] = dir
		cfg["datasets"] = datasets
		as := map[string]any{}
		for _, a := range analysts {
			as[a] = map[string]any{"password": "plain:" + a}
		}
		cfg["analysts"] = as
		delete(cfg, "rate_limit")
	})
	p := startProxy(t, cfgPath, addr)
	return func(analyst, dataset string) string {
		return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", analyst, analyst, p.addr, dataset)
	}
}

// auditMech is one mechanism under audit: a query, the session settings it
// runs under at a given (ε, δ), the (ε, δ) one release is charged, and the
// statistic read from its released rows.
type auditMech struct {
	name  string
	query string
	// settings returns the SET statements for a run at (ε, δ).
	settings func(eps, delta float64) string
	eps      float64 // the ε one release is charged (and claimed)
	delta    float64 // the δ one release is charged (and claimed)
	// The positive control runs at (ctlEps, ctlDelta) and is audited
	// against (eps, delta); ctlEpsFull replaces ctlEps when N ≥ 2000
	// (make audit), where a smaller excess is caught. ctlPer > 0 limits
	// the control's releases per analyst (its δ would exceed a budget).
	ctlEps, ctlEpsFull, ctlDelta float64
	ctlPer                       int
	// ctlMaxN caps the control's N (0: N), where a pool of analysts makes
	// each release cost a connection.
	ctlMaxN int
	// short: part of the short run inside make test.
	short bool
	stat  func(rows [][]string) (float64, error)
	// dbs, when set, are the two databases (D, D′) to audit on, in place
	// of auditD and auditN.
	dbs [2]string
}

// controlN is the control's N when the audit's is n.
func (m auditMech) controlN(n int) int {
	if m.ctlMaxN > 0 {
		return min(n, m.ctlMaxN)
	}
	return n
}

// dpSet are the settings of a release at (ε, δ) whose whole ε goes to the
// one measure the statistic reads: no bias estimate (it would take part of
// ε), the policy's contribution bounds (not chosen per query, which would
// also take part of ε), no answer cache.
func dpSet(extra string) func(float64, float64) string {
	return func(eps, delta float64) string {
		return fmt.Sprintf("SET dp.epsilon = %g; SET dp.delta = %g; SET dp.cache = off; SET dp.bias = off; SET dp.contribution = fixed; %s", eps, delta, extra)
	}
}

// oneValue is the statistic of a one-row, one-column answer.
func oneValue(rows [][]string) (float64, error) {
	if len(rows) != 1 || len(rows[0]) != 1 {
		return 0, fmt.Errorf("want one value, got %d rows", len(rows))
	}
	return strconv.ParseFloat(rows[0][0], 64)
}

// groupTotal is the total of the count column over the 5 public groups (a
// post-processing of the release).
func groupTotal(rows [][]string) (float64, error) {
	if len(rows) != 5 {
		return 0, fmt.Errorf("want the 5 public groups, got %d rows", len(rows))
	}
	var s float64
	for _, r := range rows {
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			return 0, err
		}
		s += v
	}
	return s, nil
}

// cellReleased is 1 when the one cell of an ungrouped answer is released,
// 0 when min_units_per_cell suppressed it (NULL).
func cellReleased(rows [][]string) (float64, error) {
	if len(rows) != 1 || len(rows[0]) != 1 {
		return 0, fmt.Errorf("want one value, got %d rows", len(rows))
	}
	if rows[0][0] == "" {
		return 0, nil
	}
	return 1, nil
}

// secretReleased is 1 when the private key only the adversary has was
// released, else 0.
func secretReleased(rows [][]string) (float64, error) {
	for _, r := range rows {
		if r[0] == "secret" {
			return 1, nil
		}
	}
	return 0, nil
}

// auditMechanisms are the mechanisms under audit. For each, the adversarial
// unit of D (auditAdversary) is built to move the answer by the most one
// unit may after bounding: the charge is honest only if the bounding holds.
//
// Positive controls. For a Laplace mechanism of privacy loss ε_r the best
// event {x ≥ f(D)} has P_D = ½ and P_D′ = ½e^{−ε_r}. The Laplace count's
// control was simulated through auditSamples with the exact discrete
// Laplace law (Δ = 6, scale 6/ε_r): at N = 400 and ε_r = 4 (the short
// run) none of 2000 simulated audits missed, median ε̂_lo 1.73, smallest
// 1.27; at N = 2000 and ε_r = 2 (make audit) none of 1000 missed, median
// 1.38, smallest 1.08. So a control is missed with probability well under
// 10⁻³ (the 95% upper limit of 0 in 2000 is 1.5·10⁻³; the margins of
// several standard errors put it far lower). The other mechanisms lose
// less per release than their charge (the Gaussian's loss exceeds ε only
// with probability δ; an average, a quantile or a noisy total over groups
// spends part of its ε where the adversary does not move the statistic)
// and get larger multiples, chosen from measured runs whose ε̂_lo lay at
// least 0.25 above the claim (docs/TESTING.md, "The privacy auditor").
func auditMechanisms() []auditMech {
	return []auditMech{
		{
			// L1 = L0·L∞ = 2·3 = 6 rows over all groups of an ungrouped
			// count; the adversary has 40 rows. Integer-mode discrete Laplace.
			name: "laplace count", query: "SELECT COUNT(*) FROM obs", short: true,
			settings: dpSet(""), eps: 1, ctlEps: 4, ctlEpsFull: 2, stat: oneValue,
		},
		{
			// 6 rows of at most 10: L1 = 60; the adversary's rows are 1000.
			name: "laplace sum", query: "SELECT SUM(v) FROM obs", short: true,
			settings: dpSet(""), eps: 1, ctlEps: 4, ctlEpsFull: 2, stat: oneValue,
		},
		{
			name: "count distinct", query: "SELECT COUNT(DISTINCT unit_id) FROM obs",
			settings: dpSet(""), eps: 1, ctlEps: 4, ctlEpsFull: 2, stat: oneValue,
		},
		{
			// The short run's control at 40ε: at 12ε it escaped once in
			// CI (ε̂_lo 0.92 at N = 400); at 40ε the discrete Gaussian's σ
			// is about 0.5 rows against the neighbours' difference of 6,
			// so both halves separate all but a vanishing share of draws
			// and ε̂_lo ≈ ln(0.933/0.067) ≈ 2.6 (Clopper–Pearson at
			// α = 10⁻⁶, 200 per half).
			name: "gaussian count", query: "SELECT COUNT(*) FROM obs", short: true,
			settings: dpSet("SET dp.mechanism = gaussian;"), eps: 1, delta: 1e-5, ctlEps: 40, ctlEpsFull: 6, ctlDelta: 1e-5, stat: oneValue,
		},
		{
			name: "avg", query: "SELECT AVG(v) FROM obs",
			settings: dpSet(""), eps: 1, ctlEps: 8, ctlEpsFull: 4, stat: oneValue,
		},
		{
			name: "quantile (p90)", query: "SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY v) FROM obs",
			settings: dpSet(""), eps: 1, ctlEps: 16, ctlEpsFull: 16, stat: oneValue,
		},
		{
			// Both rows of one person: bounded after the join.
			name: "join count", query: "SELECT COUNT(*) FROM obs JOIN people ON obs.unit_id = people.unit_id", short: true,
			settings: dpSet(""), eps: 1, ctlEps: 4, ctlEpsFull: 2, stat: oneValue,
		},
		{
			// Five public groups, two allowed per unit: the adversary is in
			// all five.
			name: "grouped count (5 groups > L0)", query: "SELECT g, COUNT(*) FROM obs GROUP BY g",
			settings: dpSet(""), eps: 1, ctlEps: 8, ctlEpsFull: 4, stat: groupTotal,
		},
		{
			// min_units_per_cell 21 on 21 units (D) or 20 (D′): whether the
			// cell is released is post-processing of the noisy unit count
			// (L1 = 1 ungrouped, ε/2 of the query: COUNT(*) and the unit
			// count share it), so P_D/P_D′ ≤ e^{0.5}. The control at 8ε
			// (the count's ε 4, discrete Laplace scale 1/4): P_D(released)
			// = 1/(1 + e^{−4}) ≈ 0.98 against e^{−4} of it ≈ 0.018 on D′,
			// ε̂_lo ≈ ln(0.93/0.08) ≈ 2.4 at N = 400 (Clopper–Pearson at
			// α = 10⁻⁶, 200 per half); at 4ε (N = 2000) 0.88 against
			// 0.12, ε̂_lo ≈ 1.6. A miss needs several standard errors.
			name: "min units suppression", query: "SELECT COUNT(*) FROM obs", short: true,
			settings: dpSet(""), eps: 1, ctlEps: 8, ctlEpsFull: 4, stat: cellReleased, dbs: [2]string{auditDK, auditNK},
		},
		{
			// A group only the adversary has: released with probability at
			// most δ. On D′ it cannot appear (p̂₀_hi = 1 − α^{1/n}), so
			// ε̂_lo is finite only when P_D(S) is well above δ. The control
			// runs at δ = 0.9 (claimed 10⁻⁴): each analyst's δ budget (below
			// 1) allows one such release, so the control uses a pool of
			// analysts, one connection each, and at most 400 releases per
			// database (measured P_D(S) ≈ 0.44: ε̂_lo ≈ 1.4, where 60 of 200
			// releases would reach the claim; 87 is 3.8 standard errors above).
			name: "partition selection", query: "SELECT k, COUNT(*) FROM obs GROUP BY k",
			settings: dpSet(""), eps: 1, delta: 1e-4, ctlEps: 1, ctlEpsFull: 1, ctlDelta: 0.9, ctlPer: 1, ctlMaxN: 400, stat: secretReleased,
		},
	}
}

// auditReleases is the N of each run (per database): AUDIT_RELEASES, or
// the short run's default.
func auditReleases(t *testing.T, short int) int {
	t.Helper()
	if s := os.Getenv("AUDIT_RELEASES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 20 {
			t.Fatalf("AUDIT_RELEASES = %q: want a whole number ≥ 20", s)
		}
		return n
	}
	return short
}

// releaseMany sends query n times, batch statements per simple-protocol
// message, on one connection per DSN of dsns in turn, each for at most per
// releases (an analyst's δ budget may allow only a few), and returns the
// statistic of each answer.
func releaseMany(ctx context.Context, dsns []string, per int, settings, query string, n int, stat func([][]string) (float64, error)) ([]float64, error) {
	out := make([]float64, 0, n)
	for _, dsn := range dsns {
		if len(out) == n {
			break
		}
		got, err := releaseOn(ctx, dsn, settings, query, min(per, n-len(out)), stat)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%s: %d releases, want %d: too few analysts", query, len(out), n)
	}
	return out, nil
}

// releaseOn sends query n times on one connection to dsn.
func releaseOn(ctx context.Context, dsn, settings, query string, n int, stat func([][]string) (float64, error)) ([]float64, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	if _, err := c.PgConn().Exec(ctx, settings).ReadAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", settings, err)
	}
	const batch = 50
	out := make([]float64, 0, n)
	for len(out) < n {
		k := min(batch, n-len(out))
		sql := strings.Repeat(query+";", k)
		res, err := c.PgConn().Exec(ctx, sql).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", query, err)
		}
		if len(res) != k {
			return nil, fmt.Errorf("%s: %d results for %d statements", query, len(res), k)
		}
		for _, r := range res {
			rows := make([][]string, 0, len(r.Rows))
			for _, row := range r.Rows {
				var s []string
				for _, v := range row {
					s = append(s, string(v))
				}
				rows = append(rows, s)
			}
			x, err := stat(rows)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", query, err)
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// auditResult is one audit's outcome.
type auditResult struct {
	epsLo     float64 // ε̂_lo on the second half
	event     string  // the chosen S
	k1, k0, n int     // its counts on the second half (n releases per database)
}

// runAudit releases m's query n times on D and on D′ at (eps, delta),
// concurrently (one connection at a time per database), by the analysts of
// the pool in turn (per releases each), and audits the samples against
// m's claim (m.eps, m.delta).
func runAudit(t *testing.T, ctx context.Context, dsn func(string, string) string, pool []string, per int, m auditMech, eps, delta float64, n int) auditResult {
	t.Helper()
	var wg sync.WaitGroup
	var samples [2][]float64
	var errs [2]error
	dbs := []string{auditD, auditN}
	if m.dbs[0] != "" {
		dbs = m.dbs[:]
	}
	for i, db := range dbs {
		var dsns []string
		for _, a := range pool {
			dsns = append(dsns, dsn(a, db))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples[i], errs[i] = releaseMany(ctx, dsns, per, m.settings(eps, delta), m.query, n, m.stat)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("%s at ε = %g, δ = %g: %v", m.name, eps, delta, err)
		}
	}
	return auditSamples(samples[0], samples[1], m.delta)
}

// auditSamples chooses S on the first half of each sample (the event with
// the largest ε̂_lo there) and returns ε̂_lo of S on the second half.
func auditSamples(d, dn []float64, delta float64) auditResult {
	h := min(len(d), len(dn)) / 2
	d1, d2, n1, n2 := d[:h], d[h:2*h], dn[:h], dn[h:2*h]
	type event struct {
		c     float64
		upper bool // S = {x ≥ c}, else {x ≤ c}
		dIsP1 bool // P_D(S) is the numerator
	}
	count := func(xs []float64, e event) int {
		k := 0
		for _, x := range xs {
			if (e.upper && x >= e.c) || (!e.upper && x <= e.c) {
				k++
			}
		}
		return k
	}
	score := func(a, b []float64, e event, exact bool) (float64, int, int) {
		p1s, p0s := a, b
		if !e.dIsP1 {
			p1s, p0s = b, a
		}
		k1, k0 := count(p1s, e), count(p0s, e)
		return epsLowerBound(k1, k0, len(p1s), delta, exact), k1, k0
	}
	// Candidate thresholds: up to 400 quantiles of the pooled first half.
	pool := append(append([]float64(nil), d1...), n1...)
	sort.Float64s(pool)
	var cands []float64
	step := max(1, len(pool)/400)
	for i := 0; i < len(pool); i += step {
		if len(cands) == 0 || pool[i] != cands[len(cands)-1] {
			cands = append(cands, pool[i])
		}
	}
	best, bestScore := event{}, math.Inf(-1)
	for _, c := range cands {
		for _, upper := range []bool{true, false} {
			for _, dIsP1 := range []bool{true, false} {
				e := event{c, upper, dIsP1}
				if s, _, _ := score(d1, n1, e, false); s > bestScore {
					best, bestScore = e, s
				}
			}
		}
	}
	lo, k1, k0 := score(d2, n2, best, true)
	first, second := "D", "D′"
	if !best.dIsP1 {
		first, second = second, first
	}
	op := "≥"
	if !best.upper {
		op = "≤"
	}
	return auditResult{epsLo: lo, event: fmt.Sprintf("x %s %.6g (P1 on %s, P0 on %s)", op, best.c, first, second), k1: k1, k0: k0, n: h}
}

// epsLowerBound is ln((p̂₁_lo − δ)/p̂₀_hi) for k1 and k0 hits out of n each:
// exact Clopper–Pearson limits at level auditAlpha when exact, else
// (for choosing S) the Wilson score limits, which are faster.
func epsLowerBound(k1, k0, n int, delta float64, exact bool) float64 {
	var lo, hi float64
	if exact {
		lo, hi = cpLower(k1, n, auditAlpha), cpUpper(k0, n, auditAlpha)
	} else {
		lo, _ = wilson(k1, n)
		_, hi = wilson(k0, n)
	}
	if lo-delta <= 0 {
		return math.Inf(-1)
	}
	return math.Log((lo - delta) / hi)
}

// wilson is the Wilson score interval at z = 4.75 (two-sided 2·10⁻⁶).
func wilson(k, n int) (float64, float64) {
	const z = 4.75
	p, nf := float64(k)/float64(n), float64(n)
	c := (p + z*z/(2*nf)) / (1 + z*z/nf)
	w := z / (1 + z*z/nf) * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return math.Max(0, c-w), math.Min(1, c+w)
}

// binomTailGE is P(Bin(n, p) ≥ k), summed term by term in log space.
func binomTailGE(n, k int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	lgN, _ := math.Lgamma(float64(n + 1))
	var s float64
	for i := k; i <= n; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		term := math.Exp(lgN - a - b + float64(i)*lp + float64(n-i)*lq)
		s += term
		if term < s*1e-17 && float64(i) > float64(n)*p {
			break
		}
	}
	return math.Min(1, s)
}

// cpLower is the Clopper–Pearson lower limit: the p with
// P(Bin(n, p) ≥ k) = α (0 for k = 0). The tail grows with p, so bisection.
func cpLower(k, n int, alpha float64) float64 {
	if k == 0 {
		return 0
	}
	lo, hi := 0.0, 1.0
	for i := 0; i < 100; i++ {
		mid := (lo + hi) / 2
		if binomTailGE(n, k, mid) < alpha {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo // the limit is at least lo: conservative side
}

// cpUpper is the Clopper–Pearson upper limit: the p with
// P(Bin(n, p) ≤ k) = α (1 for k = n), by symmetry the complement of
// cpLower for n − k failures.
func cpUpper(k, n int, alpha float64) float64 {
	if k >= n {
		return 1
	}
	return 1 - cpLower(n-k, n, alpha)
}

// TestAudit_EmpiricalEpsilon is the black-box auditor: for every mechanism
// of auditMechanisms, N releases on D and on D′ at the charged (ε, δ), whose
// ε̂_lo must not exceed the charge (false rejection ≤ 2·10⁻⁶ per mechanism),
// and N releases of the positive control, whose ε̂_lo must exceed the claim
// (miss probability stated at auditMechanisms). N is AUDIT_RELEASES (`make
// audit`: 2000 by default, every mechanism) or, in the short run of `make
// test`, 400 for the mechanisms marked short; AUDIT_ONLY selects the
// mechanisms whose name contains it.
func TestAudit_EmpiricalEpsilon(t *testing.T) {
	requireDemo(t)
	n := auditReleases(t, 400)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(10+n/20)*time.Minute)
	defer cancel()
	mechs := auditMechanisms()
	if os.Getenv("AUDIT_RELEASES") == "" {
		var sel []auditMech
		for _, m := range mechs {
			if m.short {
				sel = append(sel, m)
			}
		}
		mechs = sel
	}
	if only := os.Getenv("AUDIT_ONLY"); only != "" {
		var sel []auditMech
		for _, m := range mechs {
			if strings.Contains(m.name, only) {
				sel = append(sel, m)
			}
		}
		mechs = sel
	}
	// One analyst per mechanism and run, and a pool for controls whose
	// releases each analyst's δ budget limits.
	var analysts []string
	pools := map[string][2][]string{}
	for i, m := range mechs {
		mainA, ctlA := []string{fmt.Sprintf("audit%d", i)}, []string{fmt.Sprintf("audit%dc", i)}
		if m.ctlPer > 0 {
			ctlA = nil
			for j := 0; j < (m.controlN(n)+m.ctlPer-1)/m.ctlPer; j++ {
				ctlA = append(ctlA, fmt.Sprintf("audit%dc%d", i, j))
			}
		}
		pools[m.name] = [2][]string{mainA, ctlA}
		analysts = append(append(analysts, mainA...), ctlA...)
	}
	dsn := auditProxy(t, ctx, analysts)
	for _, m := range mechs {
		t.Run(strings.ReplaceAll(m.name, " ", "_"), func(t *testing.T) {
			start := time.Now()
			ctlEps := m.ctlEps
			if n >= 2000 {
				ctlEps = m.ctlEpsFull
			}
			main := runAudit(t, ctx, dsn, pools[m.name][0], n, m, m.eps, m.delta, n)
			per := n
			if m.ctlPer > 0 {
				per = m.ctlPer
			}
			ctl := runAudit(t, ctx, dsn, pools[m.name][1], per, m, ctlEps, m.ctlDelta, m.controlN(n))
			t.Logf("%s: N = %d per database and run, charged ε = %g, δ = %g: ε̂_lo = %.3f (S: %s, %d vs %d of %d); control (N = %d) at ε = %g, δ = %g claimed ε = %g, δ = %g: ε̂_lo = %.3f (S: %s, %d vs %d of %d); %s",
				m.name, n, m.eps, m.delta, main.epsLo, main.event, main.k1, main.k0, main.n,
				m.controlN(n), ctlEps, m.ctlDelta, m.eps, m.delta, ctl.epsLo, ctl.event, ctl.k1, ctl.k0, ctl.n, time.Since(start).Round(time.Millisecond))
			if main.epsLo > m.eps {
				t.Errorf("%s: PRIVACY VIOLATION: empirical ε lower bound %.3f exceeds the charged ε = %g (event %s)", m.name, main.epsLo, m.eps, main.event)
			}
			if ctl.epsLo <= m.eps {
				t.Errorf("%s: the auditor is powerless: the positive control (run at ε = %g, δ = %g, claimed ε = %g, δ = %g) was not caught, ε̂_lo = %.3f", m.name, ctlEps, m.ctlDelta, m.eps, m.delta, ctl.epsLo)
			}
		})
	}
}
