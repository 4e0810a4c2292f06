package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/release"
)

// Attack round 53: partition selection with private keys (SECURITY.md,
// "What remains": "Groups of a private key: partition selection's
// candidate groups come from the data, and their proxy CPU … is neither in
// the work bound nor capped before the charge"). The stated gap is CPU,
// which padding hides and which only slows answers. The memory those
// candidates take is not stated, and it is worse: it can end the proxy.

// meteredUpstream passes every query to the real data database
// (internal/upstream) and records the largest result one call returned
// to the releaser: rows, and bytes of values (the []*string the release
// holds at once, before any noise is added).
type meteredUpstream struct {
	up release.Upstream

	mu       sync.Mutex
	maxRows  int
	maxBytes int
	streamed int // rows handed one at a time (QueryEach)
}

func (m *meteredUpstream) Query(ctx context.Context, sql string, args ...any) ([][]*string, error) {
	rows, err := m.up.Query(ctx, sql, args...)
	n := 0
	for _, r := range rows {
		n += 24 + 8*len(r) // the row's slice and its pointers
		for _, v := range r {
			if v != nil {
				n += 16 + len(*v)
			}
		}
	}
	m.mu.Lock()
	m.maxRows, m.maxBytes = max(m.maxRows, len(rows)), max(m.maxBytes, n)
	m.mu.Unlock()
	return rows, err
}

// QueryEach passes the rows through one at a time (release.RowStreamer):
// what it holds at once is one row, and it counts the rows streamed.
func (m *meteredUpstream) QueryEach(ctx context.Context, sql string, each func(row []*string) error, args ...any) error {
	return m.up.(release.RowStreamer).QueryEach(ctx, sql, func(row []*string) error {
		n := 24 + 8*len(row)
		for _, v := range row {
			if v != nil {
				n += 16 + len(*v)
			}
		}
		m.mu.Lock()
		m.streamed++
		m.maxRows, m.maxBytes = max(m.maxRows, 1), max(m.maxBytes, n)
		m.mu.Unlock()
		return each(row)
	}, args...)
}

func (m *meteredUpstream) largest() (rows, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxRows, m.maxBytes
}

// startRealDP53 is startRealDP (realdp_attack48_test.go) over a data
// database filled by seed, with every upstream query passing through a
// meteredUpstream.
func startRealDP53(t *testing.T, seed []string, mutate func(*Config)) (*realDP, *meteredUpstream) {
	t.Helper()
	var mu *meteredUpstream
	r := startRealDPOver(t, seed, func(up release.Upstream) release.Upstream {
		mu = &meteredUpstream{up: up}
		return mu
	}, mutate)
	return r, mu
}

// TestAttack53_PrivateKeyCandidatesUnboundedMemory (medium; any
// authenticated analyst, one query at the smallest ε): a GROUP BY of a
// column without public values (diagnosis in the hospital policy) is
// accepted before the charge whatever the column holds, and the release
// then reads EVERY candidate group of the data into the proxy's memory at
// once (internal/upstream/upstream.go:127 TextRows appends every row;
// release/release.go:202 req.Upstream.Query; release/partition.go:257
// selectGroups walks them all) before partition selection drops nearly
// all of them. How many candidates there are and how long their key
// values are is the data's: up to max_groups_per_unit groups per person,
// each key as long as the column's longest value. Nothing bounds it
// before the charge (release/bounded.go:121 checkAnswerCells returns nil
// for plan.PrivateGroups(); the work bound counts rows, not bytes; no
// LIMIT in the emitted SQL), and nothing counts it afterwards: the
// per-analyst memory account (max_memory_per_analyst_mb) sees only what a
// session keeps for the client. Here 20,000 patients with one 4 KB (now 1 KB: longer private keys are not grouped)
// free-text diagnosis each (a notes-like column) make one query hold
// about 80 MB for the whole selection (seconds: the noise per candidate
// is the stated CPU gap), with max_memory_per_analyst_mb at 16; an
// analyst holds dp_concurrency_per_analyst (2) such releases at once and
// dp_concurrency (10) releases of colluders add up, on a table with
// millions of rows that is gigabytes: the proxy is killed by the OOM
// killer and every analyst's sessions (and answers in flight, already
// charged) with it. Rule 1: the proxy's memory for one statement must be
// bounded before the charge by public quantities, and one analyst must
// not be able to take the other analysts' sessions down.
//
// Fixed: release reads the candidates through release.RowStreamer
// (internal/upstream.Pool.QueryEach) into a groupSelector that keeps only
// the groups it selects (release/partition.go); the test's meter passes
// the rows through one at a time and wants them all streamed.
//
// The fix: read the partition-selection rows as a stream (pgx rows.Next
// through a callback instead of Upstream.Query's [][]*string), noise each
// candidate's count as it arrives and keep only the groups that pass the
// threshold, capping the kept groups at a public bound (maxAnswerCells /
// weight; truncating the DP output in key order is post-processing), and
// state the remaining CPU gap; or refuse, before the charge, private-key
// plans over tables whose declared max_rows·L0 (and a declared maximum
// key length) exceed a memory bound.
func TestAttack53_PrivateKeyCandidatesUnboundedMemory(t *testing.T) {
	const (
		patients = 20_000
		keyBytes = 1_000    // under pgemit.MaxPrivateKeyBytes (longer keys are not grouped)
		bound    = 16 << 20 // max_memory_per_analyst_mb below
	)
	r, meter := startRealDP53(t, []string{
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END, 'north' FROM generate_series(1, 20000) p`,
		// One visit per patient, each with its own long diagnosis text:
		// 20,000 candidate groups of one unit each.
		`INSERT INTO visits SELECT p, DATE '2021-01-01' + p % 365, 'cardiology', md5(p::text) || repeat('x', 1000 - 32), 40, 10, 1 FROM generate_series(1, 20000) p`,
	}, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	pc, _ := r.connectNotices(t, "alice", "alice")
	before := len(r.charges(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := pc.Exec(ctx, `SET dp.epsilon = 0.1; SET dp.delta = 1e-7; SET dp.contribution = fixed;
		SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis`).ReadAll()
	charged := len(since(r.charges(t), before, "alice"))
	rows, bytes := meter.largest()
	t.Logf("err=%v, charges=%d; largest upstream result held by the release: %d rows, %d bytes", err, charged, rows, bytes)
	if err != nil && charged == 0 {
		return // refused before the charge: bounded
	}
	meter.mu.Lock()
	streamed := meter.streamed
	meter.mu.Unlock()
	if charged > 0 && streamed < patients {
		t.Errorf("the release read %d candidate rows one at a time, want all %d (release.RowStreamer)", streamed, patients)
	}
	if bytes > bound {
		t.Errorf("one private-key GROUP BY (charged %d time(s)) made the proxy hold %d rows, %d bytes of one upstream result at once (%d patients × %d-byte keys), over %d bytes (the analyst's whole memory bound); nothing public bounds it before the charge",
			charged, rows, bytes, patients, keyBytes, bound)
	}
}
