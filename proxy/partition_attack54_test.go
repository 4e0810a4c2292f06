package proxy

import (
	"context"
	"testing"
	"time"
)

// Attack round 54 on 3fde491 (partition selection streams its candidate
// groups: release.RowStreamer, internal/upstream.Pool.QueryEach,
// release/partition.go groupSelector).

// TestAttack54_SampleAggPrivateKeyHoldsAllCandidates (high; any
// authenticated analyst, one query at a small ε): round 53's fix streams
// the candidates of partition selection only in release.execute
// (release/release.go:204-216). A private-key GROUP BY answered by
// sample-and-aggregate — corr or regr_r2 of two bounded columns, grouped
// by a column without public values — goes to executeSampleAgg
// (release/release.go:148), which still reads the whole candidate result
// with req.Upstream.Query (release/sampleagg.go:180) and keeps it while
// dataGroups and collectLevels walk it (sampleagg.go:184-188), before the
// noisy count drops nearly every candidate (sampleagg.go:199-206). The
// sample-and-aggregate SQL returns one row per candidate group and block
// level (GROUPING SETS: 12 rows per group here), each repeating the key:
// 4,000 patients with one 1,000-byte diagnosis each make one query hold
// about 49 MB at once (20,000 patients × 4,000 bytes, round 53's shape,
// made 990 MB in the review, twelve times round 53's 82 MB) against a
// 16 MiB max_memory_per_analyst_mb, all after the charge and outside every
// bound: round 53's finding (Rule 1: memory for one statement bounded by
// public quantities before the charge) stands for this route.
//
// Fix: stream executeSampleAgg's candidates too: the SA SQL orders the
// rows by group (or group them upstream into one row per group with the
// levels as arrays), noise each group's unit count as its rows end and
// keep only the selected groups' levels (the count is drawn per group in
// the same order); or refuse sample-and-aggregate with private keys before
// the charge.
func TestAttack54_SampleAggPrivateKeyHoldsAllCandidates(t *testing.T) {
	const (
		patients = 4_000
		keyBytes = 1_000
		bound    = 16 << 20 // max_memory_per_analyst_mb below
	)
	r, meter := startRealDP53(t, []string{
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END, 'north' FROM generate_series(1, 4000) p`,
		// One visit per patient, each with its own long diagnosis text:
		// 4,000 candidate groups of one unit each.
		`INSERT INTO visits SELECT p, DATE '2021-01-01' + p % 365, 'cardiology', md5(p::text) || repeat('x', 1000 - 32), 20 + p % 60, 10, 1 + p % 9 FROM generate_series(1, 4000) p`,
	}, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	pc, _ := r.connectNotices(t, "alice", "alice")
	before := len(r.charges(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := pc.Exec(ctx, `SET dp.epsilon = 0.5; SET dp.delta = 1e-7; SET dp.contribution = fixed;
		SELECT diagnosis, corr(age, length_of_stay) FROM visits GROUP BY diagnosis`).ReadAll()
	charged := len(since(r.charges(t), before, "alice"))
	rows, bytes := meter.largest()
	meter.mu.Lock()
	streamed := meter.streamed
	meter.mu.Unlock()
	t.Logf("err=%v, charges=%d; largest upstream result held by the release: %d rows, %d bytes (rows streamed one at a time: %d)", err, charged, rows, bytes, streamed)
	if err != nil && charged == 0 {
		return // refused before the charge: bounded
	}
	if bytes > bound {
		t.Errorf("one private-key GROUP BY by sample-and-aggregate (corr; charged %d time(s)) made the proxy hold %d rows, %d bytes of one upstream result at once (%d patients × %d-byte keys), over %d bytes (the analyst's whole memory bound): executeSampleAgg reads every candidate with Upstream.Query, not the RowStreamer of round 53's fix",
			charged, rows, bytes, patients, keyBytes, bound)
	}
}
