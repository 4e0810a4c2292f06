package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// Isolation of analysts on the shared shadow connections (shadow.go,
// internal/shadow "Connection pooling"), beyond the allow-lists of
// pgsql.CheckCatalog, which pgsql's tests cover.

// TestIsolation_CatalogStatementTimeout: a catalog statement runs at most
// CatalogStatementTimeout (the shadow connection's statement_timeout),
// whatever the session's own statement_timeout, fails with 57014, and
// leaves the session and the pooled connection usable.
func TestIsolation_CatalogStatementTimeout(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.ShadowMaxConns, c.CatalogStatementTimeout = 1, 300*time.Millisecond
	}})
	pc := ts.connect(t)
	start := time.Now()
	_, err := execAll(t, pc, "SELECT count(*) FROM pg_attribute a, pg_attribute b, pg_attribute c")
	if sqlstate(err) != "57014" || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("a catalog statement over the catalog timeout: %v, want 57014", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("it ran %v under a 300ms catalog timeout", d)
	}
	// A session's longer statement_timeout does not lift it; its own
	// value is not the shadow connection's.
	if got := oneValue(t, pc, "SET statement_timeout = '1h'; SELECT current_setting('statement_timeout')"); got != "300ms" {
		t.Errorf("the shadow connection's statement_timeout after SET statement_timeout = '1h': %s, want 300ms", got)
	}
	if got := oneValue(t, pc, "SELECT 2"); got != "2" {
		t.Fatalf("SELECT 2 after the timeout: %s", got)
	}
	if st := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"]).Stats(); st.Opened != 1 {
		t.Errorf("%d shadow connections opened, want 1 (the timed-out one reused)", st.Opened)
	}
	for _, n := range shadowSettingNames {
		switch n {
		case "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "default_transaction_read_only", "transaction_read_only":
			t.Errorf("%s is applied to shadow connections; it is the pool's", n)
		}
	}
}

// holeyClassify routes what starts with "SELECT set_config" or "SELECT
// pg_advisory" to the catalog: an allow-list with a hole, to check what
// the shadow connections do about a statement that should never reach
// them.
func holeyClassify(ds *policy.Dataset, stmt string) (pgsql.Route, error) {
	s := strings.TrimSpace(stmt)
	if strings.HasPrefix(s, "SELECT set_config") || strings.HasPrefix(s, "SELECT pg_advisory") {
		return pgsql.RouteCatalog, nil
	}
	return pgsql.Classify(ds, stmt)
}

// TestIsolation_ChangedStateNotPooled: should a statement that changes a
// reported setting reach a shadow connection, the connection is closed
// rather than pooled, so the next analyst's statement does not see the
// change; and the proxy's own shadow queries (a cursor's) check the
// allow-lists again.
func TestIsolation_ChangedStateNotPooled(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t),
		mutate: func(c *Config) { c.ShadowMaxConns = 1 },
		router: func(r *router) { r.classify = holeyClassify },
	})
	alice := ts.connect(t)
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	if got := oneValue(t, bob, "SELECT current_setting('TimeZone')"); got != "UTC" {
		t.Fatalf("bob's TimeZone: %s", got)
	}
	for i, sql := range []string{
		"SELECT set_config('TimeZone', 'Asia/Tokyo', false)",
		"SELECT set_config('DateStyle', 'German', false)",
		"SELECT set_config('application_name', 'mallory', false)",
	} {
		if _, err := execAll(t, alice, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if got := oneValue(t, bob, "SELECT current_setting('TimeZone') || ' ' || current_setting('DateStyle') || ' ' || current_setting('application_name')"); got != "UTC ISO, MDY " {
			t.Errorf("after alice's %s, bob's catalog statement saw %q", sql, got)
		}
		if st := pool.Stats(); st.Opened != int64(i+2) {
			t.Errorf("after %s: %d connections opened, want %d (the changed one closed)", sql, st.Opened, i+2)
		}
	}
	// Through the extended protocol too.
	if rr := alice.ExecParams(ctxT(t), "SELECT set_config('TimeZone', $1, false)", [][]byte{[]byte("Asia/Tokyo")}, nil, nil, nil).Read(); rr.Err != nil {
		t.Fatal(rr.Err)
	}
	if got := oneValue(t, bob, "SELECT current_setting('TimeZone')"); got != "UTC" {
		t.Errorf("after alice's extended set_config, bob's TimeZone: %s", got)
	}
	// A cursor's query runs on the shadow through the proxy's own path,
	// which applies the allow-lists whatever the classifier said.
	_, err := execAll(t, alice, "BEGIN; DECLARE c CURSOR FOR SELECT set_config('TimeZone', 'Asia/Tokyo', false); FETCH c")
	if sqlstate(err) != "42501" {
		t.Errorf("a cursor over set_config: %v, want 42501", err)
	}
	if _, err := execAll(t, alice, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := oneValue(t, bob, "SELECT current_setting('TimeZone')"); got != "UTC" {
		t.Errorf("after alice's cursor, bob's TimeZone: %s", got)
	}
}

// TestIsolation_ReadOnly: a statement that reaches a shadow connection
// cannot write, whatever it calls: the connection is read-only from the
// start and no analyst setting changes that.
func TestIsolation_ReadOnly(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), router: func(r *router) { r.classify = holeyClassify }})
	pc := ts.connect(t)
	if got := oneValue(t, pc, "SET default_transaction_read_only = off; SELECT current_setting('default_transaction_read_only') || current_setting('transaction_read_only')"); got != "onon" {
		t.Errorf("the shadow connection's read-only settings after SET default_transaction_read_only = off: %s, want onon", got)
	}
	// set_config reaches the shadow only through the hole: PostgreSQL
	// refuses to leave read-only mode inside the statement's own
	// transaction, and a connection whose default changed is closed.
	if _, err := execAll(t, pc, "SELECT set_config('transaction_read_only', 'off', false)"); sqlstate(err) != "25001" {
		t.Errorf("set_config('transaction_read_only', 'off'): %v, want 25001", err)
	}
	if _, err := execAll(t, pc, "SELECT set_config('default_transaction_read_only', 'off', false)"); err != nil {
		t.Fatal(err)
	}
	if got := oneValue(t, pc, "SELECT current_setting('default_transaction_read_only')"); got != "on" {
		t.Errorf("default_transaction_read_only after set_config of it through the hole: %s, want on (a new connection)", got)
	}
}
