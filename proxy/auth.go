package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/internal/kdflimit"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/verifier"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

// scramCredentials are an analyst's SCRAM-SHA-256 stored credentials.
type scramCredentials = scram.StoredCredentials

// scramIterations is the PBKDF2 iteration count of verifiers the proxy
// derives: PostgreSQL's default (scram_iterations = 4096).
const scramIterations = 4096

const scramMechanism = "SCRAM-SHA-256"

// credentialsFor turns a configured password into SCRAM credentials. It
// accepts a PostgreSQL verifier
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// (base64 salt and keys, as in pg_authid.rolpassword), or "plain:<password>"
// for demos, from which credentials are derived once with a random salt.
func credentialsFor(password string) (scramCredentials, error) {
	if p, ok := strings.CutPrefix(password, "plain:"); ok {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return scramCredentials{}, err
		}
		return deriveCredentials(p, salt, scramIterations)
	}
	return parseVerifier(password)
}

func deriveCredentials(password string, salt []byte, iters int) (scramCredentials, error) {
	// The client type does the SASLprep normalisation and the key
	// derivation (SaltedPassword = Hi(SASLprep(p), salt, i), RFC 5802 §3).
	cl, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		return scramCredentials{}, fmt.Errorf("password: %w", err)
	}
	return cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iters})
}

// parseVerifier parses an analyst's SCRAM-SHA-256 verifier
// (internal/verifier).
func parseVerifier(v string) (scramCredentials, error) {
	sc, err := verifier.Parse(v)
	if err == nil && sc.Iters > kdflimit.MaxIterations {
		// A cleartext password is checked by deriving the key at this
		// count, as the admin endpoint's is (attack round 53).
		err = fmt.Errorf("iteration count %d is above %d", sc.Iters, kdflimit.MaxIterations)
	}
	if err != nil {
		return scramCredentials{}, fmt.Errorf("password: %v; make one with `dpproxy passwd NAME`", err)
	}
	return sc, nil
}

// HashPassword returns a SCRAM-SHA-256 verifier for password in
// PostgreSQL's format, with a random salt, for the analysts section of
// dpproxy.yaml (`dpproxy passwd`).
func HashPassword(password string) (string, error) {
	if password == "" {
		return "", errors.New("empty password")
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	c, err := deriveCredentials(password, salt, scramIterations)
	if err != nil {
		return "", err
	}
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", scramMechanism, scramIterations, enc(salt), enc(c.StoredKey), enc(c.ServerKey)), nil
}

// mockCredentials returns credentials no password matches, with a salt that
// is stable per user name (PostgreSQL's scram_mock_salt), so that unknown
// users go through the same exchange as known ones and fail the same way.
func (s *Server) mockCredentials(user string) scramCredentials {
	m := hmac.New(sha256.New, s.mockKey)
	m.Write([]byte("salt\x00" + user))
	salt := m.Sum(nil)[:16]
	m.Reset()
	m.Write([]byte("key\x00" + user))
	key := m.Sum(nil)
	return scramCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: scramIterations},
		StoredKey:  key, // not the hash of any key a client can derive
		ServerKey:  key,
	}
}

func authFailed(user string) *pgerr.Error {
	return pgerr.New(pgerr.InvalidPassword, "password authentication failed for user %q", user)
}

// authenticate runs SCRAM-SHA-256 with the client. known says whether the
// user exists and may connect; when it is false the exchange runs against
// mock credentials and always fails with the same error as a wrong password.
func (c *conn) authenticate(user string, creds scramCredentials, known bool) error {
	if !known {
		creds = c.srv.mockCredentials(user)
	}
	if c.tls && c.srv.cfg.AllowCleartextOverTLS {
		return c.authenticateCleartext(user, creds, known)
	}
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) {
		// PostgreSQL ignores the SCRAM user name (libpq sends none) and
		// authenticates the startup user.
		return creds, nil
	})
	if err != nil {
		return err
	}
	conv := srv.NewConversation()

	c.be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}})
	if err := c.be.Flush(); err != nil {
		return err
	}
	var first pgproto3.SASLInitialResponse
	if err := c.receiveAuth(&first); err != nil {
		return authReceiveError(err)
	}
	if first.AuthMechanism != scramMechanism {
		return pgerr.New(pgerr.ProtocolViolation, "client selected an invalid SASL authentication mechanism")
	}
	serverFirst, err := conv.Step(string(first.Data))
	if err != nil {
		return authFailed(user).Wrap(err)
	}
	c.be.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)})
	if err := c.be.Flush(); err != nil {
		return err
	}
	var final pgproto3.SASLResponse
	if err := c.receiveAuth(&final); err != nil {
		return authReceiveError(err)
	}
	serverFinal, err := conv.Step(string(final.Data))
	if err != nil || !conv.Valid() || !known {
		return authFailed(user)
	}
	c.be.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)})
	c.be.Send(&pgproto3.AuthenticationOk{})
	return nil
}

// authenticateCleartext asks for the password itself (only ever over TLS,
// and only when the configuration allows it) and checks it against the
// stored SCRAM credentials: the password is right when it derives the same
// StoredKey and ServerKey with the stored salt and iteration count. The
// password is never logged or kept.
func (c *conn) authenticateCleartext(user string, creds scramCredentials, known bool) error {
	c.be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := c.be.Flush(); err != nil {
		return err
	}
	var pw pgproto3.PasswordMessage
	if err := c.receiveAuth(&pw); err != nil {
		return authReceiveError(err)
	}
	// PBKDF2 at the verifier's count: bounded as the admin endpoint's
	// (one at a time, a rate per client network, a bounded queue), since
	// anyone who reaches the port can ask for it (attack round 53).
	var got scramCredentials
	var err error
	if !c.srv.derivations.Run(c.netConn.RemoteAddr().String(), func() {
		got, err = deriveCredentials(pw.Password, []byte(creds.Salt), creds.Iters)
	}) {
		return pgerr.New(pgerr.TooManyConnections, "too many password checks in progress").
			WithHint("retry in a second: cleartext passwords are checked one at a time, at most %d a second per client network", kdflimit.PerNetwork)
	}
	if err != nil || !known ||
		!constantTimeEqual(got.StoredKey, creds.StoredKey) || !constantTimeEqual(got.ServerKey, creds.ServerKey) {
		return authFailed(user)
	}
	c.be.Send(&pgproto3.AuthenticationOk{})
	return nil
}

// authReceiveError maps a failed read during authentication: an
// oversized or malformed message is a protocol violation; a disconnect
// stays as it is (and is not reported).
func authReceiveError(err error) error {
	var tooBig *frameTooLargeError
	if errors.As(err, &tooBig) {
		return pgerr.New(pgerr.ProtocolViolation, "message of %d bytes exceeds the limit of %d bytes before authentication", tooBig.size, tooBig.max)
	}
	if isDisconnect(err) {
		return err
	}
	if _, ok := pgerr.As(err); ok {
		return err
	}
	return pgerr.New(pgerr.ProtocolViolation, "invalid message during authentication").Wrap(err)
}

func constantTimeEqual(a, b []byte) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare(a, b) == 1
}
