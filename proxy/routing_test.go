package proxy

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestProvablyEmpty_FromShadow: the queries BI tools send to learn result
// types (WHERE 1 <> 1, LIMIT 0) over protected tables are answered by the
// shadow catalog (same columns, no rows) in both protocols, without the DP
// path; an aggregate over WHERE false still goes to the DP path.
func TestProvablyEmpty_FromShadow(t *testing.T) {
	t.Parallel()
	ts := startShadowServer(t)
	pc := ts.connect(t)
	wantCols := []string{"patient_id", "visit_date", "department", "diagnosis", "age", "cost", "length_of_stay"}
	names := func(fds []pgconn.FieldDescription) []string {
		var out []string
		for _, f := range fds {
			out = append(out, f.Name)
		}
		return out
	}
	for _, q := range []string{
		`SELECT * FROM "public"."visits" WHERE 1 <> 1 LIMIT 0`,
		"SELECT * FROM visits WHERE 1 = 0",
		"SELECT * FROM visits LIMIT 0",
		`SELECT * FROM (SELECT * FROM visits) "TableauSQL" WHERE (0 = 1)`,
	} {
		// (pgconn's Read keeps the columns only of results with rows.)
		mrr := pc.Exec(ctxT(t), q)
		if !mrr.NextResult() {
			t.Fatalf("%s: no result: %v", q, mrr.Close())
		}
		rr := mrr.ResultReader()
		fields := names(rr.FieldDescriptions())
		nrows := 0
		for rr.NextRow() {
			nrows++
		}
		tag, err := rr.Close()
		if cerr := mrr.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !reflect.DeepEqual(fields, wantCols) || nrows != 0 || tag.String() != "SELECT 0" {
			t.Errorf("%s: columns %v, %d rows, tag %q", q, fields, nrows, tag)
		}
		// Extended protocol: Describe gives the shadow's types.
		sd, err := pc.Prepare(ctxT(t), "", q, nil)
		if err != nil {
			t.Fatalf("prepare %s: %v", q, err)
		}
		if got := names(sd.Fields); !reflect.DeepEqual(got, wantCols) || sd.Fields[4].DataTypeOID != oidInt4 || sd.Fields[5].DataTypeOID != oidNumeric {
			t.Errorf("describe %s: %+v", q, sd.Fields)
		}
		r := pc.ExecParams(ctxT(t), q, nil, nil, nil, []int16{formatBinary}).Read()
		if r.Err != nil || len(r.Rows) != 0 {
			t.Errorf("extended %s: %v, %d rows", q, r.Err, len(r.Rows))
		}
	}
	if n := len(ts.releaser.requests()); n != 0 {
		t.Fatalf("%d DP requests for provably empty queries", n)
	}
	// An aggregate makes a row of no input: that is a DP query.
	res, err := execAll(t, pc, "SELECT COUNT(*) FROM visits WHERE 1 = 0")
	if err != nil || len(res[0].Rows) != 1 {
		t.Fatalf("COUNT(*) … WHERE 1 = 0: %v %v", res, err)
	}
	if n := len(ts.releaser.requests()); n != 1 {
		t.Errorf("COUNT(*) … WHERE 1 = 0: %d DP requests, want 1", n)
	}
}

// TestPublicDistinct_FromPolicy: SELECT DISTINCT of a column with
// public_values is answered from the policy (no DP request, a NOTICE
// saying so), in both protocols; other DISTINCTs are not.
func TestPublicDistinct_FromPolicy(t *testing.T) {
	t.Parallel()
	ts := startShadowServer(t)
	cfg, err := pgconn.ParseConfig(ts.dsn("alice", "alice", "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	pc, err := pgconn.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(context.Background()) })

	res, err := execAll(t, pc, "SELECT DISTINCT department FROM visits ORDER BY department DESC")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"surgery"}, {"pediatrics"}, {"orthopedics"}, {"oncology"}, {"neurology"}, {"emergency"}, {"cardiology"}}
	if got := rows(res[0]); !reflect.DeepEqual(got, want) || res[0].FieldDescriptions[0].Name != "department" ||
		res[0].FieldDescriptions[0].DataTypeOID != oidText || res[0].CommandTag.String() != "SELECT 7" {
		t.Errorf("DISTINCT department: %v %+v %q", got, res[0].FieldDescriptions, res[0].CommandTag)
	}
	mu.Lock()
	got := strings.Join(notices, "\n")
	mu.Unlock()
	if !strings.Contains(got, "public values of visits.department") || !strings.Contains(got, "no budget spent") {
		t.Errorf("notices = %q", got)
	}

	// knex repeats the column: two result columns of the same values.
	res, err = execAll(t, pc, `select distinct "department", "department" from "visits"`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(res[0]); len(got) != 7 || len(got[0]) != 2 || got[0][0] != got[0][1] || len(res[0].FieldDescriptions) != 2 {
		t.Errorf("DISTINCT department, department: %v %+v", got, res[0].FieldDescriptions)
	}

	// Extended protocol, with Describe of the statement and binary results.
	sd, err := pc.Prepare(ctxT(t), "regions", "SELECT DISTINCT p.region AS r FROM patients p ORDER BY r LIMIT 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sd.Fields) != 1 || sd.Fields[0].Name != "r" || sd.Fields[0].DataTypeOID != oidText {
		t.Errorf("describe: %+v", sd.Fields)
	}
	r := pc.ExecPrepared(ctxT(t), "regions", nil, nil, []int16{formatBinary}).Read()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := rows(r); !reflect.DeepEqual(got, [][]string{{"central"}, {"east"}, {"north"}}) {
		t.Errorf("extended DISTINCT region: %v", got)
	}
	if n := len(ts.releaser.requests()); n != 0 {
		t.Fatalf("%d DP requests for public DISTINCTs", n)
	}

	// A column without public values, or a filter, is not public: the DP
	// path refuses DISTINCT (the data would decide the rows).
	for _, q := range []string{
		"SELECT DISTINCT diagnosis FROM visits",
		"SELECT DISTINCT department FROM visits WHERE age > 90",
	} {
		if _, err := execAll(t, pc, q); err == nil {
			t.Errorf("%s: answered", q)
		}
	}
	if res, err := execAll(t, pc, "SELECT 1"); err != nil || rows(res[0])[0][0] != "1" {
		t.Errorf("after refusals: %v %v", res, err)
	}
}
