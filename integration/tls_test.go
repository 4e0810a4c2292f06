package integration

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTLS_Psql connects the real psql to the demo over TLS: the demo makes
// a self-signed certificate in its data directory and offers TLS on
// SSLRequest without requiring it.
func TestTLS_Psql(t *testing.T) {
	requireDemo(t)
	if strings.Contains(env.aliceDSN, "sslmode=") {
		t.Fatalf("the ready: DSN %q names an sslmode; the README's DSN has none", env.aliceDSN)
	}
	sslIn := regexp.MustCompile(`SSL connection \(protocol: TLSv1\.[23]`)

	// sslmode=require: TLS, a catalog statement, a DP query (with its
	// NOTICE), a refused query, and the session goes on.
	dsn := env.aliceDSN + "?sslmode=require"
	out, errOut, code := psql(t, dsn, "-v", "ON_ERROR_STOP=0", "-c", `\conninfo`, "-c", `\dt`,
		"-c", `\d visits`, "-c", `\dt+`, "-c", `\l+`, "-c", "SET dp.epsilon = 0.01", "-c", "SELECT COUNT(*) FROM visits",
		"-c", "SELECT * FROM visits", "-c", "SELECT 'after' || ' refusal'")
	if code != 0 || !sslIn.MatchString(out) {
		t.Fatalf("psql sslmode=require: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"visits", "patients", "after refusal", "length_of_stay", "List of databases", "hospital"} {
		if !strings.Contains(out, want) {
			t.Errorf("psql over TLS: output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "NOTICE:  00000: dp: epsilon 0.01 spent") || !strings.Contains(errOut, "ERROR:") {
		t.Errorf("psql over TLS: stderr lacks the DP notice or the refusal:\n%s", errOut)
	}

	// The README's DSN as printed (sslmode=prefer by default) negotiates TLS.
	out, errOut, code = psql(t, env.aliceDSN, "-c", `\conninfo`)
	if code != 0 || !sslIn.MatchString(out) {
		t.Errorf("psql with the ready: DSN: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// The certificate is for 127.0.0.1 and localhost: verify-full against
	// the demo's own certificate as the root.
	root := filepath.Join(env.dataDir, "tls", "server.crt")
	out, errOut, code = psql(t, env.aliceDSN+"?sslmode=verify-full&sslrootcert="+root, "-At", "-c", "SELECT 1")
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Errorf("psql sslmode=verify-full: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// Plaintext still works (TLS is offered, not required).
	out, errOut, code = psql(t, env.aliceDSN+"?sslmode=disable", "-c", `\conninfo`)
	if code != 0 || strings.Contains(out, "SSL connection") {
		t.Errorf("psql sslmode=disable: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
