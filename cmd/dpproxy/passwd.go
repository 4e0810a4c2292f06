package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xdg-go/scram"
)

// scramIterations is PostgreSQL's default scram_iterations (4096).
const scramIterations = 4096

// scramSaltLen is PostgreSQL's SCRAM_DEFAULT_SALT_LEN (16 bytes).
const scramSaltLen = 16

func cmdPasswd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return usagef("passwd: name exactly one analyst (dpproxy passwd NAME)")
	}
	name := args[0]
	if name == "" || strings.HasPrefix(name, "-") {
		return usagef("passwd: %q is not an analyst name", name)
	}
	pw, err := readPassword(stdin, stderr)
	if err != nil {
		return err
	}
	if pw == "" {
		return errors.New("passwd: empty password")
	}
	v, err := scramVerifier(pw, rand.Reader)
	if err != nil {
		return err
	}
	// Only the verifier on stdout, so scripts can capture it; the hint on
	// stderr.
	fmt.Fprintln(stdout, v)
	fmt.Fprintf(stderr, "put it in dpproxy.yaml as:\nanalysts:\n  %s:\n    password: \"%s\"\n", name, v)
	return nil
}

// readPassword prompts without echo when stdin is a terminal, else reads the
// first line of stdin.
func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		p1, err := readNoEcho(f, stderr, "Password: ")
		if err != nil {
			return "", err
		}
		p2, err := readNoEcho(f, stderr, "Again: ")
		if err != nil {
			return "", err
		}
		if p1 != p2 {
			return "", errors.New("passwd: the passwords differ")
		}
		return p1, nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// scramVerifier returns PostgreSQL's SCRAM-SHA-256 verifier format,
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> (base64), as in
// pg_authid.rolpassword (RFC 5802 keys; SASLprep applied by xdg-go/scram).
func scramVerifier(password string, random io.Reader) (string, error) {
	salt := make([]byte, scramSaltLen)
	if _, err := io.ReadFull(random, salt); err != nil {
		return "", err
	}
	client, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		return "", fmt.Errorf("passwd: %w", err)
	}
	creds, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	if err != nil {
		return "", fmt.Errorf("passwd: %w", err)
	}
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(creds.StoredKey), b64(creds.ServerKey)), nil
}
