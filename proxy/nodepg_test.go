package proxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodePGVersion is the node-postgres release the test installs from npm.
const nodePGVersion = "8.13.1"

// nodePG returns the node binary and a node_modules directory holding pg,
// installed once per version under the user's cache directory (so repeated
// runs do not touch the network). It fails under CI=true and skips
// otherwise when node or npm is missing.
func nodePG(t *testing.T) (node, modules string) {
	t.Helper()
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		needClient(t, "node and npm", "nodejs npm")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "dpproxy-test", "node-pg-"+nodePGVersion)
	modules = filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "pg", "package.json")); err == nil {
		return node, modules
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// Install into a fresh directory and rename it into place, so that a
	// concurrent or interrupted install never leaves a half-filled cache.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--no-package-lock", "--loglevel=error", "pg@"+nodePGVersion)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install pg@%s (is the npm registry reachable?): %v\n%s", nodePGVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(modules, "pg", "package.json")); serr != nil {
			t.Fatalf("caching node-postgres: %v", err)
		}
	}
	return node, modules
}

// TestNodePostgres runs node-postgres (pg from npm) against the in-process
// proxy: SCRAM, a parameterised query whose parameter type the server
// infers, a grouped DP query, a refused query as an ordinary error with
// the connection usable afterwards.
func TestNodePostgres(t *testing.T) {
	t.Parallel()
	node, modules := nodePG(t)
	ts := startShadowServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/node_pg_client.js",
		fmt.Sprintf("postgres://alice:alice@%s/hospital?sslmode=disable", ts.addr))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"count 42", "groups 7 department,n", "refused 42501", "after 42"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("node-postgres output lacks %q:\n%s", want, got)
		}
	}
	if len(ts.releaser.requests()) != 2 {
		t.Errorf("%d DP requests, want 2", len(ts.releaser.requests()))
	}
}
