package proxy

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLogging_NoSecrets checks that at Info level the proxy logs statements
// by fingerprint only: no passwords, no query text, no literals, no values.
func TestLogging_NoSecrets(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.Logger = zap.New(core) }})
	pc := ts.connectAs(t, "bob", "bob-secret", "hospital")
	if _, err := pgconnConnect(t, ts.dsn("bob", "wrong-pw-4711", "hospital")); err == nil {
		t.Fatal("wrong password accepted")
	}
	if _, err := execAll(t, pc, "SELECT COUNT(*) FROM visits WHERE diagnosis = 'literal-0815'"); err != nil {
		t.Fatal(err)
	}
	execAll(t, pc, "SELECT nosuch FROM visits WHERE diagnosis = 'literal-0816'")
	ts.stop()

	var sawFingerprint bool
	for _, e := range logs.All() {
		text := e.Message
		for k, v := range e.ContextMap() {
			text += fmt.Sprintf(" %s=%v", k, v)
			if k == logKeyQuery {
				t.Errorf("query text logged at %s: %v", e.Level, v)
			}
			if k == logKeyFingerprint {
				sawFingerprint = true
			}
			if fmt.Sprint(v) == "42" || fmt.Sprint(v) == "12.5" { // the fake released values
				t.Errorf("released value logged as %s", k)
			}
		}
		for _, secret := range []string{"bob-secret", "wrong-pw-4711", "literal-0815", "literal-0816"} {
			if strings.Contains(text, secret) {
				t.Errorf("log entry contains %q: %s", secret, text)
			}
		}
	}
	if !sawFingerprint {
		t.Error("no statement fingerprint logged at Info")
	}
}
