package admin

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestAttack37_GuessesLockStewardOut (low; anyone who can reach the admin
// port, no credentials): round 36 bounded the endpoint's password
// derivations with ONE token bucket for everybody (20 a second, 429
// beyond) and remembers only a password it has already accepted. So until
// the steward has signed in once since the proxy started (and again after
// every restart, or whenever Prometheus or the steward uses another
// password), a client sending 20 wrong guesses a second - a few kB/s -
// keeps the bucket empty, and the steward's right password gets 429 for
// as long as it goes on: the steward is locked out of metrics, the
// dashboard and incidents. (The 429 itself says nothing about the
// password.) The fix: a bucket per remote address (or per /64), with the
// global one only as a cap on the sum, so a guesser exhausts its own
// share; or try the remembered verifier-derived key first for any new
// address at a reserved rate.
func TestAttack37_GuessesLockStewardOut(t *testing.T) {
	get := stewardGet(t)
	// The guesser, from its own address, until the bucket is empty.
	for i := 0; i < 100; i++ {
		if get("192.0.2.66:40000", "steward", "guess"+strconv.Itoa(i)) == http.StatusTooManyRequests {
			break
		}
	}
	// The steward, from another address, with the right password, having
	// not signed in since the proxy started.
	if code := get("198.51.100.7:50000", "steward", "s3cret"); code != http.StatusOK {
		t.Errorf("the steward's right password from another address while a guesser sends wrong ones: HTTP %d, want 200 (one bucket for every address: the guesser locks the steward out)", code)
	}
}

// stewardGet returns a GET of /metrics through the steward check of a
// plain:s3cret credential, from an address, with basic authentication;
// it returns the HTTP status.
func stewardGet(t *testing.T) func(from, user, pass string) int {
	t.Helper()
	c, err := newCredential("steward", "plain:s3cret")
	if err != nil {
		t.Fatal(err)
	}
	h := c.requireSteward(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	return func(from, user, pass string) int {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = from
		r.SetBasicAuth(user, pass)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
}
