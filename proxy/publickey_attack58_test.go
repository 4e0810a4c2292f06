package proxy

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// Attack round 58: a group key from a PUBLIC table's column.
//
// Rounds 55 and 56 made a key's released text the value's one text
// (pgemit/key_sql.go keyValueSQL): trim_scale for numeric, x + 0 for
// float, lower(x) for citext. The citext case is recognised by the
// column's live type, policy.Column.PGType, which internal/catalog.Verify
// fills in — for protected tables only: Verify skips every public table
// (`if t.Public { continue }`), so a public table's citext column (or one
// under a nondeterministic collation) is never checked and never gets
// PGType "citext". The joined relation copies the public table's columns
// as the policy has them (dpplan.JoinedTable), so keyValueSQL sees no
// citext and groups and releases the column as it stands: PostgreSQL
// merges 'Surgical' and 'SURGICAL' into one group and gives it the text
// of whichever joined row represents it — the row of the smallest unit
// in the emitted SQL's order. Which public row a person's visits join is
// that person's data.

// attack58Policy is the test policy (internal/testdata/hospital.yaml) with
// one more table, public: depts, with the given columns (YAML lines).
func attack58Policy(t *testing.T, columns ...string) *policy.Dataset {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	base, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "internal", "testdata", "hospital.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(base) + "\n  depts:\n    public: true\n    columns:\n"
	for _, c := range columns {
		text += "      " + c + "\n"
	}
	path := filepath.Join(t.TempDir(), "hospital.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// labelPolicy declares depts(department, label), label of type text with
// the given public values (none: a private key).
func labelPolicy(t *testing.T, labelValues string) *policy.Dataset {
	label := "label: {type: text}"
	if labelValues != "" {
		label = "label: {type: text, public_values: [" + labelValues + "]}"
	}
	return attack58Policy(t, "department: {type: text}", label)
}

// startRealDPPolicy is startRealDPOver (realdp_attack48_test.go) serving
// ds as the hospital dataset, checked against the data database by
// catalog.Verify as dpproxy serve checks it; shadowDDL creates the public
// table in the shadow catalog. It returns the data database's DSN too,
// and, when the policy does not fit the data database, Verify's problems
// (and no proxy): a fix that refuses the public table's column at
// start-up, as dpproxy serve would, makes these tests pass.
func startRealDPPolicy(t *testing.T, seed, shadowDDL []string, ds *policy.Dataset) (*realDP, string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := newRealBackends(t, ctx, seed)
	dataDSN, ledgerDSN, up, led, rel := b.dataDSN, b.ledgerDSN, b.up, b.led, b.rel
	dataConn, err := pgx.Connect(ctx, dataDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dataConn.Close(context.Background())
	problems, err := catalog.Verify(ctx, dataConn, ds)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		return nil, dataDSN, problems
	}
	shadow := shadowDB(t)
	if err := pgtest.Exec(ctx, shadow, shadowDDL...); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, serverOpts{shadowDSN: shadow, mutate: func(c *Config) {
		c.Releaser, c.Ledger = rel, led
		c.Datasets["hospital"].Policy = ds
		for _, d := range c.Datasets {
			d.Upstream = up
		}
	}})
	return &realDP{testServer: ts, ledgerDSN: ledgerDSN, led: led, rel: rel}, dataDSN, nil
}

// refusedAtStart reports whether catalog.Verify refused the policy for
// the public table depts (a fix: the proxy would not start), and fails
// the test on any other problem.
func refusedAtStart(t *testing.T, problems []string) bool {
	t.Helper()
	if len(problems) == 0 {
		return false
	}
	for _, p := range problems {
		if !strings.Contains(p, "depts") {
			t.Fatalf("the data database does not fit the policy: %q", problems)
		}
	}
	t.Logf("refused at start-up: %q", problems)
	return true
}

// deptShadow is depts in the shadow catalog.
var deptShadow = []string{`CREATE EXTENSION IF NOT EXISTS citext`, `CREATE TABLE depts (department text, label citext)`}

// deptSeed is the data of both tests: 2,000 patients with 3 surgery
// visits each; the public table depts maps department 'surgery' to the
// label written `even` and department 'surgery-b' to the label written
// `odd` (equal as citext). Patient 1000's visits are in 'surgery-b',
// everyone else's in 'surgery'.
func deptSeed(even, odd string) []string {
	return []string{
		`CREATE EXTENSION IF NOT EXISTS citext`,
		`CREATE TABLE depts (department text, label citext)`,
		`INSERT INTO depts VALUES ('surgery', '` + even + `'), ('surgery-b', '` + odd + `')`,
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END,
			(ARRAY['north','south','east','west','central'])[1 + p % 5] FROM generate_series(1, 2000) p`,
		`INSERT INTO visits (patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
			SELECT 1 + v % 2000, DATE '2020-01-01' + (v * 7) % 1800, 'surgery', 'D1', 1 + (v * 37) % 100, 10, (v * 13) % 60
			FROM generate_series(1, 6000) v`,
		`UPDATE visits SET department = 'surgery-b' WHERE patient_id = 1000`,
	}
}

// TestAttack58_PublicTableCitextPrivateKeyText (severity medium: G2 — a
// released private key's text is chosen by one person's row, at ε = ∞).
//
// depts is a public table whose label column is citext, declared
// `type: text` without public values (a private key: partition
// selection). The department 'surgery' is labelled 'Surgical', the
// department 'surgery-b' 'SURGICAL'; only patient 1000 has visits in
// 'surgery-b'. SELECT d.label, COUNT(*) FROM visits v JOIN depts d ON
// v.department = d.department WHERE v.patient_id >= N GROUP BY d.label
// releases one group (about 3,000 visits), under the text of its
// representative joined row, the smallest unit's: "SURGICAL" with N =
// 1000 (patient 1000 present), "Surgical" with N = 1001 (absent). The
// neighbours' released bytes differ with probability 1 at any ε: the
// key's text says whether patient 1000 is in the data and which
// department they visited.
//
// Suggested fix: internal/catalog.Verify checks public tables' columns
// too (types, deterministic collations) and sets their PGType and Scale,
// so that keyValueSQL lowers a citext key of a public table as it does a
// protected one (and the public values are checked to be in lower case).
func TestAttack58_PublicTableCitextPrivateKeyText(t *testing.T) {
	r, _, problems := startRealDPPolicy(t, deptSeed("Surgical", "SURGICAL"), deptShadow, labelPolicy(t, ""))
	if refusedAtStart(t, problems) {
		return
	}
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 1; SET dp.delta = 1e-7"); err != nil {
		t.Fatal(err)
	}
	released := func(from int) []string {
		return releasedKeys(t, pc, "SELECT d.label, COUNT(*) FROM visits v JOIN depts d ON v.department = d.department WHERE v.patient_id >= "+
			strconv.Itoa(from)+" GROUP BY d.label")
	}
	without := released(1001)
	with := released(1000)
	t.Logf("released labels: without patient 1000 %q, with %q (999 patients join 'Surgical', patient 1000 joins 'SURGICAL')", without, with)
	if len(with) == 0 || len(without) == 0 {
		t.Fatalf("partition selection kept no group (about 3,000 visits of 1,000 patients): with %q, without %q", with, without)
	}
	if strings.Join(with, ",") != strings.Join(without, ",") {
		t.Errorf("released labels %q with patient 1000, %q without: the text of the public row patient 1000's visits join (an ε = ∞ release of one person's data)", with, without)
	}
}

// TestAttack58_PublicTableCitextPublicKeyGroupVanishes (severity high: G1
// — one person's row decides whether a whole public group's measures are
// released, at ε = ∞).
//
// label has public values [surgical, other]. The emitted SQL keeps
// "label" IN ('surgical', 'other') (citext: case-insensitive), groups
// case-insensitively, and returns the group under its representative
// row's text, the first (unit, label) pair the per-unit aggregate hands
// on (its hash order, a function of the unit and lower(label)); release's
// collect looks that text up among the public values and silently drops
// a group whose text is not one of them. Department 'surgery' is labelled
// 'surgical', 'surgery-b' 'Surgical'. Every patient visits 'surgery'
// except P, the unit that comes first in that order (found on the data
// database with the same grouping), who visits 'surgery-b'. With P the
// group's text is "Surgical", it matches no public value, and the released
// surgical count is noise around 0; without P (P's rows deleted: the
// neighbouring database) it is "surgical" and the count about 5,997. One
// person moves a released count by about 6,000; at ε = 1 the count's
// Laplace noise has scale 10 (L1 = 2 groups × 5 rows), so telling the two
// apart by a threshold at 3,000 errs with probability below e^(−290).
//
// Suggested fix: as above (Verify public tables, lower citext keys of
// public tables, refuse nondeterministic collations there); and release
// the public constant a row matched, never the data's text (e.g. group by
// a CASE over the public values), so that no representation of a public
// key can miss its own domain.
func TestAttack58_PublicTableCitextPublicKeyGroupVanishes(t *testing.T) {
	r, dataDSN, problems := startRealDPPolicy(t, deptSeed("surgical", "Surgical"), deptShadow, labelPolicy(t, "surgical, other"))
	if refusedAtStart(t, problems) {
		return
	}
	ctx := context.Background()
	data, err := pgx.Connect(ctx, dataDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close(ctx)
	// deptSeed put patient 1000 in 'surgery-b': move everyone to
	// 'surgery', then find P, the unit the per-unit aggregate returns
	// first (the emitted SQL's inner GROUP BY dp_unit, dp_k0, whose hash
	// of a citext is that of its lower case, so P is the same whichever
	// label P's rows join).
	if _, err := data.Exec(ctx, `UPDATE visits SET department = 'surgery'`); err != nil {
		t.Fatal(err)
	}
	var p int64
	if err := data.QueryRow(ctx, `SELECT u FROM (SELECT v.patient_id AS u, d.label AS k FROM visits v JOIN depts d ON v.department = d.department
		WHERE v.patient_id IS NOT NULL GROUP BY 1, 2) x LIMIT 1`).Scan(&p); err != nil {
		t.Fatal(err)
	}
	if _, err := data.Exec(ctx, `UPDATE visits SET department = 'surgery-b' WHERE patient_id = $1`, p); err != nil {
		t.Fatal(err)
	}
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 1; SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	surgical := func() float64 {
		return releasedValue(t, pc, "SELECT d.label, COUNT(*) FROM visits v JOIN depts d ON v.department = d.department GROUP BY d.label", "surgical")
	}
	with := surgical()
	if _, err := data.Exec(ctx, `DELETE FROM visits WHERE patient_id = $1`, p); err != nil {
		t.Fatal(err)
	}
	without := surgical()
	t.Logf("released surgical count: with patient %d (labelled 'Surgical') %v, without %v (about 6,000 visits either way)", p, with, without)
	if with < 3000 || without < 3000 {
		t.Errorf("released surgical counts %v with patient %d, %v without: the whole group's count is dropped when its representative row, one person's, writes the public value in another case (one person moves a released count by about 6,000)", with, p, without)
	}
}

// TestAttack58_PublicTableTypeUncheckedErrorOnOneRow (severity low: G5 —
// whether a charged query is answered or fails depends on one person's
// row, at ε = ∞; the failure is an incident).
//
// internal/catalog exists so that "a column declared int that is numeric
// and holds a fraction for one person" is a start-up error, never a
// runtime error after the charge; it skips public tables. depts.factor is
// text in the database and type: numeric, bounds [0, 10] in the policy;
// the department 'surgery-b' has factor 'n/a'. SUM(d.factor) over visits
// JOIN depts emits d.factor::numeric per joined row: with patient 1000
// (the only visitor of 'surgery-b') the upstream query fails (22P02) after
// the charge and the analyst gets the incident's fixed error; without,
// an answer. The neighbours are told apart with probability 1.
//
// Suggested fix: catalog.Verify checks every public table's declared
// columns as it checks protected ones (the same accepts), so the
// mismatch is refused at start-up.
func TestAttack58_PublicTableTypeUncheckedErrorOnOneRow(t *testing.T) {
	seed := []string{
		`CREATE TABLE depts (department text, factor text)`,
		`INSERT INTO depts VALUES ('surgery', '2'), ('surgery-b', 'n/a')`,
		`INSERT INTO visits (patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
			SELECT 1 + v % 2000, DATE '2020-01-01' + (v * 7) % 1800, 'surgery', 'D1', 1 + (v * 37) % 100, 10, (v * 13) % 60
			FROM generate_series(1, 6000) v`,
		`UPDATE visits SET department = 'surgery-b' WHERE patient_id = 1000`,
	}
	shadow := []string{`CREATE TABLE depts (department text, factor text)`}
	r, _, problems := startRealDPPolicy(t, seed, shadow, attack58Policy(t, "department: {type: text}", "factor: {type: numeric, lower: 0, upper: 10}"))
	if refusedAtStart(t, problems) {
		return
	}
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}
	answer := func(from int) error {
		_, err := execAll(t, pc, "SELECT SUM(d.factor) FROM visits v JOIN depts d ON v.department = d.department WHERE v.patient_id >= "+strconv.Itoa(from))
		return err
	}
	without := answer(1001)
	with := answer(1000)
	t.Logf("without patient 1000: %v; with: %v", without, with)
	if (without == nil) != (with == nil) {
		t.Errorf("answered without patient 1000 (%v) but not with (%v), or the reverse: one person's row decides whether a charged query fails", without, with)
	}
}
