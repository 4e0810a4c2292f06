package proxy

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAttack40_HonestPoolMemoryAccount (regression, passing): a pool of
// one analyst's sessions runs what honest clients send, concurrently and
// with the default bounds — catalog metadata in the extended protocol
// (pgx), named statements re-executed (pgjdbc after prepareThreshold), DP
// answers (post-processed ones need the real release path, which this
// harness's fake releaser does not take: not covered here), cursors fetched and moved with savepoints
// rolled back over them (psycopg named cursors), row-limited Executes of a
// catalog portal (pgjdbc fetchSize), Describe-then-Execute, pipelined
// batches with an error after rows were kept, COPY (query) TO STDOUT and
// DISCARD ALL — and none of it gets a 54000; when the sessions are idle
// the analyst's account holds only their prepared statements' text (no
// result, reservation or cursor left charged), and once they end it is
// back to exactly 0 (no drift that would lock a long-running pool out).
func TestAttack40_HonestPoolMemoryAccount(t *testing.T) {
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t)})
	const sessions, rounds = 12, 4
	catalog := []string{
		"SELECT c.relname, a.attname, a.atttypid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid WHERE a.attnum > 0",
		"SELECT n.nspname, c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r','v') ORDER BY 1, 2",
		"SELECT typname, oid FROM pg_catalog.pg_type",
		"SELECT version()",
	}
	dp := []string{
		"SELECT COUNT(*) FROM visits",
		"SELECT department, COUNT(*) FROM visits GROUP BY department",
	}
	var mu sync.Mutex
	var failures []string
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, a...))
	}
	pcs := make([]*pgconn.PgConn, sessions)
	raws := make([]net.Conn, sessions)
	for i := range pcs {
		pcs[i] = ts.connect(t)
		if i%3 == 0 {
			raws[i] = ts.rawConn(t)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			pc := pcs[i]
			ctx := ctxT(t)
			check := func(what string, err error) {
				if err != nil {
					fail("session %d, %s: %v (%s)", i, what, err, sqlstate(err))
				}
			}
			// Named statements, prepared once and executed each round.
			for k, q := range append(append([]string{}, catalog...), dp[0]) {
				_, err := pc.Prepare(ctx, fmt.Sprintf("S_%d", k), q, nil)
				check("prepare "+q, err)
			}
			for r := 0; r < rounds; r++ {
				for k := range catalog {
					check("catalog (named)", pc.ExecPrepared(ctx, fmt.Sprintf("S_%d", k), nil, nil, nil).Read().Err)
				}
				for _, q := range catalog {
					check("catalog "+q, pc.ExecParams(ctx, q, nil, nil, nil, nil).Read().Err)
				}
				for _, q := range dp {
					check("dp "+q, pc.ExecParams(ctx, q, nil, nil, nil, nil).Read().Err)
				}
				check("dp (named)", pc.ExecPrepared(ctx, fmt.Sprintf("S_%d", len(catalog)), nil, nil, nil).Read().Err)
				// psql-style simple statements, cursors and savepoints.
				_, err := pc.Exec(ctx, "BEGIN; DECLARE c SCROLL CURSOR FOR SELECT relname FROM pg_catalog.pg_class; FETCH 10 FROM c; MOVE 5 IN c; FETCH BACKWARD 3 FROM c; SAVEPOINT a; DECLARE d CURSOR FOR SELECT oid, typname FROM pg_catalog.pg_type; FETCH 2 FROM d; ROLLBACK TO a; CLOSE c; COMMIT").ReadAll()
				check("cursors", err)
				_, err = pc.Exec(ctx, "DECLARE h CURSOR WITH HOLD FOR SELECT attname FROM pg_catalog.pg_attribute; FETCH 100 FROM h; CLOSE h").ReadAll()
				check("hold cursor", err)
				// A pipelined batch: catalog, DP, then an error after rows
				// were kept (the relay grew the reservation), then more.
				b := &pgconn.Batch{}
				b.ExecParams(catalog[0], nil, nil, nil, nil)
				b.ExecParams(dp[0], nil, nil, nil, nil)
				b.ExecParams("SELECT 1 / (g - 30000) FROM generate_series(1, 40000) g", nil, nil, nil, nil)
				b.ExecParams(catalog[2], nil, nil, nil, nil)
				if _, err := pc.ExecBatch(ctx, b).ReadAll(); err == nil || sqlstate(err) != "22012" {
					fail("session %d, batch: %v (want 22012)", i, err)
				}
				var sb strings.Builder
				_, err = pc.CopyTo(ctx, &sb, "COPY (SELECT relname, relkind FROM pg_catalog.pg_class) TO STDOUT")
				check("copy", err)
				if raw := raws[i]; raw != nil {
					nc := raw
					// pgjdbc with fetchSize: row-limited Executes of a named
					// portal in a transaction, Describe first (libpq), then
					// the portal closed before its end; then one read to
					// its end and re-executed.
					sendMsgs(t, nc, &pgproto3.Query{String: "BEGIN"})
					rep := discardUntilReady(t, nc)
					msgs := []pgproto3.FrontendMessage{
						&pgproto3.Parse{Name: "fs", Query: catalog[0]},
						&pgproto3.Bind{DestinationPortal: "cur", PreparedStatement: "fs"},
						&pgproto3.Describe{ObjectType: 'P', Name: "cur"},
						&pgproto3.Execute{Portal: "cur", MaxRows: 50},
						&pgproto3.Execute{Portal: "cur", MaxRows: 50},
						&pgproto3.Close{ObjectType: 'P', Name: "cur"},
						&pgproto3.Bind{DestinationPortal: "cur2", PreparedStatement: "fs"},
						&pgproto3.Execute{Portal: "cur2", MaxRows: 100},
						&pgproto3.Execute{Portal: "cur2"},
						&pgproto3.Execute{Portal: "cur2"},
						&pgproto3.Sync{},
					}
					sendMsgs(t, nc, msgs...)
					rep += discardUntilReady(t, nc)
					sendMsgs(t, nc, &pgproto3.Close{ObjectType: 'S', Name: "fs"}, &pgproto3.Query{String: "COMMIT"})
					rep += discardUntilReady(t, nc)
					if strings.Contains(rep, "E") {
						fail("session %d, fetchSize portals: %s", i, rep)
					}
				}
			}
			if i%4 == 1 {
				_, err := pc.Exec(ctx, "DISCARD ALL").ReadAll()
				check("discard all", err)
			}
		}(i)
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	// Idle: only the named statements' text is held (about 13 of them of
	// a few hundred bytes, in 12 sessions).
	t.Logf("alice's idle sessions are charged %d bytes", ts.srv.memoryOf("alice"))
	if held := ts.srv.memoryOf("alice"); held < 0 || held > 256<<10 {
		t.Errorf("alice's idle sessions are charged %d bytes: results, reservations or cursors left charged (or a negative drift)", held)
	}
	for _, pc := range pcs {
		pc.Close(ctxT(t))
	}
	for _, raw := range raws {
		if raw != nil {
			raw.Close()
		}
	}
	for i := 0; ts.srv.memoryOf("alice") != 0; i++ {
		if i == 500 {
			t.Fatalf("alice's account is %d bytes after all her sessions ended", ts.srv.memoryOf("alice"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
