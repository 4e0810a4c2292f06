package proxy

import (
	"bytes"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAttack73_MalformedMessagesLogALineEach (attack round 73, severity
// low: rule 1, the operator's log disk and the proxy's CPU, one line of
// about 200 bytes per 6 bytes an analyst sends, with no bound).
//
// conn.malformed (proxy/frame.go:279–287) answers a malformed Query,
// extended-protocol message or Sync with ERROR 08P01 and goes on, as
// PostgreSQL does, and logs each at Warn ("malformed message", with the
// session's conn_id, remote address, analyst and dataset). A Sync with a
// one-byte body is 6 bytes; the session answers each and stays usable, so
// one analyst's sessions can pipeline them at network speed and the
// proxy writes a structured log line per 6 bytes received: the log grows
// about 30 times faster than the analyst's traffic, and the log writes
// (stderr, unbuffered console encoder: cmd/dpproxy/logger.go, no sampling)
// take the proxy's CPU shared by every analyst. Failed and refused
// statements are likewise one Info line each (logStatement), but those
// cost the analyst a statement; a malformed message costs nothing.
//
// Measured: 2,000 malformed Syncs (12,000 bytes) sent by one session.
//
// Asserted: the proxy's log for them stays within a small multiple of
// what was sent (here: at most the bytes sent).
//
// Suggested fix: log repeated malformed messages of a session once
// (count them and log the count when the session ends, or sample:
// zapcore.NewSamplerWithOptions per message), or end the session after
// a number of malformed messages, as a protocol violation.
func TestAttack73_MalformedMessagesLogALineEach(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.Logger = zap.New(core) }})
	nc := ts.rawConn(t)
	const n = 2000
	var msg []byte
	for range n {
		msg = append(msg, 'S', 0, 0, 0, 5, 0) // Sync with a one-byte body
	}
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got := discardUntilReady(t, nc); got != "E(08P01 invalid message format)Z" {
			t.Fatalf("malformed Sync %d: %s", i, got)
		}
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	lines, logBytes := 0, 0
	for _, e := range logs.All() {
		if e.Message != "malformed message" {
			continue
		}
		lines++
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		logBytes += len(bytes.TrimSpace(buf.Bytes())) + 1
		buf.Free()
	}
	t.Logf("%d malformed Syncs (%d bytes sent): %d log lines, %d bytes of log", n, len(msg), lines, logBytes)
	if logBytes > len(msg) {
		t.Errorf("%d bytes of malformed messages made %d log lines, %d bytes of log (%.0f× what was sent): a log line per malformed message, unbounded",
			len(msg), lines, logBytes, float64(logBytes)/float64(len(msg)))
	}
}
