package rewrite

import (
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/upstream"
)

// TestAttack108_CollidingGroupKeysTime is attack round 108: a private key's
// emitted SQL groups the rows by (unit, key…) first, and PostgreSQL does
// that with a hash aggregate whose hash of a group is
// murmurhash32(rotl(rotl(h(unit), 1) ^ h(k0), 1) ^ h(k1)): the columns'
// hashes (hashint4, hash_bytes, …: public functions without a secret)
// combined by rotation and XOR. For one unit, every pair of key values
// with rotl(h(k0), 1) ^ h(k1) equal gets the same 32-bit hash, and a
// birthday search finds tens of thousands of such pairs in a second. A
// hash table cannot spread groups that share their whole hash, so each
// insertion walks all of them: one patient with 20,000 visits whose
// (age, length_of_stay) pairs collide made the demo's `SELECT age,
// length_of_stay, COUNT(*) … GROUP BY age, length_of_stay` (250,000
// declared rows, a 2 s slot) run 5.4 s upstream against 0.36 s with
// 20,000 ordinary pairs, and answer through the proxy at 8 s against 2 s
// (10,000 such visits: 4 s). The rows are within the table's max_rows;
// their work is quadratic in their number, which no per-row weight of
// the work bound covers. A single bigint key collides the same way
// (hashint8 folds the high half into the low one). The upstream
// transactions of a plan with a private key now plan without hash
// aggregation (upstream.ForPlan: a sort takes the same time whatever the
// keys' hashes).
//
// The emitted SQL runs through an upstream.Pool on the demo database with
// one patient's 20,000 visits colliding, then distinct but ordinary,
// three times each alternately; the test fails when the fastest colliding
// run is more than 300 ms slower than the fastest ordinary one.
func TestAttack108_CollidingGroupKeysTime(t *testing.T) {
	dsn, conn, ctx, ds := demoHospital(t)
	exec := execer(t, ctx, conn)
	// The test's hash is PostgreSQL's.
	for _, k := range []int32{0, 5, -7, 123456} {
		var got int32
		if err := conn.QueryRow(ctx, "SELECT hashint4($1::int4)", k).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if uint32(got) != pgHashInt4(k) {
			t.Fatalf("hashint4(%d) = %d, the test computes %d", k, got, int32(pgHashInt4(k)))
		}
	}
	const n = 20000
	pairs := collidingInt4Pairs(n)
	var ages, stays []int32
	for _, p := range pairs {
		ages, stays = append(ages, p[0]), append(stays, p[1])
	}
	exec("ALTER TABLE visits DROP CONSTRAINT IF EXISTS visits_patient_id_fkey")
	exec("CREATE TABLE colliding AS SELECT a, l, ordinality AS i FROM unnest($1::int4[], $2::int4[]) WITH ORDINALITY AS u(a, l)", ages, stays)
	exec(`INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay)
		SELECT 90108000 + i, 90108, '2023-01-01', 'oncology', 'x', i, 100, i + 7 FROM colliding`)
	exec("ANALYZE visits")

	p, err := RewriteWith(ds, "SELECT age, length_of_stay, COUNT(*) FROM visits GROUP BY age, length_of_stay", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.SQL, "GROUP BY dp_unit, ") || !strings.Contains(p.SQL, ", dp_k0, dp_k1) AS dp_unit_groups") {
		t.Fatalf("the per-unit stage no longer groups by the unit and both keys:\n%s", p.SQL)
	}
	pool, err := upstream.New(ctx, upstream.Config{DSN: dsn, StatementTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	run := func() time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := pool.Query(upstream.ForPlan(ctx, p), p.SQL, p.QueryArgs(ds)...); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	run()
	short, long := time.Hour, time.Hour
	for range 3 {
		exec("UPDATE visits v SET age = c.a, length_of_stay = c.l FROM colliding c WHERE v.visit_id = 90108000 + c.i")
		long = min(long, run())
		exec("UPDATE visits v SET age = c.i, length_of_stay = c.i + 7 FROM colliding c WHERE v.visit_id = 90108000 + c.i")
		short = min(short, run())
	}
	t.Logf("fastest run with the patient's %d visits' keys ordinary: %v, colliding: %v", n, short, long)
	if long-short > 300*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's %d visits had keys whose hashes collide (%v against %v): the per-unit grouping is a hash table whose work the keys' hashes decide", long-short, n, long, short)
	}
}

// pgHashInt4 is PostgreSQL's hashint4 (hash_bytes_uint32: Jenkins'
// lookup3 final mix of one word).
func pgHashInt4(k int32) uint32 {
	a := uint32(0x9e3779b9) + 4 + 3923095
	b, c := a, a
	a += uint32(k)
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}

// collidingInt4Pairs returns n distinct pairs (a, l) of non-negative int4
// values with rotl(hashint4(a), 1) ^ hashint4(l) the same for all, so
// that (unit, a, l) has one hash in PostgreSQL's grouping hash table
// whatever the unit: a birthday search between 2²⁰ values of a and as many
// values of l as it takes.
func collidingInt4Pairs(n int) [][2]int32 {
	const target = uint32(0x5bd1e995)
	byHash := make(map[uint32]int32, 1<<20)
	for a := int32(0); a < 1<<20; a++ {
		byHash[bits.RotateLeft32(pgHashInt4(a), 1)^target] = a
	}
	var out [][2]int32
	for l := int32(0); len(out) < n && l < 1<<30; l++ {
		if a, ok := byHash[pgHashInt4(l)]; ok {
			out = append(out, [2]int32{a, l})
		}
	}
	return out
}
