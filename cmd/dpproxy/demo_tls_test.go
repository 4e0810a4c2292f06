package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/config"
)

func TestDemoCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if err := demoCertificate(dir, "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, demoTLSCert), filepath.Join(dir, demoTLSKey)
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("public key %T, want ECDSA P-256", leaf.PublicKey)
	}
	for _, h := range []string{"127.0.0.1", "localhost"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("certificate does not cover %s: %v", h, err)
		}
	}
	if err := leaf.VerifyHostname("example.com"); err == nil {
		t.Error("certificate covers example.com")
	}
	// Self-signed: it verifies against itself as a root.
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Errorf("self-signed verification: %v", err)
	}

	// A kept data dir keeps its pair; one that does not cover the hosts is
	// replaced.
	before, _ := os.ReadFile(certPath)
	if err := demoCertificate(dir, "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certPath); string(after) != string(before) {
		t.Error("a valid kept certificate was replaced")
	}
	if err := demoCertificate(dir, "127.0.0.1", "demo.invalid"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certPath); string(after) == string(before) {
		t.Error("a certificate not covering the hosts was kept")
	}
}

// TestDemoConfigTLS checks that the demo's config, with its tls: section,
// loads and names the pair serve.go loads (paths relative to the config).
func TestDemoConfigTLS(t *testing.T) {
	dir := t.TempDir()
	text, err := demoConfig(examples.Config(), "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
	if err != nil {
		t.Fatal(err)
	}
	if text, err = withDemoTLS(text); err != nil {
		t.Fatal(err)
	}
	if _, err := withDemoTLS(text); err == nil {
		t.Error("a second tls: section was accepted")
	}
	if err := demoCertificate(filepath.Join(dir, demoTLSDir), "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policies", "hospital.yaml"), examples.HospitalPolicy(), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dpproxy.yaml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("load demo config: %v\n%s", err, text)
	}
	if cfg.TLS == nil || cfg.TLS.Require {
		t.Fatalf("tls = %+v, want offered, not required", cfg.TLS)
	}
	if !strings.HasPrefix(cfg.Path(cfg.TLS.Cert), dir) {
		t.Errorf("cert path %q not in the config's directory", cfg.Path(cfg.TLS.Cert))
	}
	if _, err := tls.LoadX509KeyPair(cfg.Path(cfg.TLS.Cert), cfg.Path(cfg.TLS.Key)); err != nil {
		t.Errorf("serve.go's load of the pair: %v", err)
	}
}
