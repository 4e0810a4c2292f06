package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// env is the running demo shared by the tests of this package.
var env struct {
	skip        string // reason to skip every test, outside CI
	bin         string // the dpproxy binary
	proxyAddr   string // host:port of the proxy
	aliceDSN    string // the "ready:" line
	upstreamDSN string // the "upstream:" line (superuser, database hospital)
	dataDir     string
	stderr      *strings.Builder
	adminURL    string // the "admin:" line (the steward's endpoint)
	configPath  string // the "config:" line
	auditPath   string // the "audit:" line
	// citusWorkers are the "citus worker N:" lines (superuser DSNs of the
	// workers) when DPPROXY_CITUS=1: the demo's data cluster is then a
	// Citus coordinator with two workers and the demo tables distributed
	// by patient_id (make test-citus).
	citusWorkers []string
}

// citusMode reports whether the suite runs against the Citus demo
// (DPPROXY_CITUS=1, as make test-citus sets it).
func citusMode() bool { return os.Getenv("DPPROXY_CITUS") == "1" }

// citusWorkers is the number of workers of the Citus demo.
const citusWorkers = 2

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	if _, err := exec.LookPath("psql"); err != nil {
		reason := "psql is not installed: apt-get install -y postgresql-client (as root) or run `make test`, which installs it"
		if pgtest.InCI() {
			return 1, fmt.Errorf("CI is set (CI=true or CI=1) and %s", reason)
		}
		env.skip = reason
		return m.Run(), nil
	}
	tmp, err := os.MkdirTemp("", "dpproxy-integration-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(tmp)
	env.bin = filepath.Join(tmp, "dpproxy")
	args := []string{"build", "-o", env.bin}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/dpproxy")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 1, fmt.Errorf("build dpproxy: %w", err)
	}
	env.dataDir = filepath.Join(tmp, "data")
	addr, err := freeAddr()
	if err != nil {
		return 1, err
	}
	env.proxyAddr = addr
	// The tests run the demo without response-time padding (500ms per DP
	// answer would add minutes); TestResponseTime_Measured and
	// TestDemo_ResponseTimeOn cover the padding.
	args = []string{"demo", "--data-dir", env.dataDir, "--listen", addr, "--response-time", "0s"}
	if citusMode() {
		if err := citus.Check(""); err != nil {
			// make test-citus builds Citus first; never a skip there.
			return 1, fmt.Errorf("DPPROXY_CITUS=1: %w", err)
		}
		args = append(args, "--citus-workers", strconv.Itoa(citusWorkers))
	}
	cmd := exec.Command(env.bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 1, err
	}
	env.stderr = &strings.Builder{}
	cmd.Stderr = &lockedWriter{w: env.stderr}
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("dpproxy demo did not stop within 60s of SIGTERM")
		}
	}
	if err := readReady(stdout, 5*time.Minute); err != nil {
		_ = stop()
		return 1, fmt.Errorf("%w\n--- dpproxy demo stderr ---\n%s", err, env.stderr)
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "dpproxy demo did not exit cleanly on SIGTERM: %v\n--- stderr ---\n%s", err, env.stderr)
		if code == 0 {
			code = 1
		}
	}
	return code, nil
}

// readReady reads the demo's stdout until the ready:, upstream:, config:,
// admin: and audit: lines arrived.
func readReady(r io.Reader, timeout time.Duration) error {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(timeout)
	wantWorkers := 0
	if citusMode() {
		wantWorkers = citusWorkers
	}
	for env.aliceDSN == "" || env.upstreamDSN == "" || env.configPath == "" || env.adminURL == "" || env.auditPath == "" || len(env.citusWorkers) < wantWorkers {
		select {
		case l, ok := <-lines:
			if !ok {
				return fmt.Errorf("dpproxy demo exited before printing its ready:, upstream:, config:, admin: and audit: lines")
			}
			if v, found := strings.CutPrefix(l, "ready: "); found {
				env.aliceDSN = v
			}
			if v, found := strings.CutPrefix(l, "upstream: "); found {
				env.upstreamDSN = v
			}
			if v, found := strings.CutPrefix(l, "config: "); found {
				env.configPath = v
			}
			if v, found := strings.CutPrefix(l, "admin: "); found {
				env.adminURL = v
			}
			if v, found := strings.CutPrefix(l, "audit: "); found {
				env.auditPath = v
			}
			if strings.HasPrefix(l, "citus worker ") {
				if _, v, found := strings.Cut(l, ": "); found {
					env.citusWorkers = append(env.citusWorkers, v)
				}
			}
		case <-deadline:
			return fmt.Errorf("dpproxy demo printed no ready: line within %v", timeout)
		}
	}
	go func() { // keep draining stdout
		for range lines {
		}
	}()
	return nil
}

// freeAddr returns a loopback address free now and not handed out before
// in this run: the kernel may give a port just closed to the next caller,
// and a test that asks for two (the proxy's and the admin endpoint's) got
// the same one in a CI run ("bind: address already in use").
func freeAddr() (string, error) {
	freeAddrs.mu.Lock()
	defer freeAddrs.mu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		ln.Close()
		if !freeAddrs.given[addr] {
			freeAddrs.given[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("no free loopback port not handed out before")
}

var freeAddrs = struct {
	mu    sync.Mutex
	given map[string]bool
}{given: map[string]bool{}}

func requireDemo(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
}

// analystDSN is the proxy DSN of an analyst of the demo config.
func analystDSN(name string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/hospital?sslmode=disable", name, name, env.proxyAddr)
}

// ledgerDSN is a superuser DSN of the demo's ledger database.
func ledgerDSN() string {
	return strings.Replace(env.upstreamDSN, "/hospital", "/dpproxy_ledger", 1)
}

// psql runs the real psql binary and returns stdout, stderr and its exit
// code.
func psql(t *testing.T, dsn string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "psql", append([]string{dsn, "-X", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose"}, args...)...)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("psql: %v", err)
	}
	return out.String(), errb.String(), code
}
