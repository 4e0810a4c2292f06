package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
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

// TestReview100_PostChurnRefusal (low; honest analyst): a
// post-processing statement meets the churn bucket of shadow connections
// (attack round 92) only in acquireShadow, after the DP rate limit took
// its token, after a fully cached statement's padding to response_time
// (or a charged one's wait for a DP admission slot), and is then refused
// with "your catalog statements closed too many catalog connections": the
// analyst sent a DP statement, and the refusal cost one of their DP
// queries a second. A refused statement should lose nothing and say
// what it was refused for.
//
// Here alice may run 2 DP queries in 100 s; her statement is charged
// once (one token); her bucket of closed shadow connections is then
// emptied. The free repetition must be refused at once (not after the
// 600 ms padding), with a message that names her statements rather than
// catalog statements only, and once the bucket has refilled her next
// repetition must still find the second token.
func TestReview100_PostChurnRefusal(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		c.DefaultRateLimit = &config.RateLimit{PerSecond: 0.01, Burst: 2}
		for _, d := range c.Datasets {
			d.ResponseTime = 600 * time.Millisecond
		}
	})
	pc := r.connect(t)
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.01"); err != nil {
		t.Fatal(err)
	}
	q := post96(2, "")
	if _, err := execAll(t, pc, q); err != nil { // charged: one token
		t.Fatal(err)
	}
	for range shadowChurnBurst + 10 { // 1.1 s to refill
		r.srv.shadowChurned("alice")
	}
	start := time.Now()
	_, err := execAll(t, pc, q)
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53000" {
		t.Fatalf("with an empty churn bucket: %v, want 53000", err)
	}
	t.Logf("refused after %v: %s (detail %q, hint %q)", took.Round(time.Millisecond), pe.Message, pe.Detail, pe.Hint)
	if took > 300*time.Millisecond {
		t.Errorf("the refusal came after %v: the statement was padded (or queued) before the churn bucket was asked", took.Round(time.Millisecond))
	}
	if strings.Contains(pe.Message, "catalog statements closed") {
		t.Errorf("a post-processing statement refused as catalog statements: %q", pe.Message)
	}
	time.Sleep(1500 * time.Millisecond) // the churn bucket refills
	if _, err := execAll(t, pc, q); err != nil {
		t.Errorf("the repetition after the refusal: %v (the refused statement had taken a DP rate-limit token)", err)
	}
}
