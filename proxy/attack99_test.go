package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap/zapcore"
)

// TestAttack99_StartupRefusalLogUnbounded (medium; any analyst with a
// password): a start-up refused after authentication — a start-up
// parameter the proxy will not set (options "-c DateStyle=<9,000
// bytes>", an unknown parameter's 9,000-byte name), a database the
// analyst may not use, their share of connections — wrote a "connection
// refused" line on the session's own logger (proxy/conn.go
// startupFailed: c.log, not the analyst's rate-limited free logger), with
// the whole error text, which quotes the analyst's value. Each such
// start-up is free (nothing runs, nothing is charged) and the client can
// repeat it as fast as it can authenticate: 3,377 start-ups from 4
// client goroutines in 3 s wrote 20.5 MB/s of log (18 KB a line), where
// the same start-ups with a wrong password, which anyone can send, wrote
// 0.2 MB/s. Attack round 86 bounded exactly this for refused statements
// (sessionLinesBurst, then sessionLinesPerSecond per analyst); the
// start-up's refusals went around it. Rule 1: the disk an analyst's free
// actions take is bounded by public quantities.
//
// The test makes 150 refused start-ups of alice with a 9,000-byte value
// and counts the "connection refused" lines and their bytes: at most the
// analyst's burst and rate of free lines, each at most 1 KiB.
func TestAttack99_StartupRefusalLogUnbounded(t *testing.T) {
	w := &logCounter86{}
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.Logger = productionLogger(w, zapcore.InfoLevel) }})
	cfg, err := pgconn.ParseConfig(ts.dsn("alice", "alice", "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["options"] = "-c datestyle=" + strings.Repeat("x", 9000)
	const attempts = 150
	b0, l0 := w.counts()
	start := time.Now()
	for i := 0; i < attempts; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pc, err := pgconn.ConnectConfig(ctx, cfg)
		cancel()
		if err == nil {
			pc.Close(context.Background())
			t.Fatal("a start-up with a 9,000-byte DateStyle was accepted")
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "22023" {
			t.Fatalf("start-up %d: %v, want FATAL 22023", i, err)
		}
	}
	elapsed := time.Since(start)
	time.Sleep(100 * time.Millisecond) // the last session's goroutine logs after the client read its FATAL
	b1, l1 := w.counts()
	lines, bytes := l1-l0, b1-b0
	allowed := int64(sessionLinesBurst + sessionLinesPerSecond*(elapsed.Seconds()+1))
	t.Logf("%d refused start-ups in %s: %d log lines, %d bytes (%d bytes a line)", attempts, elapsed.Round(time.Millisecond), lines, bytes, bytes/max(lines, 1))
	if lines > allowed {
		t.Errorf("%d log lines for %d refused start-ups of one analyst in %s; the analyst's free lines are at most %d (burst %d, %d a second)",
			lines, attempts, elapsed.Round(time.Millisecond), allowed, sessionLinesBurst, sessionLinesPerSecond)
	}
	if lines > 0 && bytes/lines > 1024 {
		t.Errorf("%d bytes a log line: the analyst's start-up value reaches the log whole", bytes/lines)
	}
	// The analyst's next session still starts, and logs its start.
	pc := ts.connectAs(t, "alice", "alice", "hospital")
	if err := pc.Exec(ctxT(t), "SHOW application_name").Close(); err != nil {
		t.Fatal(err)
	}
}
