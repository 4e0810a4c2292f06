package admin

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// TestAttack38_GuessesFromFourNetworksLockStewardOut (low; anyone who can
// reach the admin port from four IPv4 addresses or four IPv6 /64s — one
// host with a /56, the usual residential or cloud delegation, has 256 —
// no credentials): round 37 gave each client address a bucket of 5
// password checks a second within the global 20. allow() takes the
// address's token and then the global one, and refuses with 429 whenever
// the global bucket is empty, so four guessers at 5/s each keep it empty
// and the steward's right password, from a fifth address, gets 429 for as
// long as they go on (until the steward has signed in once since the
// proxy started: the remembered password). The steward is locked out of
// metrics, the dashboard and incidents, as in round 37, by four addresses
// instead of one.
//
// The fix: share the global rate fairly among the addresses asking (e.g.
// one waiting queue per address served round-robin, or a global bucket
// that refuses only addresses that used more than their fair share of the
// last second), so k guessing networks leave the steward 1/(k+1) of the
// checks instead of none; or reserve a token for addresses that have
// never failed.
func TestAttack38_GuessesFromFourNetworksLockStewardOut(t *testing.T) {
	get := stewardGet(t)
	// Four guessing networks of one attacker (a /56: its /64s 00..03),
	// each until its own bucket is empty.
	for n := 0; n < 4; n++ {
		from := fmt.Sprintf("[2001:db8:0:%x::1]:40000", n)
		for i := 0; i < 4*checksPerAddress; i++ {
			if get(from, "steward", "guess"+strconv.Itoa(i)) == http.StatusTooManyRequests {
				break
			}
		}
	}
	if code := get("198.51.100.7:50000", "steward", "s3cret"); code != http.StatusOK {
		t.Errorf("the steward's right password from a fifth address while four /64s of one /56 send wrong ones: HTTP %d, want 200 (the global bucket is emptied by %d networks at %d/s each)",
			code, 4, checksPerAddress)
	}
}
