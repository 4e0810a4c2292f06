package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAttack53_CleartextDerivationsUnbounded (low; anyone who can reach
// the pgwire port, no password, when tls.allow_cleartext_password is on):
// with cleartext passwords over TLS, every start-up that sends a password
// makes the proxy derive the SCRAM keys from it (proxy/auth.go:172
// authenticateCleartext → deriveCredentials: PBKDF2 at the analyst's
// verifier's iteration count) before anything is known about the client.
// Analysts' names are not secret (the mock credentials hide whether a name
// exists, not what it costs), so an attacker names a real analyst and
// sends wrong passwords over as many start-ups as max_connections allows
// in progress: every one runs a derivation at once, as many at once as
// there are start-ups, and a verifier's iteration count is whatever the
// config holds (internal/verifier.Parse accepts any count ≥ 1; PostgreSQL's
// scram_iterations goes to 2^31−1). The proxy's cores go to guessers, and
// every analyst's statements (planning, noise, relaying) queue behind
// them. The steward's admin endpoint was bounded for exactly this
// derivation in attack round 36 (internal/admin/auth.go: one derivation at
// a time, 5 a second per client network, at most 64 waiting, iteration
// count at most 2^20); the pgwire port, which faces every analyst's
// network, has none of it. Rule 1: no client may cost the proxy CPU
// without a public bound, least of all one without a password.
//
// The fix: the admin endpoint's credential bounds on the pgwire path
// (derivations through one slot, or a small fixed number, with a
// per-address rate and a bounded queue, refusing with 53300 beyond), and
// refuse analysts' verifiers above 2^20 iterations at start-up as
// admin.password is.
//
// The test runs four wrong-password start-ups for one analyst with a
// verifier of 2^17 iterations and counts, from goroutine stacks, how many
// derivations run at once (a count, not a time).
func TestAttack53_CleartextDerivationsUnbounded(t *testing.T) {
	const iters = 1 << 17
	salt := []byte("attack53-salt-16")
	cr, err := deriveCredentials("dave-secret", salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.StdEncoding.EncodeToString
	verifier := fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iters, enc(salt), enc(cr.StoredKey), enc(cr.ServerKey))
	tlsCfg := selfSigned(t)
	ts := startServer(t, serverOpts{mutate: func(c *Config) {
		c.TLS, c.AllowCleartextOverTLS = tlsCfg, true
		c.Analysts["dave"] = config.Analyst{Password: verifier}
	}})

	// Each guesser: TLS, a start-up as dave, a wrong cleartext password.
	const guessers = 4
	ready := make(chan struct{}, guessers)
	var wg sync.WaitGroup
	codes := make([]string, guessers)
	for i := 0; i < guessers; i++ {
		nc := rawConn(t, ts)
		if _, err := nc.Write(startupCode(sslRequestCode)); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'S' {
			t.Fatalf("SSLRequest reply %q %v", b[0], err)
		}
		tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		fe := pgproto3.NewFrontend(tc, tc)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
			Parameters: map[string]string{"user": "dave", "database": "hospital"}})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		if m, err := fe.Receive(); err != nil {
			t.Fatal(err)
		} else if _, ok := m.(*pgproto3.AuthenticationCleartextPassword); !ok {
			t.Fatalf("asked for %T, want a cleartext password", m)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-ready
			fe.Send(&pgproto3.PasswordMessage{Password: fmt.Sprintf("guess-%d", i)})
			if err := fe.Flush(); err != nil {
				codes[i] = err.Error()
				return
			}
			_ = tc.SetReadDeadline(time.Now().Add(60 * time.Second))
			m, err := fe.Receive()
			switch m := m.(type) {
			case *pgproto3.ErrorResponse:
				codes[i] = m.Code
			default:
				codes[i] = fmt.Sprintf("%T %v", m, err)
			}
		}(i)
	}

	// Count the proxy's goroutines inside a PBKDF2 derivation.
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		most := 0
		buf := make([]byte, 1<<22)
		for {
			select {
			case <-stop:
				sampled <- most
				return
			default:
			}
			n := runtime.Stack(buf, true)
			in := 0
			for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
				if bytes.Contains(g, []byte("pbkdf2.Key")) && bytes.Contains(g, []byte("authenticateCleartext")) {
					in++
				}
			}
			most = max(most, in)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	for i := 0; i < guessers; i++ {
		ready <- struct{}{}
	}
	wg.Wait()
	close(stop)
	most := <-sampled
	for i, c := range codes {
		if c != "28P01" {
			t.Errorf("guess %d: %s, want 28P01", i, c)
		}
	}
	t.Logf("at most %d of %d wrong-password start-ups derived keys at once (%d iterations each)", most, guessers, iters)
	if most > 1 {
		t.Errorf("%d password derivations of %d PBKDF2 iterations ran at once for %d start-ups without a password (one client address); the admin endpoint runs one at a time, rate-limited per address",
			most, iters, guessers)
	}
}
