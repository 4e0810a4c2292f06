package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/dpproxy/dpproxy/internal/kdflimit"
	scramverifier "github.com/dpproxy/dpproxy/internal/verifier"
	"github.com/xdg-go/scram"
)

// credential checks the steward's password. The config stores it as a
// SCRAM-SHA-256 verifier made by `dpproxy passwd` (like the analysts'), so
// the plain password is never on disk; "plain:…" is accepted for demos.
// Checking a basic-auth password against a verifier re-derives its
// StoredKey (PBKDF2 at the verifier's iteration count, a few milliseconds)
// and compares in constant time.
//
// The derivation is the endpoint's cost to anyone who can reach it, so it
// is bounded (attack round 36, internal/kdflimit): a password the endpoint
// accepted is remembered by its SHA-256 (the dashboard's polling costs no
// derivation), and the rest run one at a time, at most
// kdflimit.PerNetwork a second for one client network, at most
// kdflimit.MaxWaiting waiting; past that a request gets 429 without one.
type credential struct {
	user      string
	salt      string
	iters     int
	storedKey []byte

	limit    *kdflimit.Limiter
	mu       sync.Mutex
	accepted [sha256.Size]byte // digest of the last accepted user and password
	has      bool
}

// checksPerAddress is kdflimit's bound, for this package's tests.
const checksPerAddress = kdflimit.PerNetwork

// newCredential parses the admin password setting.
func newCredential(user, password string) (*credential, error) {
	if user == "" {
		return nil, errors.New("admin.user: name the steward user for the admin endpoint")
	}
	if p, ok := strings.CutPrefix(password, "plain:"); ok {
		if p == "" {
			return nil, errors.New("admin.password: plain: needs a password")
		}
		c := newBounded(&credential{user: user, salt: "dpproxy-admin-plain", iters: 4096})
		k, err := storedKey(p, c.salt, c.iters)
		if err != nil {
			return nil, err
		}
		c.storedKey = k
		return c, nil
	}
	sc, err := scramverifier.Parse(password)
	if err == nil && sc.Iters > kdflimit.MaxIterations {
		// Each basic-auth request re-derives the key at this count.
		err = errors.New("not a SCRAM-SHA-256 verifier (bad iteration count)")
	}
	if err != nil {
		return nil, fmt.Errorf("admin.password: %v; make one with `dpproxy passwd %s`", err, user)
	}
	return newBounded(&credential{user: user, salt: sc.Salt, iters: sc.Iters, storedKey: sc.StoredKey}), nil
}

func newBounded(c *credential) *credential {
	c.limit = kdflimit.New()
	return c
}

// digest names a user and password for the accepted cache.
func digest(user, password string) [sha256.Size]byte {
	return sha256.Sum256([]byte(user + "\x00" + password))
}

func storedKey(password, salt string, iters int) ([]byte, error) {
	cl, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		return nil, fmt.Errorf("admin.password: %w", err)
	}
	sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: salt, Iters: iters})
	if err != nil {
		return nil, err
	}
	return sc.StoredKey, nil
}

// check reports whether user and password are the steward's, in time that
// does not depend on where they differ.
func (c *credential) check(user, password string) bool {
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(c.user)) == 1
	k, err := storedKey(password, c.salt, c.iters)
	if err != nil {
		// SASLprep refused the password: compare against a dummy key so
		// the time does not tell.
		k = make([]byte, len(c.storedKey))
	}
	keyOK := subtle.ConstantTimeCompare(k, c.storedKey) == 1
	return userOK && keyOK && err == nil
}

// verify is check within the endpoint's bounds: false, true when the
// password was accepted; busy when no derivation may run now.
func (c *credential) verify(remoteAddr, user, password string) (ok, busy bool) {
	d := digest(user, password)
	c.mu.Lock()
	hit := c.has && subtle.ConstantTimeCompare(d[:], c.accepted[:]) == 1
	c.mu.Unlock()
	if hit {
		return true, false
	}
	if !c.limit.Run(remoteAddr, func() { ok = c.check(user, password) }) {
		return false, true
	}
	if ok {
		c.mu.Lock()
		c.accepted, c.has = d, true
		c.mu.Unlock()
	}
	return ok, false
}

// requireSteward wraps h with HTTP basic authentication of the steward.
func (c *credential) requireSteward(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		valid, busy := false, false
		if ok {
			valid, busy = c.verify(r.RemoteAddr, user, pass)
		}
		if busy {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "429 too many requests: password checks are limited to "+strconv.Itoa(kdflimit.PerNetwork)+" a second per client network, and "+strconv.Itoa(kdflimit.MaxWaiting)+" waiting; retry\n", http.StatusTooManyRequests)
			return
		}
		if !valid {
			w.Header().Set("WWW-Authenticate", `Basic realm="dpproxy steward", charset="UTF-8"`)
			msg := "401 unauthorized: the admin endpoint needs the steward's user and password (admin.user and admin.password in the config); analysts' credentials are not accepted\n"
			if !ok {
				msg = "401 unauthorized: send the steward's user and password with HTTP basic authentication (curl -u USER:PASSWORD, or http://USER:PASSWORD@host:port/)\n"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
