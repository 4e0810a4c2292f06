package proxy

import (
	"maps"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
)

// These tests drive the session's transitions directly: no socket, no
// server, no PostgreSQL (session.go). The wire tests (session_test.go,
// wire_test.go, cursor_test.go) check the same behaviour through a client.

func newTestSession(t *testing.T) *session {
	t.Helper()
	s := newSession("alice", &Dataset{Policy: hospitalPolicy(t)}, "16.0 (dpproxy)")
	if err := s.initSettings(&startupPacket{params: map[string]string{"application_name": "psql"}, order: []string{"application_name"}}); err != nil {
		t.Fatal(err)
	}
	return &s
}

func setStmt(t *testing.T, s *session, name, value string, local bool) warning {
	t.Helper()
	w, err := s.setStmt(&pgsql.SessionStmt{Kind: pgsql.SessionSet, Name: name, Value: value, Local: local}, name)
	if err != nil {
		t.Fatalf("SET %s = %s: %v", name, value, err)
	}
	return w
}

func code(err error) string {
	if e, ok := pgerr.As(err); ok {
		return e.Code
	}
	return ""
}

func TestSessionState_Defaults(t *testing.T) {
	s := newTestSession(t)
	for name, want := range map[string]string{
		"application_name":      "psql",
		"server_version":        "16.0 (dpproxy)",
		"server_version_num":    "160000",
		"session_authorization": "alice",
		"dp.epsilon":            "0.1",
		"timezone":              "UTC",
	} {
		if got := s.settings[name]; got != want {
			t.Errorf("settings[%q] = %q, want %q", name, got, want)
		}
	}
	if s.txStatus != 'I' || len(s.stmts) != 0 || len(s.portals) != 0 {
		t.Errorf("new session: status %q, %d statements, %d portals", s.txStatus, len(s.stmts), len(s.portals))
	}
}

func TestSessionState_SetResetAndReports(t *testing.T) {
	s := newTestSession(t)
	report := func() map[string]string {
		got := map[string]string{}
		s.reportChanges(func(n, v string) { got[n] = v })
		return got
	}
	if got := report(); got["TimeZone"] != "UTC" || got["application_name"] != "psql" || got["server_version"] == "" {
		t.Fatalf("first report = %v, want every reported setting", got)
	}
	if got := report(); len(got) != 0 {
		t.Fatalf("second report = %v, want nothing (no change)", got)
	}
	setStmt(t, s, "timezone", "Europe/Paris", false)
	setStmt(t, s, "extra_float_digits", "2", false) // not reported
	if got := report(); !maps.Equal(got, map[string]string{"TimeZone": "Europe/Paris"}) {
		t.Errorf("report after SET TimeZone = %v", got)
	}
	if err := s.reset("timezone"); err != nil {
		t.Fatal(err)
	}
	if got := report(); !maps.Equal(got, map[string]string{"TimeZone": "UTC"}) {
		t.Errorf("report after RESET TimeZone = %v", got)
	}

	for _, tc := range []struct{ name, value, code string }{
		{"dp.epsilon", "0", pgerr.InvalidParameterValue},
		{"dp.epsilon", "4", pgerr.InvalidParameterValue}, // over the analyst's 3.0
		{"dp.nonsense", "1", pgerr.UndefinedObject},
		{"server_version", "1", cantChangeRuntimeParam},
		{"dp.budget", "1", cantChangeRuntimeParam},
	} {
		_, err := s.setStmt(&pgsql.SessionStmt{Kind: pgsql.SessionSet, Name: tc.name, Value: tc.value}, tc.name)
		if code(err) != tc.code {
			t.Errorf("SET %s = %s: %v, want %s", tc.name, tc.value, err, tc.code)
		}
	}
	setStmt(t, s, "dp.epsilon", "0.5", false)
	if s.epsilon() != 0.5 {
		t.Errorf("epsilon() = %v after SET 0.5", s.epsilon())
	}
	s.grantedLimit = func() accountant.Spent { return accountant.Spent{Epsilon: 10, Delta: 1e-6} }
	setStmt(t, s, "dp.epsilon", "4", false) // a grant raised the limit
	setStmt(t, s, "myapp.flag", "x", false) // custom settings need no definition
	if err := s.reset("all"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.settings["myapp.flag"]; ok || s.settings["dp.epsilon"] != "0.1" {
		t.Errorf("after RESET ALL: myapp.flag present %v, dp.epsilon %q", ok, s.settings["dp.epsilon"])
	}
}

func TestSessionState_Transactions(t *testing.T) {
	s := newTestSession(t)
	if w := s.rollback(); w != warnNoTransaction {
		t.Errorf("ROLLBACK outside a block warned %v", w)
	}
	// SET LOCAL outside a block warns and lasts until its implicit
	// transaction (here the Query) ends.
	if w := setStmt(t, s, "timezone", "Asia/Tokyo", true); w.code != pgerr.NoActiveSQLTransaction || s.settings["timezone"] != "Asia/Tokyo" {
		t.Errorf("SET LOCAL outside a block: warning %v, timezone %q", w, s.settings["timezone"])
	}
	if s.endQuery(false); s.settings["timezone"] != "UTC" {
		t.Errorf("SET LOCAL outside a block: timezone %q after its Query", s.settings["timezone"])
	}
	if w := s.begin("ISOLATION LEVEL SERIALIZABLE"); w.msg != "" || s.txStatus != 'T' {
		t.Fatalf("BEGIN: warning %v, status %q", w, s.txStatus)
	}
	if s.settings["transaction_isolation"] != "serializable" {
		t.Errorf("transaction_isolation = %q", s.settings["transaction_isolation"])
	}
	if w := s.begin(""); w != warnInTransaction {
		t.Errorf("BEGIN in a block warned %v", w)
	}
	setStmt(t, s, "timezone", "Europe/Paris", false)
	setStmt(t, s, "datestyle", "German", true)
	if tag, w := s.commit(); tag != "COMMIT" || w.msg != "" {
		t.Errorf("COMMIT = %q, %v", tag, w)
	}
	// COMMIT keeps SET, not SET LOCAL, and ends the isolation level.
	if s.txStatus != 'I' || s.settings["timezone"] != "Europe/Paris" || s.settings["datestyle"] != "ISO, MDY" ||
		s.settings["transaction_isolation"] != "read committed" {
		t.Errorf("after COMMIT: status %q, timezone %q, datestyle %q, isolation %q", s.txStatus,
			s.settings["timezone"], s.settings["datestyle"], s.settings["transaction_isolation"])
	}

	// ROLLBACK restores the settings of BEGIN; an error fails the block
	// and COMMIT of a failed block rolls back.
	s.begin("")
	setStmt(t, s, "timezone", "Asia/Tokyo", false)
	s.fail()
	if s.txStatus != 'E' {
		t.Fatalf("status after an error = %q, want E", s.txStatus)
	}
	if tag, _ := s.commit(); tag != "ROLLBACK" || s.settings["timezone"] != "Europe/Paris" {
		t.Errorf("COMMIT of a failed block = %q, timezone %q", tag, s.settings["timezone"])
	}
	s.fail() // outside a block an error changes nothing
	if s.txStatus != 'I' {
		t.Errorf("status after an error outside a block = %q", s.txStatus)
	}
}

func TestSessionState_Savepoints(t *testing.T) {
	s := newTestSession(t)
	if _, err := s.savepointStmt(pgsql.SessionSavepoint, "a"); code(err) != pgerr.NoActiveSQLTransaction {
		t.Fatalf("SAVEPOINT outside a block: %v", err)
	}
	s.begin("")
	setStmt(t, s, "timezone", "Europe/Paris", false)
	step := func(kind pgsql.SessionKind, name, wantTag string) {
		t.Helper()
		tag, err := s.savepointStmt(kind, name)
		if err != nil || tag != wantTag {
			t.Fatalf("%v %s = %q, %v; want %q", kind, name, tag, err, wantTag)
		}
	}
	step(pgsql.SessionSavepoint, "a", "SAVEPOINT")
	setStmt(t, s, "timezone", "Asia/Tokyo", false)
	step(pgsql.SessionSavepoint, "b", "SAVEPOINT")
	setStmt(t, s, "timezone", "America/Lima", false)
	s.fail()
	// ROLLBACK TO a makes the failed block usable again, with a's settings;
	// b is gone, a stays.
	step(pgsql.SessionRollbackTo, "a", "ROLLBACK")
	if s.txStatus != 'T' || s.settings["timezone"] != "Europe/Paris" || len(s.savepoints) != 1 {
		t.Errorf("after ROLLBACK TO a: status %q, timezone %q, %d savepoints", s.txStatus, s.settings["timezone"], len(s.savepoints))
	}
	if _, err := s.savepointStmt(pgsql.SessionRelease, "b"); code(err) != "3B001" {
		t.Errorf("RELEASE of a rolled-back savepoint: %v, want 3B001", err)
	}
	setStmt(t, s, "timezone", "Asia/Tokyo", false)
	step(pgsql.SessionRelease, "a", "RELEASE")
	if len(s.savepoints) != 0 {
		t.Errorf("%d savepoints after RELEASE", len(s.savepoints))
	}
	// What ROLLBACK TO undid is not committed; the rest is.
	s.commit()
	if s.settings["timezone"] != "Asia/Tokyo" || s.savepoints != nil {
		t.Errorf("after COMMIT: timezone %q, savepoints %v", s.settings["timezone"], s.savepoints)
	}
}

func TestSessionState_ImplicitTransaction(t *testing.T) {
	s := newTestSession(t)
	s.beginImplicit()
	if !s.implicitTx {
		t.Fatal("a multi-statement Query outside a block starts an implicit transaction")
	}
	if err := s.checkDeclare(&pgsql.CursorStmt{Name: "c"}); err != nil {
		t.Fatalf("DECLARE in an implicit transaction: %v", err)
	}
	s.declare(&pgsql.CursorStmt{Name: "c"}, &resultSet{})
	s.declare(&pgsql.CursorStmt{Name: "h", Hold: true}, &resultSet{})
	setStmt(t, s, "timezone", "Europe/Paris", false)
	s.endQuery(true)
	if s.implicitTx || s.settings["timezone"] != "UTC" || len(s.cursors) != 0 {
		t.Errorf("after a failed implicit transaction: implicit %v, timezone %q, cursors %v", s.implicitTx, s.settings["timezone"], s.cursors)
	}
	if err := s.checkDeclare(&pgsql.CursorStmt{Name: "c"}); code(err) != pgerr.NoActiveSQLTransaction {
		t.Errorf("DECLARE outside any transaction: %v", err)
	}
	// A successful one keeps WITH HOLD cursors.
	s.beginImplicit()
	s.declare(&pgsql.CursorStmt{Name: "c"}, &resultSet{})
	s.declare(&pgsql.CursorStmt{Name: "h", Hold: true}, &resultSet{})
	s.endQuery(false)
	if _, ok := s.cursors["h"]; !ok || len(s.cursors) != 1 {
		t.Errorf("after a committed implicit transaction: cursors %v, want h only", s.cursors)
	}
	// Inside a block there is no implicit transaction.
	s.begin("")
	if s.beginImplicit(); s.implicitTx {
		t.Error("beginImplicit inside a block")
	}
}

func TestSessionState_CursorsAndSavepoints(t *testing.T) {
	s := newTestSession(t)
	s.begin("")
	s.declare(&pgsql.CursorStmt{Name: "c0"}, &resultSet{})
	s.savepointStmt(pgsql.SessionSavepoint, "a")
	s.declare(&pgsql.CursorStmt{Name: "c1", Hold: true}, &resultSet{})
	if err := s.checkDeclare(&pgsql.CursorStmt{Name: "c1"}); code(err) != duplicateCursor {
		t.Errorf("DECLARE of a taken name: %v", err)
	}
	s.savepointStmt(pgsql.SessionRollbackTo, "a")
	if _, ok := s.cursors["c1"]; ok {
		t.Error("ROLLBACK TO kept a cursor declared after the savepoint")
	}
	s.declare(&pgsql.CursorStmt{Name: "c2", Hold: true}, &resultSet{})
	s.savepointStmt(pgsql.SessionRelease, "a")
	s.commit()
	if _, ok := s.cursors["c2"]; !ok || len(s.cursors) != 1 {
		t.Errorf("after COMMIT: cursors %v, want c2 (WITH HOLD) only", s.cursors)
	}
	if tag, err := s.closeCursor(&pgsql.CursorStmt{Name: "c2"}); tag != "CLOSE CURSOR" || err != nil {
		t.Errorf("CLOSE c2 = %q, %v", tag, err)
	}
	if _, err := s.closeCursor(&pgsql.CursorStmt{Name: "c2"}); code(err) != invalidCursorName {
		t.Errorf("CLOSE of a closed cursor: %v", err)
	}
}

func TestSessionState_StatementsAndPortals(t *testing.T) {
	s := newTestSession(t)
	named := &preparedStatement{name: "s1", text: "SELECT 1"}
	unnamed := &preparedStatement{name: "", text: "SELECT 2"}
	s.prepare(named)
	s.prepare(unnamed)
	s.bindPortal(&portal{name: "", stmt: unnamed})
	s.bindPortal(&portal{name: "p1", stmt: named})
	s.bindPortal(&portal{name: "p2", stmt: named})

	// Sync outside a block ends the implicit transaction's portals, and
	// the skip after an error.
	s.skipUntilSync()
	s.sync()
	if len(s.portals) != 0 || s.extFailed || len(s.stmts) != 2 {
		t.Errorf("after Sync: %d portals, extFailed %v, %d statements", len(s.portals), s.extFailed, len(s.stmts))
	}
	// In a block portals live until its end; Close of a statement closes
	// its portals.
	s.begin("")
	s.bindPortal(&portal{name: "p1", stmt: named})
	s.bindPortal(&portal{name: "p3", stmt: unnamed})
	s.sync()
	if len(s.portals) != 2 {
		t.Errorf("Sync in a block closed portals: %v", s.portals)
	}
	s.closeStatement("s1")
	if _, ok := s.portals["p1"]; ok || len(s.portals) != 1 || s.stmts["s1"] != nil {
		t.Errorf("after Close of s1: portals %v, statement kept %v", s.portals, s.stmts["s1"] != nil)
	}
	s.closePortal("nonexistent") // not an error
	s.rollback()
	if len(s.portals) != 0 {
		t.Errorf("portals after ROLLBACK: %v", s.portals)
	}

	// DEALLOCATE ALL keeps the unnamed statement; DEALLOCATE of a missing
	// one is 26000; DISCARD ALL is refused in a block.
	s.prepare(named)
	if tag, err := s.deallocate("ALL"); tag != "DEALLOCATE ALL" || err != nil || len(s.stmts) != 1 || s.stmts[""] == nil {
		t.Errorf("DEALLOCATE ALL = %q, %v; statements %v", tag, err, s.stmts)
	}
	if _, err := s.deallocate("s1"); code(err) != invalidSQLStatementName {
		t.Errorf("DEALLOCATE of a missing statement: %v", err)
	}
	s.begin("")
	if err := s.discardAll(); code(err) != pgerr.ActiveSQLTransaction {
		t.Errorf("DISCARD ALL in a block: %v", err)
	}
	s.commit()
	setStmt(t, s, "timezone", "Europe/Paris", false)
	if err := s.discardAll(); err != nil || len(s.stmts) != 0 || s.settings["timezone"] != "UTC" {
		t.Errorf("DISCARD ALL: %v, statements %v, timezone %q", err, s.stmts, s.settings["timezone"])
	}

	// The bound on named statements is checked before anything is kept.
	for i := range maxPreparedStatements {
		s.stmts[string(rune('a'+i%26))+string(rune(i))] = &preparedStatement{}
	}
	if err := s.checkPreparedRoom("one-more", 1); code(err) != pgerr.ProgramLimitExceeded {
		t.Errorf("a statement over the bound: %v", err)
	}
	if err := s.checkPreparedRoom("", 1); err != nil {
		t.Errorf("the unnamed statement is always room: %v", err)
	}
}

// TestSessionState_Bounds: what a session keeps of the proxy's memory is
// bounded by public constants whatever it sends (attack round 35):
// placeholder settings in number and all settings in bytes (54000 beyond,
// the session unchanged), and a transaction's savepoints, which share the
// copy of the settings before them when nothing changed.
func TestSessionState_Bounds(t *testing.T) {
	s := newTestSession(t)
	big := make([]byte, maxSettingsBytes/2)
	for i := range big {
		big[i] = 'v'
	}
	setStmt(t, s, "x.big", string(big), false)
	if _, err := s.setStmt(&pgsql.SessionStmt{Kind: pgsql.SessionSet, Name: "x.big2", Value: string(big)}, "x.big2"); code(err) != "54000" {
		t.Errorf("settings past %d bytes: %v, want 54000", maxSettingsBytes, err)
	}
	if _, ok := s.settings["x.big2"]; ok {
		t.Error("a refused SET was kept")
	}
	// Replacing a value counts its new length, not both.
	setStmt(t, s, "x.big", string(big[:len(big)-1]), false)
	if err := s.reset("all"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n <= maxCustomSettings; n++ {
		name := "x.k" + itoa(n)
		if _, err := s.setStmt(&pgsql.SessionStmt{Kind: pgsql.SessionSet, Name: name, Value: "1"}, name); err != nil {
			if code(err) != "54000" {
				t.Fatalf("placeholder %d: %v", n, err)
			}
			break
		}
	}
	if n != maxCustomSettings {
		t.Errorf("%d placeholder settings accepted, want %d", n, maxCustomSettings)
	}
	if err := s.reset("all"); err != nil {
		t.Fatal(err)
	}

	// Savepoints with nothing changed in between share one copy: as many
	// as a JDBC autosave transaction makes cost no copy each.
	s.begin("")
	for i := range 5000 {
		if _, err := s.savepointStmt(pgsql.SessionSavepoint, "PGJDBC_AUTOSAVE"); err != nil {
			t.Fatalf("savepoint %d without changes: %v", i, err)
		}
	}
	if last := s.savepoints[len(s.savepoints)-1].bytes; last > maxSavepointMemory/4 {
		t.Errorf("5000 savepoints without changes hold %d bytes", last)
	}
	s.rollback()
	// A change before each savepoint makes each its own copy: refused
	// once they would hold maxSavepointMemory, the transaction usable.
	s.begin("")
	setStmt(t, s, "x.big", string(big), false)
	refused := false
	for i := range 1000 {
		setStmt(t, s, "x.n", itoa(i), false)
		if _, err := s.savepointStmt(pgsql.SessionSavepoint, "s"); err != nil {
			if code(err) != "54000" {
				t.Fatalf("savepoint %d: %v", i, err)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("1000 savepoints of %d-byte settings each accepted", len(big))
	}
	if b := s.savepoints[len(s.savepoints)-1].bytes; b > maxSavepointMemory {
		t.Errorf("savepoints hold %d bytes, bound %d", b, maxSavepointMemory)
	}
	if _, err := s.savepointStmt(pgsql.SessionRollbackTo, "s"); err != nil || s.txStatus != 'T' {
		t.Errorf("ROLLBACK TO after the refusal: %v, status %q", err, s.txStatus)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestCheckSearchPath: the proxy refuses the search_path values
// PostgreSQL's list syntax refuses, so none reaches a shadow connection
// that would keep its previous holder's value.
func TestCheckSearchPath(t *testing.T) {
	for v, ok := range map[string]bool{
		``: true, ` `: true, `public`: true, `"$user", public`: true, `a,b , c`: true,
		`"My Schema", "a""b"`: true, `"x"`: true, `$user`: true,
		`"x`: false, `""`: false, `a,`: false, `,a`: false, `a b`: false, `a,,b`: false, `"a"b`: false, `"a" "b"`: false,
	} {
		_, err := checkSearchPath(nil, v)
		if (err == nil) != ok {
			t.Errorf("search_path %q: %v, want accepted %v", v, err, ok)
		}
	}
}

// TestSessionState_StatementBytes: the count of the prepared statements'
// text (memory.go charges it to the analyst) follows every way a
// statement comes and goes.
func TestSessionState_StatementBytes(t *testing.T) {
	s := newTestSession(t)
	check := func(when string) {
		t.Helper()
		n := 0
		for _, ps := range s.stmts {
			n += len(ps.text)
		}
		if s.stmtBytes != n {
			t.Errorf("%s: stmtBytes %d, statements hold %d", when, s.stmtBytes, n)
		}
	}
	s.prepare(&preparedStatement{name: "a", text: "SELECT 1"})
	s.prepare(&preparedStatement{name: "", text: "SELECT 22"})
	s.prepare(&preparedStatement{name: "", text: "SELECT 333"}) // replaces the unnamed
	s.prepare(&preparedStatement{name: "b", text: "SELECT 4444"})
	check("after prepare")
	s.closeStatement("a")
	check("after Close")
	if _, err := s.deallocate("b"); err != nil {
		t.Fatal(err)
	}
	check("after DEALLOCATE")
	s.prepare(&preparedStatement{name: "c", text: "SELECT 55555"})
	if _, err := s.deallocate("all"); err != nil {
		t.Fatal(err)
	}
	check("after DEALLOCATE ALL (the unnamed stays)")
	if err := s.discardAll(); err != nil {
		t.Fatal(err)
	}
	check("after DISCARD ALL")
}

// TestSessionState_StartupSettingsSurviveRollback: start-up parameters
// and options are the session's own settings, in no transaction, so a
// first transaction that rolls back keeps them (a ROLLBACK had restored
// the defaults from before them: pandas over SQLAlchemy lost its
// dp.error_columns=on option).
func TestSessionState_StartupSettingsSurviveRollback(t *testing.T) {
	ss := newSession("alice", &Dataset{Policy: hospitalPolicy(t)}, "16.0 (dpproxy)")
	s := &ss
	sp := &startupPacket{params: map[string]string{"application_name": "nb", "options": "-c dp.error_columns=on -c dp.epsilon=0.5"},
		order: []string{"application_name", "options"}}
	if err := s.initSettings(sp); err != nil {
		t.Fatal(err)
	}
	for _, block := range []bool{true, false} {
		if block {
			s.begin("")
		}
		setStmt(t, s, "dp.epsilon", "0.2", false)
		if block {
			s.rollback()
		} else {
			s.endQuery(true) // the implicit transaction of a failed Query
		}
		if s.settings["dp.error_columns"] != "on" || s.settings["dp.epsilon"] != "0.5" || s.settings["application_name"] != "nb" {
			t.Errorf("after a first transaction that failed (block %v): dp.error_columns %q, dp.epsilon %q, application_name %q; want the start-up values",
				block, s.settings["dp.error_columns"], s.settings["dp.epsilon"], s.settings["application_name"])
		}
	}
}
