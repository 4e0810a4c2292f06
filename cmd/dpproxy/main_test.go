package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRun_BadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the first line of stderr
	}{
		{"no command", nil, "no command given"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"serve without config", []string{"serve"}, "--config FILE is required"},
		{"serve unknown flag", []string{"serve", "--conf", "x"}, "flag provided but not defined: -conf"},
		{"serve stray argument", []string{"serve", "--config", "a.yaml", "b"}, `unexpected argument "b"`},
		{"demo bad listen", []string{"demo", "--listen", "6432"}, `--listen "6432" is not host:port`},
		{"demo missing value", []string{"demo", "--data-dir"}, "flag needs an argument: -data-dir"},
		{"policy without subcommand", []string{"policy"}, "name a subcommand"},
		{"policy unknown subcommand", []string{"policy", "check", "x"}, `unknown subcommand "check"`},
		{"policy validate without files", []string{"policy", "validate"}, "name at least one policy file"},
		{"passwd without name", []string{"passwd"}, "name exactly one analyst"},
		{"passwd two names", []string{"passwd", "a", "b"}, "name exactly one analyst"},
		{"demo-setup without dsn", []string{"demo-setup"}, "--admin-dsn DSN"},
	}
	t.Setenv("DPPROXY_ADMIN_DSN", "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", tc.args...)
			if code != 2 {
				t.Errorf("exit status = %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			first, rest, _ := strings.Cut(errOut, "\n")
			if !strings.HasPrefix(first, "dpproxy: ") || !strings.Contains(first, tc.want) {
				t.Errorf("first stderr line = %q, want dpproxy: …%s…", first, tc.want)
			}
			if !strings.HasPrefix(rest, "usage:") {
				t.Errorf("stderr after the reason = %q, want the usage", rest)
			}
		})
	}
}

func TestRun_ServeBadConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dpproxy.yaml")
	os.WriteFile(p, []byte("listen: nowhere\npolicies: p\n"), 0o644)
	code, _, errOut := runCLI(t, "", "serve", "--config", p)
	if code != 1 || !strings.Contains(errOut, "listen") || !strings.Contains(errOut, "ledger") {
		t.Errorf("serve with a bad config: exit %d, stderr %q; want 1 and the config's problems", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "serve", "--config", filepath.Join(dir, "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("serve with a missing config: exit %d, stderr %q", code, errOut)
	}
}

func TestRun_PolicyValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join("..", "..", "examples", "policies", "hospital.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("dataset: x\nprivacy_unit: p\nbudget:\n  epsilon: -1\n  delta: 1.0e-6\n  accountant: pure\ndefaults: {epsilon: 0.1, mechanism: laplace}\ntables:\n  t:\n    unit_column: u\n    max_groups_per_unit: 1\n    max_rows_per_unit: 1\n    colums: {}\n"), 0o644)

	const ok = ": ok (the file only: dpproxy doctor --config checks it against the data database)\n"
	code, out, errOut := runCLI(t, "", "policy", "validate", good)
	if code != 0 || out != good+ok || errOut != "" {
		t.Errorf("validate good: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, good+ok)
	}
	// --help prints the usage, not "open --help: no such file".
	if code, out, _ := runCLI(t, "", "policy", "validate", "--help"); code != 0 || !strings.Contains(out, "usage: dpproxy policy validate") || !strings.Contains(out, "doctor") {
		t.Errorf("validate --help: exit %d, stdout %q", code, out)
	}
	code, out, errOut = runCLI(t, "", "policy", "validate", good, bad)
	if code != 1 {
		t.Errorf("validate good+bad: exit %d, want 1", code)
	}
	if out != good+ok {
		t.Errorf("validate good+bad stdout = %q, want only the good file's ok", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !strings.HasPrefix(line, bad+":") {
			t.Errorf("error line %q is not file:line: message", line)
		}
	}
	if !strings.Contains(errOut, bad+":4:") && !strings.Contains(errOut, bad+":13:") {
		t.Errorf("stderr %q names no line of the bad file", errOut)
	}
	code, _, errOut = runCLI(t, "", "policy", "validate", filepath.Join(dir, "nope.yaml"))
	if code != 1 || !strings.Contains(errOut, "nope.yaml") {
		t.Errorf("validate missing file: exit %d, stderr %q", code, errOut)
	}
}

// wantKeys computes the SCRAM-SHA-256 keys of RFC 5802 §3 independently.
func wantKeys(password string, salt []byte, iters int) (stored, server []byte) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iters, sha256.Size)
	if err != nil {
		panic(err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	ck := sha256.Sum256(mac(salted, "Client Key"))
	return ck[:], mac(salted, "Server Key")
}

func parseVerifier(t *testing.T, v string) (iters int, salt, stored, server []byte) {
	t.Helper()
	var saltB64, keys string
	rest, ok := strings.CutPrefix(v, "SCRAM-SHA-256$")
	if !ok {
		t.Fatalf("verifier %q does not start with SCRAM-SHA-256$", v)
	}
	head, keys, ok := strings.Cut(rest, "$")
	if !ok {
		t.Fatalf("verifier %q has no keys", v)
	}
	if _, err := fmt.Sscanf(strings.Replace(head, ":", " ", 1), "%d %s", &iters, &saltB64); err != nil {
		t.Fatalf("verifier %q: %v", v, err)
	}
	sk, srv, _ := strings.Cut(keys, ":")
	dec := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("verifier %q: %v", v, err)
		}
		return b
	}
	return iters, dec(saltB64), dec(sk), dec(srv)
}

func TestRun_Passwd(t *testing.T) {
	code, out, errOut := runCLI(t, "s3cret pass\n", "passwd", "carol")
	if code != 0 {
		t.Fatalf("passwd: exit %d, stderr %q", code, errOut)
	}
	// stdout is exactly one verifier line, which the config loader accepts
	// as the analyst's password; stderr shows where it goes.
	v := strings.TrimSuffix(out, "\n")
	if strings.Contains(v, "\n") {
		t.Fatalf("passwd stdout = %q, want one line", out)
	}
	if !strings.Contains(errOut, "carol:") || !strings.Contains(errOut, v) {
		t.Errorf("passwd stderr = %q, want the analysts snippet for carol", errOut)
	}
	snippet := "listen: 127.0.0.1:6432\npolicies: p\nledger: postgres://l@h/l\ndatasets:\n  d: {upstream: postgres://u@h/d, shadow: postgres://s@h/s, shadow_admin: postgres://a@h/s}\nanalysts:\n  carol:\n    password: \"" + v + "\"\n"
	cfg, err := config.Parse([]byte(snippet), "snippet")
	if err != nil {
		t.Fatalf("passwd output is not a valid analyst password: %v\n%s", err, out)
	}
	if cfg.Analysts["carol"].Password != v {
		t.Fatalf("config read the password as %q, want %q", cfg.Analysts["carol"].Password, v)
	}
	iters, salt, stored, server := parseVerifier(t, v)
	if iters != 4096 || len(salt) != 16 {
		t.Errorf("iterations %d, salt %d bytes; want 4096 and 16 (PostgreSQL's defaults)", iters, len(salt))
	}
	ws, wsrv := wantKeys("s3cret pass", salt, iters)
	if !bytes.Equal(stored, ws) || !bytes.Equal(server, wsrv) {
		t.Errorf("verifier keys differ from RFC 5802's StoredKey/ServerKey")
	}
	// Two runs use different salts.
	_, out2, _ := runCLI(t, "s3cret pass\n", "passwd", "carol")
	if out2 == out {
		t.Error("two passwd runs gave the same verifier (salt not random)")
	}
	// PostgreSQL stores a valid verifier as is (anything else it would hash
	// as a plain password), so it agrees on the format.
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := fmt.Sprintf("passwd_probe_%d", os.Getpid())
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s PASSWORD '%s'", role, v)); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP ROLE "+role)
	var got string
	if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != v {
		t.Errorf("PostgreSQL stored %q for the verifier %q: it did not recognise it", got, v)
	}

	if code, _, errOut := runCLI(t, "\n", "passwd", "carol"); code != 1 || !strings.Contains(errOut, "empty password") {
		t.Errorf("passwd with an empty password: exit %d, stderr %q", code, errOut)
	}
}

func TestDemoConfig(t *testing.T) {
	for _, tc := range []struct{ data, shadow string }{
		{"127.0.0.1:40001", "127.0.0.1:40002"},
		// The placeholders swapped: one pass, nothing replaced twice.
		{"127.0.0.1:5433", "127.0.0.1:5432"},
	} {
		text, err := demoConfig(examples.Config(), tc.data, tc.shadow, "127.0.0.1:7777")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(text, "demo.yaml")
		if err != nil {
			t.Fatalf("demo config does not load: %v\n%s", err, text)
		}
		if cfg.Listen != "127.0.0.1:7777" {
			t.Errorf("listen = %s, want 127.0.0.1:7777", cfg.Listen)
		}
		type target struct{ dsn, addr, db string }
		targets := []target{{cfg.Ledger, tc.data, "dpproxy_ledger"}}
		for n, d := range cfg.Datasets {
			// The shadow database is named like the dataset, in the
			// shadow cluster; never in the data cluster.
			targets = append(targets, target{d.Upstream, tc.data, n}, target{d.Shadow, tc.shadow, n}, target{d.ShadowAdmin, tc.shadow, n})
		}
		for _, tg := range targets {
			pc, err := pgx.ParseConfig(tg.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if got := net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))); got != tg.addr || pc.Database != tg.db {
				t.Errorf("DSN %s points to %s/%s, want %s/%s", tg.dsn, got, pc.Database, tg.addr, tg.db)
			}
		}
		if _, ok := cfg.Datasets["hospital"]; !ok {
			t.Error("demo config has no hospital dataset")
		}
		for _, a := range []string{"alice", "bob"} {
			if got := cfg.Analysts[a].Password; got != "plain:"+a {
				t.Errorf("analyst %s password = %q, want plain:%s (demo: password = name)", a, got, a)
			}
		}
	}
	if _, err := demoConfig([]byte("listen: x\n"), "h:1", "s:2", "l:2"); err == nil {
		t.Error("demoConfig accepted a template without the example DSNs")
	}
	// A template whose shadow shares the data's address is rejected: the
	// demo would otherwise put the shadow in the data cluster.
	oneCluster := strings.ReplaceAll(string(examples.Config()), "@"+exampleShadowAddr+"/", "@"+examplePGAddr+"/")
	if _, err := demoConfig([]byte(oneCluster), "h:1", "s:2", "l:2"); err == nil {
		t.Error("demoConfig accepted a template without a separate shadow cluster address")
	}
}

// TestRun_DemoListenTaken: a --listen address another server holds is
// said before the demo starts its clusters (nothing in --data-dir).
func TestRun_DemoListenTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "", "demo", "--listen", ln.Addr().String(), "--data-dir", dir)
	if code != 1 || out != "" || !strings.Contains(errOut, "listen on "+ln.Addr().String()) || !strings.Contains(errOut, "--listen") {
		t.Fatalf("demo on a taken address: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("--data-dir holds %d entries: the clusters started before the address was checked", len(entries))
	}
}
