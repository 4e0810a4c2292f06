package proxy

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAttack37_SessionBoundsMultiplyBySessions (medium; an authenticated
// analyst): rounds 33-36 bounded what ONE session holds in the proxy's
// heap - named prepared statements 32 MiB (maxPreparedBytes), portals'
// parameters 32 MiB (maxPortalBytes), run portals and cursors about twice
// MaxBufferedResult (128 MiB), savepoints' settings 16 MiB - about
// 210 MiB per session, but nothing bounds their sum over an analyst's
// sessions or over the proxy. One analyst holds max_connections_per_analyst
// sessions (50 with the default max_connections 200), so ~10 GB of proxy
// heap, and four analysts all of max_connections (~40 GB): the proxy is
// killed for lack of memory, ending every analyst's session and every DP
// release in flight (charged, unanswered) - one analyst's statements
// change every other analyst's sessions (rule 1). Each piece is cheap:
// here one Parse of a 1 MB catalog statement per round trip, no shadow
// or data server needed. The fix: charge what sessions hold (prepared
// text, portal parameters, buffered results, savepoint copies) to a
// per-analyst budget (and a proxy-wide one), e.g. a fixed share of a
// configured max_session_memory, refused with 54000 beyond it; or lower
// the per-session bounds so that max_connections times them fits the
// host, and say so in SECURITY.md gap 8.
func TestAttack37_SessionBoundsMultiplyBySessions(t *testing.T) {
	const budget = 48 << 20
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.MaxConnections = 16 // alice may hold 4 sessions
		c.MaxMemoryPerAnalyst = budget
	}})
	perAnalyst := ts.srv.cfg.MaxConnectionsPerAnalyst
	const size = 1_000_000
	lit := strings.Repeat("x", size)
	held := 0
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for s := 0; s < perAnalyst; s++ {
		nc := ts.rawConn(t)
		for i := 0; ; i++ {
			msg, err := (&pgproto3.Parse{Name: fmt.Sprintf("p%d", i), Query: "SELECT '" + lit + "'"}).Encode(nil)
			if err == nil {
				msg, err = (&pgproto3.Sync{}).Encode(msg)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nc.Write(msg); err != nil {
				t.Fatal(err)
			}
			reply := discardUntilReady(t, nc)
			if strings.HasPrefix(reply, "1") {
				held += size
				continue
			}
			if !strings.Contains(reply, "54000") {
				t.Fatalf("session %d, Parse %d: %s", s, i, reply)
			}
			break
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("alice's %d sessions hold %d MB of prepared statements; the proxy's live heap grew by %d MB",
		perAnalyst, held>>20, (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>20)
	if held > budget {
		t.Errorf("one analyst's %d sessions hold %d MiB of prepared statement text in the proxy (%d MiB per session): the per-session bounds multiply by max_connections_per_analyst (50 by default: %d MiB of prepared text alone, ~10 GB with portals, buffered results and savepoints); want the per-analyst bound (MaxMemoryPerAnalyst, here %d MiB)",
			perAnalyst, held>>20, maxPreparedBytes>>20, 50*maxPreparedBytes>>20, budget>>20)
	}
	// What a session lets go is the analyst's again: one session closes
	// (its charge is given back), and another may prepare once more.
	charged := ts.srv.memoryOf("alice")
	if charged < int64(held) || charged > budget {
		t.Errorf("alice's account holds %d bytes for %d bytes of prepared text (bound %d)", charged, held, budget)
	}
}
