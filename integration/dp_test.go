package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// laplaceBound returns k such that a discrete Laplace variable of scale b
// exceeds k in absolute value with probability at most p:
// P(|Z| ≥ k) ≤ 2·e^{−k/b}, so k = b·ln(2/p).
func laplaceBound(b, p float64) float64 { return b * math.Log(2/p) }

func TestDemo_Contract(t *testing.T) {
	requireDemo(t)
	if want := regexp.MustCompile(`^postgres://alice:alice@127\.0\.0\.1:\d+/hospital$`); !want.MatchString(env.aliceDSN) {
		t.Fatalf("ready: line = %q, want %s", env.aliceDSN, want)
	}
	if want := regexp.MustCompile(`^postgres://postgres@127\.0\.0\.1:\d+/hospital$`); !want.MatchString(env.upstreamDSN) {
		t.Fatalf("upstream: line = %q, want %s", env.upstreamDSN, want)
	}
	// The steward's upstream DSN works with psql and shows the demo data.
	out, errOut, code := psql(t, env.upstreamDSN, "-A", "-t", "-c", "SELECT (SELECT count(*) FROM patients), (SELECT count(*) FROM visits)")
	if code != 0 || strings.TrimSpace(out) != "50000|200000" {
		t.Fatalf("psql upstream = %q (stderr %q, exit %d), want 50000|200000", out, errOut, code)
	}
}

func TestPsql_GroupedQuery(t *testing.T) {
	requireDemo(t)
	out, errOut, code := psql(t, env.aliceDSN, "-A", "-F", "|", "-c",
		"SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department")
	if code != 0 {
		t.Fatalf("psql exit %d: %s", code, errOut)
	}
	// The query's ε 0.1: a tenth (0.01) for choosing the rows per patient
	// (the demo's dp.contribution = auto), a tenth of the rest (0.009)
	// for the bias estimate, and the rest split over its 3 measurements:
	// the count rests on one (0.027), the average on two (0.054), with
	// each department's half-width (release/autobounds.go, bias.go).
	if !regexp.MustCompile(`(?m)NOTICE:  00000: dp: epsilon 0\.1 spent \(pure\), [0-9.]+ of 3 remaining; 95% error ±[0-9.]+ \(count, epsilon 0\.027\), ±[0-9.]+ \(avg, epsilon 0\.054; per group: cardiology ±[0-9.]+, emergency ±[0-9.]+, .* surgery ±[0-9.]+\)(?:; avg: [a-z, ]+ came out at an edge of the range \(noise, or a true value near that edge\), each saying only that the average lies in \[0, 20000\])?; contribution bounding removed, or clamping changed, about [0-9.e+]+ rows \([0-9.]+% of the rows read, ±[0-9.e+]+, epsilon 0\.009\)(?:, which the noise cannot tell from none)?; the intervals cover the bounded answer; rows per unit: at most [0-9]+ in each group and [0-9]+ in all \(chosen by DP among 1, 2, 3, 4, 6, 8, 20, epsilon 0\.01\)$`).MatchString(errOut) {
		t.Fatalf("psql stderr = %q, want the dp NOTICE", errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "department|count|avg" {
		t.Fatalf("header = %q", lines[0])
	}
	// Every public department is released, and only those.
	want := []string{"cardiology", "emergency", "neurology", "oncology", "orthopedics", "pediatrics", "surgery"}
	if len(lines) != len(want)+2 { // header, rows, "(7 rows)"
		t.Fatalf("psql output = %q", out)
	}
	for i, w := range want {
		f := strings.Split(lines[i+1], "|")
		if len(f) != 3 || f[0] != w {
			t.Fatalf("row %d = %q, want department %s", i, lines[i+1], w)
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err != nil || n < 0 {
			t.Fatalf("count %q is not a non-negative integer", f[1])
		}
		if a, err := strconv.ParseFloat(f[2], 64); err != nil || a < 0 || a > 20000 {
			t.Fatalf("avg %q is not within the policy bounds", f[2])
		}
	}
}

// TestPgx_CountsCloseToTruth sends powerQuery 10 times under the Laplace
// mechanism (500 draws of each measure) and tests each measure's noise
// against the scale of the published formulas (ε = 0.3 split over 3
// measures: ε_m = 0.1; one patient changes one group: L0 = 1):
//
//   - COUNT(*): L1 = 1, discrete Laplace of scale t = 1/ε_m = 10;
//   - SUM(birth_year) (int, clamped to [1940, 1990]): L1 = 1990, on the
//     real grid like every sum (a unit's sum may be weighted,
//     dpplan/bounds.go);
//   - SUM(birth_year * 0.5) (real): L1 = 995, s = L1/ε_m, grid
//     r = 2^(⌊log₂ s⌋ − 39), scale (L1 + r)/(r·ε_m) grid steps (Google's
//     secure noise; noise/doc.go).
//
// scaleTest states the false rejection (≤ 10⁻⁶ per measure) and the power
// (half or double the scale caught with probability > 1 − 10⁻⁶; no noise
// always). Unclamped sums are caught too (their "noise" is biased by the
// clamped-away mass), and an accountant that charged less than 10 × 0.3.
func TestPgx_CountsCloseToTruth(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const analyst = "power_laplace"
	p := powerProxy(t, analyst)
	truth := powerTruth(t, ctx)
	c := connect(t, ctx, p.dsn(analyst))
	const eps, queries = 0.3, 10
	// dp.bias = off: the three measures share ε exactly (with the bias
	// estimate each would get 0.09, and a scale off by 11% would pass).
	textRows(t, ctx, c, fmt.Sprintf("SET dp.epsilon = %g; SET dp.cache = off; SET dp.bias = off", eps))
	epsM := eps / 3
	realGrid, realScale := realLaplaceGrid((powerUpper/2)/epsM, powerUpper/2, epsM)
	intGrid, intScale := realLaplaceGrid(powerUpper/epsM, powerUpper, epsM)
	one := big.NewRat(1, 1)
	noise := collectNoise(t, ctx, c, truth, [3]*big.Rat{one, intGrid, realGrid}, queries)
	scaleTest(t, "laplace count", laplaceFamily, 1/epsM, noise[0])
	scaleTest(t, "laplace sum (integer column)", laplaceFamily, intScale, noise[1])
	scaleTest(t, "laplace sum (real)", laplaceFamily, realScale, noise[2])
	checkSpent(t, ctx, c, queries*eps, 0)
}

// realLaplaceGrid returns the real-mode grid r = 2^(⌊log₂ s⌋ − 39) for the
// continuous scale s, and the discrete Laplace scale (l1 + r)/(r·ε) in grid
// steps (one changed cell).
func realLaplaceGrid(s, l1, eps float64) (*big.Rat, float64) {
	_, e := math.Frexp(s) // s = f·2^e, f in [½, 1): ⌊log₂ s⌋ = e − 1
	r := math.Ldexp(1, e-1-39)
	return new(big.Rat).SetFloat64(r), (l1 + r) / (r * eps)
}

func TestPsql_RawRowsRefused(t *testing.T) {
	requireDemo(t)
	for _, q := range []string{
		"SELECT * FROM visits",
		"SELECT patient_id, cost FROM visits",
		"SELECT cost FROM visits LIMIT 5",
	} {
		out, errOut, code := psql(t, env.aliceDSN, "-c", q)
		if code == 0 || out != "" {
			t.Fatalf("%s: exit %d, stdout %q; want a refusal", q, code, out)
		}
		if !strings.Contains(errOut, "ERROR:  42501: ") || !strings.Contains(errOut, "only aggregate queries are answered") || !strings.Contains(errOut, "HINT:") {
			t.Fatalf("%s: stderr = %q, want 42501 with a hint", q, errOut)
		}
	}
}

func TestPsql_CatalogFromShadow(t *testing.T) {
	requireDemo(t)
	out, errOut, code := psql(t, env.aliceDSN, "-c", `\dt`)
	if code != 0 || !strings.Contains(out, "visits") || !strings.Contains(out, "patients") {
		t.Fatalf(`\dt: exit %d, stdout %q, stderr %q`, code, out, errOut)
	}
	// The shadow exposes only visible columns: visit_id is access: none.
	out, errOut, code = psql(t, env.aliceDSN, "-c", `\d visits`)
	if code != 0 || !strings.Contains(out, "department") || strings.Contains(out, "visit_id") {
		t.Fatalf(`\d visits: exit %d, stdout %q, stderr %q`, code, out, errOut)
	}
	out, _, code = psql(t, env.aliceDSN, "-A", "-t", "-c", "SELECT 1")
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("SELECT 1 = %q (exit %d)", out, code)
	}
	// \gdesc describes a DP statement without running it (nothing
	// charged), then formats the types with a VALUES list aliased
	// s(name, tp, tpm), which the catalog allow-list once took for a call
	// of a function s.
	f := t.TempDir() + "/gdesc.sql"
	if err := os.WriteFile(f, []byte("SELECT department, COUNT(*) AS n FROM visits GROUP BY 1 \\gdesc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = psql(t, env.aliceDSN, "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", f)
	if code != 0 || !strings.Contains(out, "department|text") || !strings.Contains(out, "n|bigint") || strings.Contains(errOut, "dp:") {
		t.Fatalf(`\gdesc: exit %d, stdout %q, stderr %q`, code, out, errOut)
	}
}

// TestLedger_ReserveBeforeRead holds a lock on the data table so the DP
// query blocks upstream, and checks that its charge is already committed in
// the ledger while it waits; after the lock is released the answer arrives
// and the charge is marked released.
func TestLedger_ReserveBeforeRead(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unlock := lockTable(t, ctx, "patients")
	ledger := connect(t, ctx, ledgerDSN())
	before := lastChargeID(t, ctx, ledger)

	done := queryInBackground(ctx, analystDSN("alice"), "SELECT COUNT(*) FROM patients")
	id, status := waitForCharge(t, ctx, ledger, "alice", before)
	if status != "reserved" {
		t.Fatalf("charge %d status = %s while the upstream query is blocked, want reserved", id, status)
	}
	select {
	case err := <-done:
		t.Fatalf("query answered while the table was locked: %v", err)
	default:
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("DP query after the lock: %v", err)
	}
	if err := ledger.QueryRow(ctx, "SELECT status FROM dpproxy_ledger.charge WHERE id = $1", id).Scan(&status); err != nil || status != "released" {
		t.Fatalf("charge %d status = %q, %v; want released", id, status, err)
	}
}

// TestBudget_ConcurrentNeverOverspends drives analyst bob: the budget
// decreases with each answer, then two connections with several sessions
// each race until refused with 53400; the total charged never exceeds the
// budget of 3.
func TestBudget_ConcurrentNeverOverspends(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := connect(t, ctx, analystDSN("bob"))
	remaining := func() float64 {
		t.Helper()
		var ds, acc string
		var es, er, dsp, dr float64
		var renews *string // window_renews: NULL, the demo's policy has no budget window
		if err := c.QueryRow(ctx, "SHOW dp.budget").Scan(&ds, &acc, &es, &er, &dsp, &dr, &renews); err != nil {
			t.Fatalf("SHOW dp.budget: %v", err)
		}
		if ds != "hospital" || acc != "pure" {
			t.Fatalf("SHOW dp.budget = %s, %s", ds, acc)
		}
		return er
	}
	if r := remaining(); r != 3 {
		t.Fatalf("bob's initial remaining ε = %v, want 3", r)
	}
	if _, err := c.Exec(ctx, "SET dp.epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT COUNT(*) FROM visits WHERE age >= 65").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if r := remaining(); math.Abs(r-2.5) > 1e-9 {
		t.Fatalf("remaining after one ε=0.5 query = %v, want 2.5", r)
	}

	const sessions = 8
	var mu sync.Mutex
	answered, refused := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgx.Connect(ctx, analystDSN("bob"))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close(context.Background())
			// Every repetition must be charged: without this the answer
			// cache would return the first answer at no cost. dp.bias =
			// off: one measurement of exactly 0.25, so that the budget is
			// spent to exactly 0 (the bias split may leave an ulp).
			if _, err := s.Exec(ctx, "SET dp.epsilon = 0.25; SET dp.cache = off; SET dp.bias = off"); err != nil {
				errs <- err
				return
			}
			for {
				var n int64
				err := s.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'north'").Scan(&n)
				var pe *pgconn.PgError
				switch {
				case err == nil:
					mu.Lock()
					answered++
					mu.Unlock()
					continue
				case errors.As(err, &pe) && pe.Code == "53400":
					mu.Lock()
					refused++
					mu.Unlock()
					// The connection stays usable after the refusal.
					if _, err := s.Exec(ctx, "SHOW dp.epsilon"); err != nil {
						errs <- err
					}
					return
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("session error: %v", err)
	}
	// 2.5 remaining at 0.25 each: exactly 10 answers fit.
	if answered != 10 || refused != sessions {
		t.Fatalf("answered %d, refused %d; want 10 answered and every session refused", answered, refused)
	}
	if r := remaining(); r != 0 {
		t.Fatalf("remaining = %v, want 0", r)
	}
	var total float64
	var charges int
	l := connect(t, ctx, ledgerDSN())
	if err := l.QueryRow(ctx, "SELECT sum(cost_epsilon)::float8, count(*) FROM dpproxy_ledger.charge WHERE analyst = 'bob'").Scan(&total, &charges); err != nil {
		t.Fatal(err)
	}
	if total > 3+1e-9 || charges != 11 {
		t.Fatalf("ledger: bob charged ε = %v in %d rows; want ≤ 3 in 11", total, charges)
	}
}

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
