package proxy

import (
	"strings"
	"testing"
)

// TestDP_Explain: EXPLAIN of a DP query answers from the plan and the
// session's settings — the emitted SQL, sensitivities, noise and cost —
// without calling the releaser (no data, no budget), in both protocols;
// EXPLAIN ANALYZE is refused.
func TestDP_Explain(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	const q = "EXPLAIN SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department"
	res, err := execAll(t, pc, "SET dp.epsilon = 0.5; "+q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	r := res[len(res)-1]
	if got := r.CommandTag.String(); got != "EXPLAIN" {
		t.Fatalf("tag = %q, want EXPLAIN", got)
	}
	if len(r.FieldDescriptions) != 1 || r.FieldDescriptions[0].Name != "QUERY PLAN" || r.FieldDescriptions[0].DataTypeOID != oidText {
		t.Fatalf("fields = %+v", r.FieldDescriptions)
	}
	var text []string
	for _, row := range rows(r) {
		text = append(text, row[0])
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"0.5", "WINDOW dp_w AS (PARTITION BY dp_unit)", `FROM "public"."visits"`} {
		if !strings.Contains(all, want) {
			t.Errorf("EXPLAIN output lacks %q:\n%s", want, all)
		}
	}
	if n := len(ts.releaser.requests()); n != 0 {
		t.Fatalf("EXPLAIN called the releaser %d times", n)
	}

	// Extended protocol: Describe gives the one text column, Execute the plan.
	sd, err := pc.Prepare(ctxT(t), "", q, nil)
	if err != nil {
		t.Fatalf("prepare EXPLAIN: %v", err)
	}
	if len(sd.Fields) != 1 || sd.Fields[0].Name != "QUERY PLAN" {
		t.Fatalf("described fields = %+v", sd.Fields)
	}
	er := pc.ExecParams(ctxT(t), q, nil, nil, nil, nil).Read()
	if er.Err != nil || len(er.Rows) != len(text) {
		t.Fatalf("extended EXPLAIN: %d rows, %v; want %d rows", len(er.Rows), er.Err, len(text))
	}
	if n := len(ts.releaser.requests()); n != 0 {
		t.Fatalf("EXPLAIN called the releaser %d times", n)
	}

	_, err = execAll(t, pc, "EXPLAIN ANALYZE SELECT COUNT(*) FROM visits")
	if got := sqlstate(err); got != "0A000" {
		t.Fatalf("EXPLAIN ANALYZE: %v, want 0A000", err)
	}
	if _, err := execAll(t, pc, "SHOW dp.epsilon"); err != nil {
		t.Fatalf("session after EXPLAIN ANALYZE: %v", err)
	}
}
