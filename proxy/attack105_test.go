package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// Attack round 105: the query a DECLARE or COPY wraps was classified again
// (materialize, queryColumns) outside the analyst's planning slot, so one
// analyst's sessions checked several strings of up to 1 MiB at once — the
// slot that bounds their checking to one core (attack round 82) covered
// only the splitting of the outer statement.
func TestAttack105_WrappedBigTextsCheckedOutsideSlot(t *testing.T) {
	bigs := &bigTexts{}
	ts := startServer(t, serverOpts{router: func(r *router) {
		classify := r.classify
		r.classify = func(ds *policy.Dataset, stmt string) (pgsql.Route, error) {
			bigs.lex(stmt)
			return classify(ds, stmt)
		}
	}})
	pad := "/*" + strings.Repeat("x", bigText) + "*/"
	bobSends(t, ts, "DECLARE c CURSOR WITH HOLD FOR SELECT 1 /*bob*/ "+pad+"; CLOSE c", "COPY (SELECT 1 /*bob*/ "+pad+") TO STDOUT")
	most := bigs.most()
	t.Logf("bob's strings over %d bytes checked at once: %d", bigText, most)
	if most != 1 {
		t.Errorf("one analyst's sessions checked %d strings over %d bytes at once (a DECLARE's or COPY's query); want 1", most, bigText)
	}
}

// fingerprintObserver writes each statement's fingerprint somewhere, as
// the audit log does (cmd/dpproxy opsObserver).
type fingerprintObserver struct{}

func (fingerprintObserver) Statement(ev StatementEvent) { _ = ev.Fingerprint() }

// TestAttack105_FingerprintsLexedOutsideSlot (medium; round 105's lead):
// a statement's fingerprint — for the audit log (every statement once it
// is on: a catalog one, a refused one, a cached DP answer), the log line
// of a refused or released one, SHOW dp.last_answer — lexed its whole text
// again after the slot that checked it was given back: 172 ms of CPU for
// a 1 MiB text, in every session of one analyst at once. Now it is lexed
// holding the analyst's slot when over bigText (conn.fingerprintOf). The
// test counts bob's big texts classified or fingerprinted at once over 4
// sessions, each sending a catalog statement and a refused one.
func TestAttack105_FingerprintsLexedOutsideSlot(t *testing.T) {
	bigs := &bigTexts{}
	busy := bigs.lex
	ts := startServer(t, serverOpts{
		mutate: func(c *Config) { c.Observer = fingerprintObserver{} },
		router: func(r *router) {
			classify, fp := r.classify, r.fingerprint
			r.classify = func(ds *policy.Dataset, stmt string) (pgsql.Route, error) {
				busy(stmt)
				return classify(ds, stmt)
			}
			r.fingerprint = func(stmt string) string {
				busy(stmt)
				return fp(stmt)
			}
		}})
	pad := "/*" + strings.Repeat("x", bigText) + "*/"
	bobSends(t, ts, "SELECT 1 /*bob*/ "+pad, "SELECT pg_sleep(0) /*bob*/ "+pad)
	most := bigs.most()
	t.Logf("bob's texts over %d bytes lexed at once: %d", bigText, most)
	if most != 1 {
		t.Errorf("one analyst's sessions lexed %d texts over %d bytes at once (classifying and fingerprinting); want 1", most, bigText)
	}
}

// bigTexts counts bob's texts over bigText lexed at once: lex stands for
// one lexing (30 ms) of a text marked /*bob*/.
type bigTexts struct {
	mu       sync.Mutex
	in, peak int
}

func (b *bigTexts) lex(stmt string) {
	if !strings.Contains(stmt, "/*bob*/") || len(stmt) <= bigText {
		return
	}
	b.mu.Lock()
	b.in++
	b.peak = max(b.peak, b.in)
	b.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	b.mu.Lock()
	b.in--
	b.mu.Unlock()
}

func (b *bigTexts) most() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// bobSends sends the statements three times over from each of 4 sessions
// of bob at once, and waits for the replies.
func bobSends(t *testing.T, ts *testServer, stmts ...string) {
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		pc := ts.connectAs(t, "bob", "bob-secret", "hospital")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				for _, st := range stmts {
					_, _ = pc.Exec(context.Background(), st).ReadAll()
				}
			}
		}()
	}
	wg.Wait()
}
