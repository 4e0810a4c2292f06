package upstream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestReview68_RecheckExhaustsPool: recheck borrows a second connection
// from the pool while the failed query's transaction still holds its
// own. When every connection of the pool is held by a failing query
// (MaxConns of them fail at once, e.g. statement time-outs under load),
// each recheck waits for a connection that none will give back: the
// release's context is the session's (no deadline), so the dataset's DP
// path hangs. Here MaxConns 2 and two failing queries: both must return
// within a few seconds.
func TestReview68_RecheckExhaustsPool(t *testing.T) {
	ctx := context.Background()
	_, p := guardedPoolOf(t, 2, "CREATE TABLE visits (patient_id text, cost numeric)", "INSERT INTO visits VALUES ('a', 1)")
	// The session's context has no deadline; give the test one so that it ends.
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Both hold their connection until both have failed.
			_, _ = p.Query(qctx, "SELECT CASE WHEN pg_sleep(0.5) IS NULL THEN 1/0 END")
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("two failing queries on a pool of 2 took %v: each recheck waited for the other's connection (hangs without a deadline)", d)
	}
}

// TestReview68_GuardUnderRepeatableRead: the guard's argument assumes each
// statement takes a fresh snapshot (READ COMMITTED). The pool begins its
// transactions with the server's default isolation; a data database (or
// the reader role) with default_transaction_isolation = 'repeatable read'
// takes the transaction's snapshot when the DP query is parsed, before it
// waits for its lock behind a running ALTER TABLE. The query then reads
// the new column type (the relcache is refreshed on the lock) while the
// guard reads pg_attribute under the old snapshot: the old fingerprint,
// and the answer is released.
func TestReview68_GuardUnderRepeatableRead(t *testing.T) {
	ctx := context.Background()
	// The database's default isolation is set before the pool connects.
	dsn, p := guardedPool(t, "CREATE TABLE visits (patient_id varchar(10), cost numeric)", "INSERT INTO visits VALUES ('a', 1)",
		"DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = ''repeatable read''', current_database()); END $$")
	alter, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer alter.Close(ctx)
	if _, err := alter.Exec(ctx, "BEGIN; ALTER TABLE visits ALTER COLUMN patient_id TYPE varchar(20)"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Query(ctx, "SELECT count(*) FROM visits /* review68 */")
		done <- err
	}()
	waitFor(t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%review68 */%' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
	if _, err := alter.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("a query that waited for the ALTER's lock and read the new type was answered (guard read the old snapshot); Stale() = %v", p.Stale())
	}
}
