// Package verifier parses PostgreSQL's SCRAM-SHA-256 password verifiers
// ("SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey", base64), the form
// `dpproxy passwd` writes for analysts and for the steward, so the proxy's
// SCRAM authentication and the admin endpoint's basic authentication read
// them the same way.
package verifier

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
)

// Mechanism is the prefix of a verifier.
const Mechanism = "SCRAM-SHA-256"

// Parse reads a verifier. Its error says what is wrong, as "not a
// SCRAM-SHA-256 verifier (reason)"; callers add which setting it was and
// how to make one.
func Parse(v string) (scram.StoredCredentials, error) {
	bad := func(what string) (scram.StoredCredentials, error) {
		return scram.StoredCredentials{}, fmt.Errorf("not a SCRAM-SHA-256 verifier (%s)", what)
	}
	rest, ok := strings.CutPrefix(v, Mechanism+"$")
	if !ok {
		return bad(`it must start with "SCRAM-SHA-256$" or "plain:"`)
	}
	params, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return bad("missing keys")
	}
	iterText, saltText, ok := strings.Cut(params, ":")
	if !ok {
		return bad("missing salt")
	}
	iters, err := strconv.Atoi(iterText)
	if err != nil || iters < 1 {
		return bad("bad iteration count")
	}
	salt, err := base64.StdEncoding.DecodeString(saltText)
	if err != nil || len(salt) == 0 {
		return bad("bad salt")
	}
	storedText, serverText, ok := strings.Cut(keys, ":")
	if !ok {
		return bad("missing server key")
	}
	stored, err1 := base64.StdEncoding.DecodeString(storedText)
	server, err2 := base64.StdEncoding.DecodeString(serverText)
	if err1 != nil || err2 != nil || len(stored) != sha256.Size || len(server) != sha256.Size {
		return bad("bad keys")
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: iters},
		StoredKey:  stored,
		ServerKey:  server,
	}, nil
}
