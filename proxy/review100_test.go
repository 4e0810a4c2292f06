package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// fillAccount prepares named statements on pc (about 900 KiB each, then
// one to make up the rest) until analyst's account reads target bytes,
// and returns what it reads then.
func fillAccount(t *testing.T, r *realDP, pc *pgconn.PgConn, analyst string, target int64) int64 {
	t.Helper()
	const chunk = 900 << 10
	overhead := int64(-1)
	for i := 0; ; i++ {
		have := r.srv.memoryOf(analyst)
		left := target - have
		if left <= 0 {
			return have
		}
		pad := int64(chunk)
		if overhead >= 0 && left-overhead < chunk {
			pad = left - overhead
		}
		if pad < 1 {
			return have
		}
		sql := fmt.Sprintf("SELECT %d AS i /* %s */", i, strings.Repeat("x", int(pad)))
		if _, err := pc.Prepare(context.Background(), fmt.Sprintf("fill%d", i), sql, nil); err != nil {
			t.Fatalf("filling statement %d: %v", i, err)
		}
		if overhead < 0 {
			overhead = r.srv.memoryOf(analyst) - have - pad
		}
	}
}

// TestReview100_PostRoomLostToSync (medium; one analyst, free after one
// charge): a post-processing statement charges the room of its DP answers
// (3 × postAnswersRoom: 45 MiB for a GROUP BY of a private key) to the
// analyst's account with checkMemory, keeps its size in a local variable
// and gives it back when it returns (chargeMemoryOwn(-room)). Any
// checkMemory in between whose first try does not fit (reserveResult
// before the charge, the outer SQL's rows) calls syncMemory, which sets
// the session's charge to what memoryHeld counts — without the room, as
// the room is no field of the session. The room is then given back a
// second time when the statement returns: the session's charge is
// negative, readyForQuery does not sync a negative charge, and the
// analyst's account reads the room less than her sessions hold for as
// long as the session lives. Her other sessions can then hold that much
// more than max_memory_per_analyst_mb, once per session.
//
// Here alice's bound is 64 MiB; her second session holds named statements
// up to half a MiB short of the room; the free (cached) repetition's
// reserveResult then does not fit at first. Her account must still read
// what the second session holds once the statement has ended.
func TestReview100_PostRoomLostToSync(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.MaxMemoryPerAnalyst = 64 << 20
		for _, d := range c.Datasets {
			d.ResponseTime = 300 * time.Millisecond
		}
	})
	a, b := r.connect(t), r.connect(t)
	if _, err := execAll(t, a, "SET dp.epsilon = 0.01; SET dp.delta = 1e-8"); err != nil {
		t.Fatal(err)
	}
	q := "SELECT * FROM (SELECT diagnosis, COUNT(*) AS n FROM visits GROUP BY diagnosis) t LIMIT 3"
	if _, err := execAll(t, a, q); err != nil { // charged once
		t.Fatal(err)
	}
	// The room, as the free repetition holds it through its padding.
	peak := samplePeak(time.Millisecond, func() int64 { return r.srv.memoryOf("alice") })
	if _, err := execAll(t, a, q); err != nil {
		t.Fatal(err)
	}
	room := peak()
	if room < 1<<20 {
		t.Fatalf("room %d bytes: too small to show", room)
	}
	held := fillAccount(t, r, b, "alice", 64<<20-room-512<<10)
	t.Logf("room %.1f MiB; alice's second session holds %.1f MiB", float64(room)/(1<<20), float64(held)/(1<<20))
	// Answered (before the fix) or refused 54000 (the half MiB left does
	// not fit the outer result's first MiB): the account is what counts.
	_, err := execAll(t, a, q)
	if err != nil && sqlstate(err) != "54000" {
		t.Fatal(err)
	}
	after := r.srv.memoryOf("alice")
	t.Logf("free repetition: %v; alice's account then reads %.1f MiB", err, float64(after)/(1<<20))
	if after < held {
		t.Errorf("alice's account reads %.1f MiB while her sessions hold %.1f MiB: the post-processing room (%.1f MiB) was given back twice (syncMemory dropped it mid-statement)",
			float64(after)/(1<<20), float64(held)/(1<<20), float64(room)/(1<<20))
	}
}
