package proxy

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgconn"
	"time"

	"strings"
	"testing"
)

// TestReview95_RefusedSettingNoStateForNextHolder: alice's session sets
// valid catalog settings, runs a catalog statement (they are applied on
// the pooled connection), then changes several of them at once together
// with a TimeZone the shadow refuses. The refused Apply's connection goes
// back to the pool (attack round 92's fix); bob, the next holder of the
// same connection, must see his own session's values, and alice, after
// RESET TimeZone, her own.
func TestReview95_RefusedSettingNoStateForNextHolder(t *testing.T) {
	ts := startShadowServer(t)
	alice := ts.connect(t)
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	const show = "SELECT current_setting('DateStyle'), current_setting('TimeZone'), current_setting('search_path'), current_setting('IntervalStyle'), current_setting('extra_float_digits'), current_setting('application_name'), current_setting('bytea_output'), current_setting('xmloption')"
	res, err := execAll(t, bob, show)
	if err != nil {
		t.Fatal(err)
	}
	bobWant := strings.Join(rows(res[0])[0], "|")
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	for _, s := range []string{
		"SET DateStyle = 'German'", "SET TimeZone = 'Asia/Tokyo'", "SET search_path = other",
		"SET IntervalStyle = 'iso_8601'", "SET extra_float_digits = 0", "SET application_name = 'alice-secret'",
		"SET bytea_output = 'escape'", "SET xmloption = 'document'",
	} {
		if _, err := execAll(t, alice, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if _, err := execAll(t, alice, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// Several changed at once, one of them refused by the shadow.
	for _, s := range []string{
		"SET DateStyle = 'SQL, DMY'", "SET search_path = other, public", "SET IntervalStyle = 'sql_standard'",
		"SET application_name = 'alice-secret-2'", "SET TimeZone = '+9999'",
	} {
		if _, err := execAll(t, alice, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	_, err = execAll(t, alice, "SELECT 1")
	if sqlstate(err) != "22023" {
		t.Fatalf("alice's SELECT 1 under TimeZone '+9999': %v, want 22023", err)
	}
	st := pool.Stats()
	t.Logf("pool after the refused Apply: %+v", st)
	if st.Idle != 1 || st.Open != 1 {
		t.Fatalf("the refused Apply's connection was not pooled (%+v): the test needs bob to get it", st)
	}
	res, err = execAll(t, bob, show)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows(res[0])[0], "|"); got != bobWant {
		t.Errorf("bob sees %q after alice's refused setting, want his own %q", got, bobWant)
	}
	// And alice, after fixing her setting, runs with her own values.
	if _, err := execAll(t, alice, "SET TimeZone = 'Europe/Paris'"); err != nil {
		t.Fatal(err)
	}
	res, err = execAll(t, alice, show)
	if err != nil {
		t.Fatal(err)
	}
	aliceWant := "SQL, DMY|Europe/Paris|other, public|sql_standard|0|alice-secret-2|escape|document"
	if got := strings.Join(rows(res[0])[0], "|"); got != aliceWant {
		t.Errorf("alice sees %q, want %q", got, aliceWant)
	}
	// Back to bob once more (the connection now holds alice's full set).
	res, err = execAll(t, bob, show)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows(res[0])[0], "|"); got != bobWant {
		t.Errorf("bob sees %q, want %q", got, bobWant)
	}
	if st := pool.Stats(); st.Opened != 1 {
		t.Logf("pool opened %d connections (want 1 for the test to mean what it says): %+v", st.Opened, st)
	}
}

// TestReview95_CancelledPostClosesIdleShadow: a post-processing DP
// statement takes its shadow connection before any charge and keeps it,
// idle, while its leaves run (post.go). A client that cancels it then (a
// BI tool leaving a dashboard, pgjdbc's setQueryTimeout under
// response_time's padding) has sent nothing to that connection, yet
// execPost's release sees the statement's context ended and closes it
// (Release(sc, false)), and attack round 92's bucket counts the close
// against the analyst: each cancel costs the shadow a fork and the
// analyst a token, and past the burst their catalog and post-processing
// statements are refused with 53000.
func TestReview95_CancelledPostClosesIdleShadow(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan struct{}, 16)
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		for _, d := range c.Datasets {
			d.Upstream = nopUpstream{}
		}
	}})
	ts.releaser.mu.Lock()
	ts.releaser.gate, ts.releaser.started = gate, started
	ts.releaser.mu.Unlock()
	alice := ts.connect(t)
	if _, err := execAll(t, alice, "SET dp.epsilon = 0.001"); err != nil {
		t.Fatal(err)
	}
	pool := ts.srv.shadowPool(ts.srv.cfg.Datasets["hospital"])
	if _, err := execAll(t, alice, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	before, tokens0 := pool.Stats(), ts.srv.churnBucket("alice").Tokens()
	const n = 5
	for i := 0; i < n; i++ {
		q := fmt.Sprintf("SELECT s.n + 1 AS m FROM (SELECT COUNT(*) AS n FROM visits WHERE age > %d) s", i)
		errs := make(chan error, 1)
		go func() {
			_, err := alice.Exec(context.Background(), q).ReadAll()
			errs <- err
		}()
		select {
		case <-started:
		case err := <-errs:
			t.Fatalf("%s ended before its leaf ran: %v", q, err)
		case <-time.After(15 * time.Second):
			t.Fatal("the leaf never ran")
		}
		if err := alice.CancelRequest(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; sqlstate(err) != "57014" {
			t.Fatalf("cancelled statement: %v, want 57014", err)
		}
		gate <- struct{}{} // the leaf's release ends
	}
	after, tokens := pool.Stats(), ts.srv.churnBucket("alice").Tokens()
	t.Logf("%d cancelled post-processing statements: pool %+v -> %+v; alice's churn tokens %.1f -> %.1f", n, before, after, tokens0, tokens)
	if after.Open < before.Open || tokens < tokens0-1 {
		t.Errorf("cancelling %d post-processing statements while their leaves ran closed their idle shadow connections (pool %+v -> %+v) and took %.1f of alice's churn tokens; nothing had been sent on them",
			n, before, after, tokens0-tokens)
	}
}

// TestReview95_ChurnRefusalUsable: past the churn bucket, alice's catalog
// statement gets 53000 with a hint naming the wait; her session (in and
// out of a transaction block) goes on, bob is not refused, and after the
// wait alice's statements run again.
func TestReview95_ChurnRefusalUsable(t *testing.T) {
	ts := startShadowServer(t)
	alice := ts.connect(t)
	bob := ts.connectAs(t, "bob", "bob-secret", "hospital")
	for i := 0; i < shadowChurnBurst+5; i++ {
		ts.srv.shadowChurned("alice")
	}
	_, err := execAll(t, alice, "SELECT 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53000" || !strings.Contains(pe.Hint, "retry in") {
		t.Fatalf("alice past her bucket: %v, want 53000 with a retry hint", err)
	}
	t.Logf("53000: %s (detail %q, hint %q)", pe.Message, pe.Detail, pe.Hint)
	if _, err := execAll(t, bob, "SELECT 1"); err != nil {
		t.Errorf("bob refused: %v", err)
	}
	if _, err := execAll(t, alice, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, alice, "SELECT 1"); sqlstate(err) != "53000" {
		t.Errorf("in a block: %v", err)
	}
	if _, err := execAll(t, alice, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	if _, err := execAll(t, alice, "SELECT 1"); err != nil {
		t.Errorf("alice after the wait: %v", err)
	}
}
