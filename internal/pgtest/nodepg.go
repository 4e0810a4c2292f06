package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NodePGVersion is the node-postgres release the tests install from npm.
const NodePGVersion = "8.13.1"

// NodePG returns the node binary and a node_modules directory holding pg,
// installed once per version under the user's cache directory (so repeated
// runs do not touch the network). It fails under CI=true and skips
// otherwise when node or npm is missing.
func NodePG(t testing.TB) (node, modules string) {
	t.Helper()
	node, err1 := exec.LookPath("node")
	_, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		msg := "node and npm not installed; install with: apt-get install nodejs npm (or run scripts/ensure-deps.sh as root)"
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, NodeInstall(t, "node-pg-"+NodePGVersion, "pg@"+NodePGVersion)
}

// NodeInstall installs npm packages (name@version each) once under the
// user's cache directory in a directory named dir, and returns its
// node_modules. It fails the test when npm cannot install them.
func NodeInstall(t testing.TB, dir string, pkgs ...string) (modules string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		msg := "npm not installed; install with: apt-get install nodejs npm (or run scripts/ensure-deps.sh as root)"
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir = filepath.Join(cache, "dpproxy-test", dir)
	modules = filepath.Join(dir, "node_modules")
	installed := func() bool {
		for _, p := range pkgs {
			name := p[:strings.LastIndex(p, "@")]
			if _, err := os.Stat(filepath.Join(modules, name, "package.json")); err != nil {
				return false
			}
		}
		return true
	}
	if installed() {
		return modules
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
	cmd := exec.CommandContext(ctx, npm, append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--no-package-lock", "--loglevel=error"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s (is the npm registry reachable?): %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !installed() {
		t.Fatalf("caching %s: %v", strings.Join(pkgs, " "), err)
	}
	return modules
}
