package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/jackc/pgx/v5"
)

// TestPolicyInit runs `dpproxy policy init` against a real PostgreSQL table
// of known data (one visit per patient, so the true quantiles are exact)
// and checks that the skeleton loads, types and the unit guess are right,
// every bound is marked for review, the proposed bounds are near the true
// quantiles, and the steward budget was charged.
func TestPolicyInit(t *testing.T) {
	dataDSN, ledgerDSN := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dataDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE visits (visit_id bigint PRIMARY KEY, patient_id bigint, age int,
		cost numeric(10,2), weight double precision, visit_date date, diagnosis text, urgent boolean, payload jsonb)`); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	ages, costs, weights := make([]float64, n), make([]float64, n), make([]float64, n)
	dates := make([]time.Time, n)
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows [][]any
	for i := 0; i < n; i++ {
		ages[i] = float64(i % 100)
		costs[i] = float64((i*7919)%500000) / 100 // 0 … 4999.99
		weights[i] = 40 + float64((i*31)%800)/10  // 40 … 119.9
		dates[i] = start.AddDate(0, 0, (i*13)%1826)
		rows = append(rows, []any{i + 1, i + 1, int(ages[i]), fmt.Sprintf("%.2f", costs[i]), weights[i], dates[i], "flu", i%2 == 0, nil})
	}
	for i := 0; i < 30; i++ { // rows without a unit: excluded
		rows = append(rows, []any{n + i + 1, nil, 500, "99999", 1e6, time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC), "x", true, nil})
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"visits"}, []string{"visit_id", "patient_id", "age", "cost", "weight", "visit_date", "diagnosis", "urgent", "payload"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "clinic.yaml")
	var stdout, stderr bytes.Buffer
	const eps = 2.0
	args := []string{"policy", "init", "--dsn", dataDSN, "--table", "visits", "--ledger", ledgerDSN, "--dataset", "clinic",
		"--steward-epsilon", "3", "--epsilon", strconv.FormatFloat(eps, 'g', -1, 64), "--out", out}
	if code := run(ctx, args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("policy init exit %d: %s", code, stderr.String())
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := policy.Load(out)
	if err != nil {
		t.Fatalf("the skeleton does not load: %v\n%s", err, text)
	}
	tb, ok := ds.Table("visits")
	if !ok || tb.UnitColumn != "patient_id" {
		t.Fatalf("unit column = %q, want patient_id\n%s", tb.UnitColumn, text)
	}
	wantTypes := map[string]policy.Type{"age": policy.TypeInt, "cost": policy.TypeNumeric, "weight": policy.TypeFloat, "visit_date": policy.TypeDate, "urgent": policy.TypeBool}
	for name, typ := range wantTypes {
		c, ok := tb.Column(name)
		if !ok || c.Type != typ || c.Hidden {
			t.Errorf("column %s = %+v, want visible type %s", name, c, typ)
		}
	}
	for _, name := range []string{"visit_id", "diagnosis", "payload"} {
		if c, ok := tb.Column(name); !ok || !c.Hidden {
			t.Errorf("column %s = %+v, want access: none", name, c)
		}
	}
	// max_rows is proposed as a comment the steward fills in; uncommented,
	// the skeleton still loads and declares it.
	uncommented := strings.Replace(string(text), "    # max_rows: 1000000 ", "    max_rows: 1000000 ", 1)
	if uncommented == string(text) {
		t.Errorf("no max_rows proposal in the skeleton:\n%s", text)
	} else if ds2, err := policy.Parse(strings.NewReader(uncommented), "clinic.yaml"); err != nil {
		t.Errorf("the skeleton with max_rows uncommented does not load: %v", err)
	} else if tb2, _ := ds2.Table("visits"); tb2.MaxRows != 1000000 {
		t.Errorf("max_rows uncommented = %d, want 1000000", tb2.MaxRows)
	}
	for _, line := range strings.Split(string(text), "\n") {
		if strings.Contains(line, "lower:") && !strings.Contains(line, "# REVIEW") {
			t.Errorf("bound not marked for review: %s", line)
		}
	}

	// Each of the 8 selections has ε = 2/8 = 0.25 over B ≤ 21,601
	// candidates with utility sensitivity Δu = 1.5: with probability
	// ≥ 1 − β the selected candidate's utility is within (2Δu/ε)·ln(B/β)
	// of the best (McSherry–Talwar); β = 1e-6 each, so this test fails
	// falsely with probability ≤ 8e-6.
	check := func(name string, xs []float64, bound float64, q float64, cands []float64) {
		u := utilities(histOf(xs, cands), q)
		best, j := math.Inf(-1), sort.SearchFloat64s(cands, bound)
		for _, x := range u {
			best = math.Max(best, x)
		}
		slack := 2 * release.BoundUtilitySensitivity / (eps / 8) * math.Log(float64(len(cands))/1e-6)
		if j == len(cands) || cands[j] != bound || u[j] < best-slack {
			t.Errorf("%s: bound %v has utility below the best %v by more than %v", name, bound, best, slack)
		}
	}
	for _, c := range []struct {
		name string
		xs   []float64
		int  bool
	}{{"age", ages, true}, {"cost", costs, false}, {"weight", weights, false}} {
		col, _ := tb.Column(c.name)
		cands := numberCandidates(c.int)
		check(c.name+" lower", c.xs, col.LowerNum, 0.01, cands)
		check(c.name+" upper", c.xs, col.UpperNum, 0.99, cands)
	}
	days := make([]float64, n)
	for i, d := range dates {
		days[i] = float64(d.Unix() / 86400)
	}
	dcands := dateDays()
	vd, _ := tb.Column("visit_date")
	check("visit_date lower", days, vd.LowerNum, 0.01, dcands)
	check("visit_date upper", days, vd.UpperNum+1, 0.99, dcands) // upper is the day before the chosen candidate

	// The steward budget was charged ε = 2 in the ledger, before reading.
	l, err := ledger.Open(ctx, ledgerDSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	budget := &policy.Dataset{Name: "clinic", Budget: policy.Budget{Epsilon: 3, Accountant: policy.AccountantPure}}
	st, err := l.Status(ctx, policy.StewardLedgerPrefix+"steward", budget)
	if err != nil || math.Abs(st.Spent.Epsilon-eps) > 1e-9 {
		t.Fatalf("steward status = %+v, %v; want %v spent", st, err, eps)
	}
	// `dpproxy budget show` and the dashboard show the steward's own limit
	// and method, not those of the policy served under the same dataset
	// name (new-user run: the steward's limit showed as the policy's 3).
	served := &policy.Dataset{Name: "clinic", Budget: policy.Budget{Epsilon: 10, Delta: 1e-6, Accountant: policy.AccountantRDP}}
	brows, err := l.Budgets(ctx, map[string]*policy.Dataset{"clinic": served}, "clinic", "")
	if err != nil {
		t.Fatal(err)
	}
	shown := false
	for _, b := range brows {
		if b.Analyst == policy.StewardLedgerPrefix+"steward" {
			shown = true
			if b.Status.Limit.Epsilon != 3 || b.Status.Accountant != policy.AccountantPure || math.Abs(b.Status.Spent.Epsilon-eps) > 1e-9 {
				t.Errorf("budget show's steward row = %+v, want limit 3, pure, %v spent", b.Status, eps)
			}
		}
	}
	if !shown {
		t.Errorf("no steward row in %+v", brows)
	}
	// Its charge is answered (the chosen candidates recorded), not left
	// "charged but unanswered" for `dpproxy ledger verify` to list.
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() || len(rep.Reserved) != 0 {
		t.Fatalf("ledger verify after policy init: %+v, %v; want clean, nothing left reserved", rep, err)
	}
	// A second run would exceed the steward's ε = 3: refused, no skeleton.
	stderr.Reset()
	if code := run(ctx, append(args[:len(args)-2], "--out", out+".2"), nil, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "budget") {
		t.Fatalf("second run: exit %d, stderr %q; want a budget refusal", code, stderr.String())
	}
	// Its hint names the flag that raises the steward's limit, not the
	// analysts' "ask the data steward" (a new user's run of 7 December).
	if msg := stderr.String(); !strings.Contains(msg, "--steward-epsilon 5") || strings.Contains(msg, "ask the data steward") {
		t.Errorf("second run's refusal %q: want a hint naming --steward-epsilon 5", msg)
	}
	if _, err := os.Stat(out + ".2"); err == nil {
		t.Fatalf("a refused run wrote a skeleton")
	}
}

func TestGuessUnit(t *testing.T) {
	for _, tc := range []struct {
		cols []initColumn
		want string
	}{
		{[]initColumn{{name: "visit_id", pk: true}, {name: "dept_id"}, {name: "patient_id"}}, "patient_id"},
		{[]initColumn{{name: "order_id", pk: true}, {name: "shop_id"}}, "shop_id"},
		{[]initColumn{{name: "patient_id", pk: true}, {name: "age"}}, "patient_id"},
		{[]initColumn{{name: "a"}, {name: "b"}}, "a"},
	} {
		if got, _ := guessUnit(tc.cols); got != tc.want {
			t.Errorf("guessUnit(%+v) = %s, want %s", tc.cols, got, tc.want)
		}
	}
}

// TestPolicyInit_Audited: with --config, policy init's charge of the
// steward budget and the limit it ran under reach the config's audit log,
// as an analyst's charges and a grant do (a new user's run of 7 December:
// three runs spent ε 1.5 and raised the limit with nothing audited).
func TestPolicyInit_Audited(t *testing.T) {
	cfgPath, dsn, _, _ := stewardSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(cfg, []byte("audit: {path: audit.log}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	// The ledger's database doubles as the data here: a small table.
	if err := pgtest.Exec(ctx, dsn, "CREATE TABLE visits (visit_id bigint PRIMARY KEY, patient_id bigint, age int)",
		"INSERT INTO visits SELECT g, g, g % 90 FROM generate_series(1, 500) g"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"policy", "init", "--dsn", dsn, "--table", "visits", "--config", cfgPath, "--dataset", "clinic",
		"--steward-epsilon", "2", "--epsilon", "0.5"}
	if code := run(ctx, args, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("policy init exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfgPath), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{`"action":"steward-limit","analyst":"steward","dataset":"clinic"`, `"event":"charge"`} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}
