// Package benchkit holds what the accuracy benchmarks (bench/quantile,
// bench/accuracy) share to release answers in-process: an unlimited
// in-memory ledger and an upstream that returns rows computed once.
package benchkit

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// MemLedger is an unlimited in-memory accountant.Store: every charge is
// accepted and nothing is cached.
type MemLedger struct {
	mu sync.Mutex
	n  int64
}

func (l *MemLedger) Reserve(_ context.Context, c accountant.Charge) (*accountant.Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return &accountant.Reservation{ID: l.n, Status: accountant.Status{Dataset: c.Dataset, Accountant: "pure", Limit: accountant.Spent{Epsilon: math.Inf(1)}}}, nil
}
func (l *MemLedger) Release(context.Context, *accountant.Reservation, []byte) error { return nil }
func (l *MemLedger) RecordIncident(context.Context, *policy.Dataset, accountant.Incident) (accountant.IncidentResult, error) {
	return accountant.IncidentResult{}, nil
}
func (l *MemLedger) Status(_ context.Context, _ string, ds *policy.Dataset) (accountant.Status, error) {
	return accountant.Status{Dataset: ds.Name}, nil
}
func (l *MemLedger) Cached(context.Context, string, string, string) ([]byte, bool, error) {
	return nil, false, nil
}

// RowsUpstream returns the same rows to every query.
type RowsUpstream struct{ Rows [][]*string }

func (u RowsUpstream) Query(context.Context, string, ...any) ([][]*string, error) {
	return u.Rows, nil
}

// QueryText runs sql in the simple protocol and returns its rows as text.
func QueryText(ctx context.Context, conn *pgx.Conn, sql string) ([][]*string, error) {
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	return upstream.TextRows(rows)
}

// LoadDemo creates the demo's patients and visits tables (seed 1, no
// keys beyond the primary ones) and copies the generated rows into them.
func LoadDemo(ctx context.Context, conn *pgx.Conn) error {
	d := demo.Generate(1)
	if _, err := conn.Exec(ctx, `CREATE TABLE patients (patient_id bigint PRIMARY KEY, birth_year int, sex text, region text);
CREATE TABLE visits (visit_id bigint PRIMARY KEY, patient_id bigint, visit_date date, department text, diagnosis text, age int, cost numeric(10,2), length_of_stay int)`); err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, p := range d.Patients {
		fmt.Fprintf(&buf, "%d\t%d\t%s\t%s\n", p.ID, p.BirthYear, p.Sex, p.Region)
	}
	if _, err := conn.PgConn().CopyFrom(ctx, &buf, "COPY patients FROM STDIN"); err != nil {
		return err
	}
	buf.Reset()
	for _, v := range d.Visits {
		fmt.Fprintf(&buf, "%d\t%d\t%s\t%s\t%s\t%d\t%d.%02d\t%d\n", v.ID, v.PatientID, v.Date.Format(time.DateOnly), v.Department, v.Diagnosis, v.Age, v.CostCents/100, v.CostCents%100, v.LengthOfStay)
	}
	_, err := conn.PgConn().CopyFrom(ctx, &buf, "COPY visits FROM STDIN")
	return err
}

// PUMSDir is where the shared PUMS sample lives; it is read in place,
// never copied into the repository.
const PUMSDir = "/work/shared/datasets/pums/"

// LoadPUMS copies PUMSDir+file into a new table (pid, age, sex, educ, race,
// income, married): pid from the file, or the row number when the file has
// none (PUMS.csv). An error wrapping fs.ErrNotExist means the sample is not
// on this machine.
func LoadPUMS(ctx context.Context, conn *pgx.Conn, file, table string) error {
	f, err := os.Open(PUMSDir + file)
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return err
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	ident := pgx.Identifier{table}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE TABLE "+ident+" (pid bigint, age int, sex int, educ int, race int, income numeric, married int)"); err != nil {
		return err
	}
	var buf bytes.Buffer
	for i, r := range recs[1:] {
		pid := strconv.Itoa(i + 1)
		if j, ok := col["pid"]; ok {
			pid = r[j]
		}
		fmt.Fprintf(&buf, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", pid, r[col["age"]], r[col["sex"]], r[col["educ"]], r[col["race"]], r[col["income"]], r[col["married"]])
	}
	_, err = conn.PgConn().CopyFrom(ctx, &buf, "COPY "+ident+" (pid, age, sex, educ, race, income, married) FROM STDIN")
	return err
}

// ReleaseErrors releases plan p of ds `runs` times at ε eps (Laplace noise,
// fresh each time, nothing cached) on rows, its emitted SQL's rows computed
// once, and returns |released − truth| of the first cell of the first row
// for each release that is not NULL, sorted ascending, and the number of
// NULL answers.
func ReleaseErrors(ctx context.Context, ds *policy.Dataset, p *dpplan.Plan, rows [][]*string, eps float64, runs int, truth float64) ([]float64, int, error) {
	r, err := release.New(release.Config{Ledger: &MemLedger{}, Planner: rewrite.Replan})
	if err != nil {
		return nil, 0, err
	}
	var errs []float64
	nulls := 0
	for range runs {
		res, err := r.Run(ctx, release.Request{Analyst: "bench", Dataset: ds, Plan: p, Epsilon: eps,
			Mechanism: policy.MechanismLaplace, Upstream: RowsUpstream{Rows: rows}, NoCache: true})
		if err != nil {
			return nil, 0, err
		}
		if res.Rows[0][0] == nil {
			nulls++
			continue
		}
		v, err := strconv.ParseFloat(*res.Rows[0][0], 64)
		if err != nil {
			return nil, 0, err
		}
		errs = append(errs, math.Abs(v-truth))
	}
	slices.Sort(errs)
	return errs, nulls, nil
}
