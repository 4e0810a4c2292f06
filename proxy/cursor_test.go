package proxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestSession_PoolReset: asyncpg's pool sends this string when it releases
// a connection (asyncpg connection.py _get_reset_query, prefixed with
// ROLLBACK when a transaction is open). Every statement is answered by the
// proxy; nothing reaches a database (this server has no shadow).
func TestSession_PoolReset(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	const reset = "SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;"
	for _, prefix := range []string{"", "BEGIN; SET dp.epsilon = 0.3; ROLLBACK;\n", "BEGIN; SET dp.epsilon = 0.3; "} {
		res, err := execAll(t, pc, prefix+reset)
		if err != nil {
			t.Fatalf("%q: %v", prefix+reset, err)
		}
		r := res[len(res)-4:]
		var tags []string
		for _, x := range r {
			tags = append(tags, x.CommandTag.String())
		}
		if got := strings.Join(tags, "|"); got != "SELECT 1|CLOSE CURSOR ALL|UNLISTEN|RESET" {
			t.Fatalf("tags %s", got)
		}
		if f := r[0].FieldDescriptions; len(f) != 1 || f[0].Name != "pg_advisory_unlock_all" || f[0].DataTypeOID != oidVoid ||
			len(r[0].Rows) != 1 || r[0].Rows[0][0] == nil || len(r[0].Rows[0][0]) != 0 {
			t.Fatalf("pg_advisory_unlock_all() = %+v %q, want one void row", f, r[0].Rows)
		}
		if _, err := execAll(t, pc, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if got := show(t, pc, "dp.epsilon"); got != "0.1" {
			t.Fatalf("after the reset dp.epsilon = %s, want the default", got)
		}
	}
	// The named forms and DISCARD ALL.
	for _, q := range []string{"UNLISTEN some_channel", "DISCARD ALL", "SELECT pg_catalog.pg_advisory_unlock_all() AS done"} {
		if _, err := execAll(t, pc, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Taking a lock is still refused, and the lock functions in a query.
	for _, q := range []string{"SELECT pg_advisory_lock(1)", "SELECT pg_advisory_unlock_all(), 1", "LISTEN ch"} {
		if _, err := execAll(t, pc, q); sqlstate(err) != "42501" {
			t.Fatalf("%s: %v, want 42501", q, err)
		}
	}
	if n := len(ts.releaser.requests()); n != 0 {
		t.Fatalf("%d DP releases, want none", n)
	}
}

// TestCursor_DP: DECLARE releases the DP query once; FETCH and MOVE page
// over the released rows with PostgreSQL's positions; the SQLSTATEs of
// PostgreSQL for a missing transaction, a duplicate or unknown name, a
// backward scan of a NO SCROLL cursor; cursors end with the transaction
// unless WITH HOLD.
func TestCursor_DP(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	const q = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department"
	want := ts.srv.cfg.Datasets["hospital"].Policy.Tables["visits"]
	col, _ := want.Column("department")
	depts := col.PublicValues // the released keys, in the plan's order
	n := len(depts)
	step := func(sql, code string, wantRows ...string) {
		t.Helper()
		res, err := execAll(t, pc, sql)
		if got := sqlstate(err); got != code {
			t.Fatalf("%s: %v, want SQLSTATE %q", sql, err, code)
		}
		if code != "" || wantRows == nil {
			return
		}
		var got []string
		for _, r := range rows(res[len(res)-1]) {
			got = append(got, r[0])
		}
		if strings.Join(got, ",") != strings.Join(wantRows, ",") && !(len(got) == 0 && len(wantRows) == 1 && wantRows[0] == "") {
			t.Fatalf("%s = %v, want %v", sql, got, wantRows)
		}
	}
	step("DECLARE c CURSOR FOR "+q, "25P01")
	step("BEGIN", "")
	step("DECLARE c CURSOR FOR SELECT * FROM visits", "42501")
	step("ROLLBACK", "")
	if r := len(ts.releaser.requests()); r != 0 {
		t.Fatalf("refused DECLAREs made %d releases", r)
	}
	step("BEGIN", "")
	step(`DECLARE "c" CURSOR WITHOUT HOLD FOR `+q, "")
	step("FETCH FORWARD 3 FROM c", "", depts[:3]...)
	step("FETCH 2 c", "", depts[3:5]...)
	step("FETCH ALL IN c", "", depts[5:]...)
	step("FETCH NEXT FROM c", "", "")
	step("FETCH PRIOR FROM c", "", depts[n-1])
	step("FETCH FIRST FROM c", "", depts[0])
	step("FETCH RELATIVE 0 FROM c", "", depts[0])
	step("FETCH LAST FROM c", "", depts[n-1])
	step("FETCH ABSOLUTE -2 FROM c", "", depts[n-2])
	step("FETCH BACKWARD 2 FROM c", "", depts[n-3], depts[n-4])
	step("MOVE ABSOLUTE 0 IN c", "")
	step("FETCH -1 FROM c", "", "")
	step("MOVE FORWARD ALL FROM c", "")
	step("FETCH ABSOLUTE 2 FROM c", "", depts[1])
	res, err := execAll(t, pc, "MOVE 3 FROM c; MOVE FORWARD ALL FROM c")
	if err != nil || res[0].CommandTag.String() != "MOVE 3" || res[1].CommandTag.String() != fmt.Sprintf("MOVE %d", n-5) {
		t.Fatalf("MOVE tags: %v %v", res, err)
	}
	step("DECLARE c CURSOR FOR "+q, "42P03")
	step("ROLLBACK", "")
	step("FETCH c", "34000")
	step("CLOSE c", "34000")
	if r := len(ts.releaser.requests()); r != 1 {
		t.Fatalf("%d releases for one DECLARE and many FETCHes, want 1", r)
	}
	// WITH HOLD survives COMMIT (not ROLLBACK); NO SCROLL only goes forward.
	step("BEGIN; DECLARE h NO SCROLL CURSOR WITH HOLD FOR "+q+"; DECLARE gone CURSOR FOR "+q+"; COMMIT", "")
	step("FETCH gone", "34000")
	step("FETCH 1 FROM h", "", depts[0])
	step("FETCH PRIOR FROM h", "55000")
	step("FETCH FIRST FROM h", "55000")
	step("FETCH NEXT FROM h", "", depts[1])
	step("BEGIN; DECLARE h2 CURSOR WITH HOLD FOR "+q+"; ROLLBACK", "")
	step("FETCH h2", "34000")
	// ROLLBACK TO a savepoint ends the cursors declared after it.
	step("BEGIN; DECLARE a CURSOR FOR "+q+"; SAVEPOINT s; DECLARE b CURSOR FOR "+q+"; ROLLBACK TO s", "")
	step("FETCH b", "34000")
	step("ROLLBACK TO s", "")
	step("FETCH a", "", depts[0])
	step("COMMIT", "")
	step("FETCH a", "34000")
	// A multi-statement string is an implicit transaction: DECLARE works in it.
	step("DECLARE i CURSOR FOR "+q+"; FETCH 2 FROM i", "", depts[:2]...)
	step("FETCH i", "34000")
	step("CLOSE h", "")
	step("FETCH h", "34000")
	if r := len(ts.releaser.requests()); r != 7 {
		t.Fatalf("%d releases, want one per DECLARE (7)", r)
	}
}

// TestCursor_BinaryAndExtended: a BINARY cursor's FETCH sends binary values
// in the simple protocol; in the extended protocol the Bind's formats
// decide; Describe of the cursor's name as a portal gives its columns
// (psycopg 3); DECLARE's query may have parameters (psycopg 3 binds them).
func TestCursor_BinaryAndExtended(t *testing.T) {
	ts := startShadowServer(t)
	pc := ts.connect(t)
	const q = "SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex"
	res, err := execAll(t, pc, "BEGIN; DECLARE b BINARY CURSOR FOR "+q+"; FETCH 1 FROM b")
	if err != nil {
		t.Fatal(err)
	}
	f := res[2].FieldDescriptions
	if len(f) != 2 || f[1].Format != formatBinary || f[1].DataTypeOID != oidInt8 || len(res[2].Rows) != 1 ||
		binary.BigEndian.Uint64(res[2].Rows[0][1]) != 42 {
		t.Fatalf("binary FETCH: %+v %q", f, res[2].Rows)
	}
	// Extended protocol: text, whatever the cursor says.
	r := pc.ExecParams(ctxT(t), "FETCH 1 FROM b", nil, nil, nil, nil).Read()
	if r.Err != nil || len(r.Rows) != 1 || string(r.Rows[0][1]) != "42" {
		t.Fatalf("extended text FETCH: %v %q", r.Err, r.Rows)
	}
	// A parameter in the DECLARE's query, bound as a value.
	r = pc.ExecParams(ctxT(t), "DECLARE p CURSOR FOR SELECT COUNT(*) AS n FROM patients WHERE birth_year > $1", [][]byte{[]byte("1950")}, nil, nil, nil).Read()
	if r.Err != nil || r.CommandTag.String() != "DECLARE CURSOR" {
		t.Fatalf("DECLARE with a parameter: %v %v", r.Err, r.CommandTag)
	}
	r = pc.ExecParams(ctxT(t), "FETCH ALL FROM p", nil, nil, nil, []int16{formatBinary}).Read()
	if r.Err != nil || len(r.Rows) != 1 || binary.BigEndian.Uint64(r.Rows[0][0]) != 42 {
		t.Fatalf("binary extended FETCH: %v %q", r.Err, r.Rows)
	}
	reqs := ts.releaser.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Plan.SQL, "1950") {
		t.Fatalf("%d releases; the second should filter on the bound value", len(reqs))
	}
	// Describe of the cursor's name as a portal.
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Query{String: "BEGIN; DECLARE d CURSOR FOR " + q})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Describe{ObjectType: 'P', Name: "d"})
	fe.Send(&pgproto3.Describe{ObjectType: 'P', Name: "nosuch"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := receiveUntilReady(t, fe)
	rd, ok := msgs[0].(*pgproto3.RowDescription)
	if !ok || len(rd.Fields) != 2 || string(rd.Fields[0].Name) != "sex" || string(rd.Fields[1].Name) != "n" {
		t.Fatalf("Describe portal d: %#v", msgs)
	}
	if e, ok := msgs[1].(*pgproto3.ErrorResponse); !ok || e.Code != "34000" {
		t.Fatalf("Describe portal nosuch: %#v", msgs[1])
	}
}

// TestCursor_Catalog: a cursor over a catalog statement runs it once on
// the shadow and pages over its rows, like PostgreSQL's cursor over the
// same statement.
func TestCursor_Catalog(t *testing.T) {
	ts := startShadowServer(t)
	pc := ts.connect(t)
	const q = "SELECT g, 'v' || g AS s FROM generate_series(1, 5) g"
	res, err := execAll(t, pc, "BEGIN; DECLARE c SCROLL CURSOR FOR "+q+"; FETCH 2 FROM c; FETCH LAST FROM c; FETCH BACKWARD ALL FROM c; COMMIT")
	if err != nil {
		t.Fatal(err)
	}
	direct, err := pgconn.Connect(ctxT(t), ts.srv.cfg.Datasets["hospital"].ShadowDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctxT(t))
	want, err := direct.Exec(ctxT(t), "BEGIN; DECLARE c SCROLL CURSOR FOR "+q+"; FETCH 2 FROM c; FETCH LAST FROM c; FETCH BACKWARD ALL FROM c; COMMIT").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if g, w := fmt.Sprint(rows(res[i]), res[i].CommandTag), fmt.Sprint(rows(want[i]), want[i].CommandTag); g != w {
			t.Errorf("result %d: proxy %s, PostgreSQL %s", i, g, w)
		}
	}
	if n := len(ts.releaser.requests()); n != 0 {
		t.Fatalf("%d DP releases for a catalog cursor", n)
	}
	// At most maxCursors at once.
	var many strings.Builder
	many.WriteString("BEGIN")
	for i := 0; i <= maxCursors; i++ {
		fmt.Fprintf(&many, "; DECLARE m%d CURSOR FOR SELECT 1", i)
	}
	if _, err := execAll(t, pc, many.String()); sqlstate(err) != "54000" {
		t.Fatalf("%d cursors: %v, want 54000", maxCursors+1, err)
	}
	if _, err := execAll(t, pc, "ROLLBACK; SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

// TestCopy_DPAndFormats: COPY (query) TO STDOUT releases a DP query once
// and formats its rows; the text and csv formats are byte for byte
// PostgreSQL's (compared with the shadow's own COPY of the same catalog
// query: NULLs, quotes, delimiters, backslashes, tabs, newlines, empty
// strings, a lone \.); every other COPY is refused before any release.
func TestCopy_DPAndFormats(t *testing.T) {
	ts := startShadowServer(t)
	pc := ts.connect(t)
	var buf bytes.Buffer
	tag, err := pc.CopyTo(ctxT(t), &buf, "COPY (SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex) TO STDOUT WITH (FORMAT csv, HEADER)")
	if err != nil || tag.String() != "COPY 2" {
		t.Fatalf("COPY of a DP query: %v %v", tag, err)
	}
	if got := buf.String(); got != "sex,n\nF,42\nM,42\n" {
		t.Fatalf("COPY csv = %q", got)
	}
	if n := len(ts.releaser.requests()); n != 1 {
		t.Fatalf("%d releases for one COPY, want 1", n)
	}
	direct, err := pgconn.Connect(ctxT(t), ts.srv.cfg.Datasets["hospital"].ShadowDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctxT(t))
	const hostile = `SELECT * FROM (VALUES
		(1, E'a\tb', NULL::text, E'back\\slash', '"quoted", comma'),
		(2, E'line\nbreak\r', '', '\.', E'\x01\b\f\v'),
		(3, 'plain', 'NA', 'semi;colon', 'x|y')) AS t(id, "a b", "c""d", e, f)`
	for _, opts := range []string{
		"", "WITH (FORMAT text, HEADER)", "(FORMAT text, DELIMITER '|', NULL 'NA')", "WITH (FORMAT csv)",
		"WITH (FORMAT csv, HEADER true, NULL 'NA', DELIMITER ';')", "(FORMAT csv, FORCE_QUOTE *)",
		"(FORMAT csv, FORCE_QUOTE (e, f), QUOTE '''', ESCAPE '\\')", "CSV HEADER", "WITH CSV DELIMITER AS '|' NULL AS ''",
	} {
		for _, query := range []string{hostile, "SELECT '\\.' AS only"} {
			if strings.Contains(opts, "(e, f)") && !strings.Contains(query, " e,") {
				continue
			}
			sql := "COPY (" + query + ") TO STDOUT " + opts
			var got, want bytes.Buffer
			if _, err := pc.CopyTo(ctxT(t), &got, sql); err != nil {
				t.Fatalf("%s: proxy: %v", sql, err)
			}
			if _, err := direct.CopyTo(ctxT(t), &want, sql); err != nil {
				t.Fatalf("%s: PostgreSQL: %v", sql, err)
			}
			if got.String() != want.String() {
				t.Errorf("%s:\nproxy      %q\nPostgreSQL %q", sql, got.String(), want.String())
			}
		}
	}
	for _, c := range []struct{ sql, code string }{
		{"COPY patients TO STDOUT", "42501"},
		{"COPY (SELECT * FROM patients) TO STDOUT", "42501"},
		{"COPY (SELECT sex, COUNT(*) FROM patients GROUP BY sex) TO '/tmp/x'", "42501"},
		{"COPY (SELECT sex, COUNT(*) FROM patients GROUP BY sex) TO PROGRAM 'cat'", "42501"},
		{"COPY patients FROM STDIN", "42501"},
		{"COPY (SELECT sex, COUNT(*) FROM patients GROUP BY sex) TO STDOUT (FORMAT binary)", "0A000"},
		{"COPY (SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex) TO STDOUT (FORMAT csv, FORCE_QUOTE (nosuch))", "42P10"},
	} {
		_, err := pc.CopyTo(ctxT(t), &buf, c.sql)
		if got := sqlstate(err); got != c.code {
			t.Errorf("%s: %v, want %s", c.sql, err, c.code)
		}
	}
	// Extended protocol: refused at Parse, before any release.
	r := pc.ExecParams(ctxT(t), "COPY (SELECT sex, COUNT(*) FROM patients GROUP BY sex) TO STDOUT", nil, nil, nil, nil).Read()
	if sqlstate(r.Err) != "0A000" {
		t.Fatalf("extended COPY: %v, want 0A000", r.Err)
	}
	if n := len(ts.releaser.requests()); n != 1 {
		t.Fatalf("%d releases after refused COPYs, want 1", n)
	}
	if _, err := execAll(t, pc, "SELECT 1"); err != nil {
		t.Fatalf("session after refusals: %v", err)
	}
}
