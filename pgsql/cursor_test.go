package pgsql

import (
	"reflect"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestParseSession_Cursors: the DECLARE, FETCH, MOVE and CLOSE forms that
// psycopg2, psycopg 3 and SQLAlchemy send, and PostgreSQL's directions.
func TestParseSession_Cursors(t *testing.T) {
	t.Parallel()
	q := "SELECT department, COUNT(*) FROM visits GROUP BY department"
	for _, tc := range []struct {
		in   string
		kind SessionKind
		want CursorStmt
	}{
		{`DECLARE "c_1" CURSOR WITHOUT HOLD FOR ` + q, SessionDeclare, CursorStmt{Name: "c_1", Query: q, QueryOffset: 38}},
		{`declare C binary insensitive no scroll cursor with hold for ` + q, SessionDeclare,
			CursorStmt{Name: "c", Binary: true, NoScroll: true, Hold: true, Query: q, QueryOffset: 60}},
		{`DECLARE c SCROLL CURSOR FOR ` + q, SessionDeclare, CursorStmt{Name: "c", Scroll: true, Query: q, QueryOffset: 28}},
		{`FETCH FORWARD 2000 FROM "c_1"`, SessionFetch, CursorStmt{Name: "c_1", Direction: FetchForward, Count: 2000}},
		{`FETCH c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchForward, Count: 1}},
		{`FETCH NEXT IN c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchForward, Count: 1}},
		{`FETCH PRIOR FROM c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchBackward, Count: 1}},
		{`FETCH FIRST c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchAbsolute, Count: 1}},
		{`FETCH LAST c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchAbsolute, Count: -1}},
		{`FETCH ABSOLUTE -2 c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchAbsolute, Count: -2}},
		{`FETCH RELATIVE 0 c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchRelative, Count: 0}},
		{`FETCH -3 FROM c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchForward, Count: -3}},
		{`FETCH ALL FROM c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchForward, Count: FetchAll}},
		{`FETCH FORWARD ALL c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchForward, Count: FetchAll}},
		{`FETCH BACKWARD c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchBackward, Count: 1}},
		{`FETCH BACKWARD 2 c`, SessionFetch, CursorStmt{Name: "c", Direction: FetchBackward, Count: 2}},
		{`MOVE ABSOLUTE 5 FROM "c"`, SessionMove, CursorStmt{Name: "c", Direction: FetchAbsolute, Count: 5}},
		{`MOVE 2 c`, SessionMove, CursorStmt{Name: "c", Direction: FetchForward, Count: 2}},
		{`CLOSE "c"`, SessionClose, CursorStmt{Name: "c"}},
		{`CLOSE ALL`, SessionClose, CursorStmt{All: true}},
	} {
		st, err := ParseSession(tc.in)
		if err != nil {
			t.Errorf("ParseSession(%q): %v", tc.in, err)
			continue
		}
		if st.Kind != tc.kind || st.Cursor == nil || !reflect.DeepEqual(*st.Cursor, tc.want) {
			t.Errorf("ParseSession(%q) = kind %v %+v, want kind %v %+v", tc.in, st.Kind, st.Cursor, tc.kind, tc.want)
		}
	}
	for _, in := range []string{`FETCH`, `FETCH FORWARD`, `FETCH ABSOLUTE c`, `FETCH 99999999999999999999 c`, `CLOSE`, `FETCH c d`, `DECLARE c FOR SELECT 1`} {
		if _, err := ParseSession(in); err == nil {
			t.Errorf("ParseSession(%q) accepted", in)
		} else if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.SyntaxError {
			t.Errorf("ParseSession(%q) = %v, want 42601", in, err)
		}
	}
}

// TestParseSession_Copy: the COPY forms psql's \copy and drivers send, with
// PostgreSQL's defaults per format.
func TestParseSession_Copy(t *testing.T) {
	t.Parallel()
	q := "SELECT sex, COUNT(*) FROM patients GROUP BY sex"
	for _, tc := range []struct {
		in   string
		want CopyStmt
	}{
		{`COPY (` + q + `) TO STDOUT`, CopyStmt{Query: q, QueryOffset: 6, Delimiter: "\t", Null: `\N`}},
		{`COPY ( ` + q + ` ) TO STDOUT WITH (FORMAT csv, HEADER)`, CopyStmt{Query: q + " ", QueryOffset: 7, CSV: true, Header: true,
			Delimiter: ",", Null: "", Quote: `"`, Escape: `"`}},
		{`COPY (` + q + `) TO STDOUT with csv header delimiter as ';' null 'NA' force quote sex`, CopyStmt{Query: q, QueryOffset: 6, CSV: true, Header: true,
			Delimiter: ";", Null: "NA", Quote: `"`, Escape: `"`, ForceQuote: []string{"sex"}}},
		{`COPY (` + q + `) TO STDOUT (FORMAT 'text', HEADER false, NULL '', DELIMITER '|')`, CopyStmt{Query: q, QueryOffset: 6, Delimiter: "|", Null: ""}},
		{`COPY (` + q + `) TO STDOUT (FORMAT csv, FORCE_QUOTE *, QUOTE '''', ESCAPE '\')`, CopyStmt{Query: q, QueryOffset: 6, CSV: true,
			Delimiter: ",", Quote: "'", Escape: `\`, ForceQuoteAll: true}},
	} {
		st, err := ParseSession(tc.in)
		if err != nil {
			t.Errorf("ParseSession(%q): %v", tc.in, err)
			continue
		}
		if st.Kind != SessionCopy || st.Copy == nil || !reflect.DeepEqual(*st.Copy, tc.want) {
			t.Errorf("ParseSession(%q) = %+v, want %+v", tc.in, st.Copy, tc.want)
		}
	}
}

// TestParseSession_PoolReset: what asyncpg's pool sends when a connection
// is released, statement by statement.
func TestParseSession_PoolReset(t *testing.T) {
	t.Parallel()
	stmts, err := Split("SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []SessionKind
	for _, s := range stmts {
		if r, err := Classify(nil, s); r != RouteSession || err != nil {
			t.Fatalf("Classify(%q) = %v, %v; want RouteSession", s, r, err)
		}
		st, err := ParseSession(s)
		if err != nil {
			t.Fatalf("ParseSession(%q): %v", s, err)
		}
		kinds = append(kinds, st.Kind)
	}
	if want := []SessionKind{SessionUnlockAll, SessionClose, SessionUnlisten, SessionReset}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
}
