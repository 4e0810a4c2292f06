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
	var mu sync.Mutex
	in, most := 0, 0
	ts := startServer(t, serverOpts{router: func(r *router) {
		classify := r.classify
		r.classify = func(ds *policy.Dataset, stmt string) (pgsql.Route, error) {
			big := strings.Contains(stmt, "/*bob*/") && len(stmt) > bigText
			if big {
				mu.Lock()
				in++
				most = max(most, in)
				mu.Unlock()
				time.Sleep(30 * time.Millisecond)
				mu.Lock()
				in--
				mu.Unlock()
			}
			return classify(ds, stmt)
		}
	}})
	pad := "/*" + strings.Repeat("x", bigText) + "*/"
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		pc := ts.connectAs(t, "bob", "bob-secret", "hospital")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				_, _ = pc.Exec(context.Background(), "DECLARE c CURSOR WITH HOLD FOR SELECT 1 /*bob*/ "+pad+"; CLOSE c").ReadAll()
				_, _ = pc.Exec(context.Background(), "COPY (SELECT 1 /*bob*/ "+pad+") TO STDOUT").ReadAll()
			}
		}()
	}
	wg.Wait()
	t.Logf("bob's strings over %d bytes checked at once: %d", bigText, most)
	if most != 1 {
		t.Errorf("one analyst's sessions checked %d strings over %d bytes at once (a DECLARE's or COPY's query); want 1", most, bigText)
	}
}
