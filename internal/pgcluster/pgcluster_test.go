package pgcluster

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// These tests start their own clusters (not internal/pgtest, which is built
// on this package).

func skipWithoutPostgres(t *testing.T) {
	t.Helper()
	if _, err := FindBinDir(); err != nil {
		if InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func query(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func execSQL(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStart_TempDirRemovedOnStop(t *testing.T) {
	skipWithoutPostgres(t)
	ctx := context.Background()
	c, err := Start(ctx, Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Host != "127.0.0.1" || c.Port == 0 || c.Version < 10 || c.Superuser != "postgres" {
		t.Errorf("cluster = %+v, want 127.0.0.1, a port, a version ≥ 10, superuser postgres", c)
	}
	if got := query(t, c.DSN("postgres"), "SELECT current_setting('server_encoding')"); got != "UTF8" {
		t.Errorf("server_encoding = %s, want UTF8", got)
	}
	if got := query(t, c.DSN("postgres"), "SELECT current_setting('listen_addresses')"); got != "127.0.0.1" {
		t.Errorf("listen_addresses = %s, want 127.0.0.1", got)
	}
	if got := query(t, c.DSN("postgres"), "SELECT current_setting('fsync')"); got != "off" {
		t.Errorf("fsync = %s with NoFsync, want off", got)
	}
	if got := query(t, c.DSN("postgres"), "SELECT current_setting('unix_socket_directories')"); got != c.DataDir() {
		t.Errorf("unix_socket_directories = %s, want %s", got, c.DataDir())
	}
	if os.Geteuid() == 0 {
		// The server must not run as root.
		st, err := os.Stat(c.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		if uid := statUID(st); uid == 0 {
			t.Errorf("data directory owned by root, want the postgres user")
		}
	}
	dir := c.Dir
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s still exists after Stop (err %v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx2, c.DSN("postgres")); err == nil {
		conn.Close(ctx2)
		t.Error("server still accepts connections after Stop")
	}
}

func TestStart_ExplicitDirKeepsDataAcrossRestarts(t *testing.T) {
	skipWithoutPostgres(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cluster")
	// As root, t.TempDir's 0700 parents get o+x so the postgres user can
	// reach the data directory.
	c, err := Start(ctx, Options{Dir: dir, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, c.DSN("postgres"), "CREATE TABLE kept(x int); INSERT INTO kept VALUES (42)")
	firstPort := c.Port
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pgdata", "PG_VERSION")); err != nil {
		t.Fatalf("explicit directory not kept: %v", err)
	}
	c2, err := Start(ctx, Options{Dir: dir, NoFsync: true})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer c2.Stop()
	if got := query(t, c2.DSN("postgres"), "SELECT x::text FROM kept"); got != "42" {
		t.Errorf("after restart kept.x = %s, want 42", got)
	}
	t.Logf("ports: %d then %d", firstPort, c2.Port)

	// A second server on the same directory is refused while one runs.
	if c3, err := Start(ctx, Options{Dir: dir}); err == nil {
		c3.Stop()
		t.Fatal("second Start on a running cluster's directory succeeded")
	} else if !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Start error = %v, want 'already running'", err)
	}
}

func TestStart_FixedPort(t *testing.T) {
	skipWithoutPostgres(t)
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Options{Port: p, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Port != p {
		t.Errorf("Port = %d, want %d", c.Port, p)
	}
	if got := query(t, c.DSN("postgres"), "SELECT current_setting('port')"); got != itoa(p) {
		t.Errorf("port setting = %s, want %d", got, p)
	}
}

func TestFindBinDir_NotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := testOnlyVersionedBinGlob
	testOnlyVersionedBinGlob = filepath.Join(t.TempDir(), "*", "bin")
	defer func() { testOnlyVersionedBinGlob = old }()
	_, err := FindBinDir()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("FindBinDir() error = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Errorf("error %q does not give the install command", err)
	}
	if _, err := Start(context.Background(), Options{}); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Start() error = %v, want ErrNotInstalled", err)
	}
}

func TestFindBinDir_NewestVersion(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "16"} {
		d := filepath.Join(root, v, "bin")
		os.MkdirAll(d, 0o755)
		if v == "16" {
			continue // incomplete: no binaries
		}
		for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
			os.WriteFile(filepath.Join(d, n), []byte("#!/bin/sh\n"), 0o755)
		}
	}
	t.Setenv("PATH", t.TempDir())
	old := testOnlyVersionedBinGlob
	testOnlyVersionedBinGlob = filepath.Join(root, "*", "bin")
	defer func() { testOnlyVersionedBinGlob = old }()
	got, err := FindBinDir()
	if want := filepath.Join(root, "13", "bin"); err != nil || got != want {
		t.Errorf("FindBinDir() = %q, %v, want %q", got, err, want)
	}
}

func TestDSN(t *testing.T) {
	c := &Cluster{Host: "127.0.0.1", Port: 5433, Superuser: "postgres"}
	if got, want := c.DSN("hospital"), "postgres://postgres@127.0.0.1:5433/hospital?sslmode=disable"; got != want {
		t.Errorf("DSN = %s, want %s", got, want)
	}
	e, err := External("postgres://admin:s%40cret@db.example:5434/x")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.DSN("y"), "postgres://admin:s%40cret@db.example:5434/y?sslmode=disable"; got != want {
		t.Errorf("External DSN = %s, want %s", got, want)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("external Stop = %v", err)
	}
}

func TestStart_UnreachableDirAsRoot(t *testing.T) {
	skipWithoutPostgres(t)
	if os.Geteuid() != 0 {
		if InCI() {
			t.Fatal("CI must run as root (.ci/run): this test covers the server running as the postgres user, which only root sets up")
		}
		t.Skip("only root runs the server as another user")
	}
	cred, err := serverCredential()
	if err != nil {
		t.Fatal(err)
	}
	// A private directory outside the temporary directory is refused with
	// the command that fixes it, and left unchanged.
	parent, err := os.MkdirTemp("/var/tmp", "dpproxy-private-")
	if err != nil {
		if InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	defer os.RemoveAll(parent)
	os.Chmod(parent, 0o700)
	err = cred.ensureReachable(filepath.Join(parent), nil)
	if err == nil || !strings.Contains(err.Error(), "chmod o+x "+parent) {
		t.Errorf("ensureReachable(private dir) = %v, want the chmod command", err)
	}
	if st, _ := os.Stat(parent); st.Mode().Perm() != 0o700 {
		t.Errorf("mode of %s changed to %v", parent, st.Mode().Perm())
	}
}

func TestStart_PortInUse(t *testing.T) {
	skipWithoutPostgres(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := Start(context.Background(), Options{Port: port, NoFsync: true})
	if err == nil {
		c.Stop()
		t.Fatalf("Start on a busy port %d succeeded", port)
	}
	if !errors.Is(err, errPortInUse) || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("Start on a busy port: %v, want errPortInUse naming the port", err)
	}
	if c != nil {
		t.Error("Start returned a cluster with its error")
	}
}

func TestInCI(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"true", true}, {"1", true}, {"TRUE", true}, {" True ", true}, {"", false}, {"0", false}, {"false", false}, {"yes", false}} {
		t.Setenv("CI", tc.v)
		if got := InCI(); got != tc.want {
			t.Errorf("CI=%q: InCI() = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestStart_Settings(t *testing.T) {
	skipWithoutPostgres(t)
	c, err := Start(context.Background(), Options{NoFsync: true, Settings: map[string]string{
		"work_mem":         "7MB",
		"application_name": "it's",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if got := query(t, c.DSN("postgres"), "SELECT current_setting('work_mem')"); got != "7MB" {
		t.Errorf("work_mem = %s, want 7MB", got)
	}
	if got := query(t, c.DSN("postgres"), "SELECT setting FROM pg_settings WHERE name = 'application_name'"); got != "it's" {
		t.Errorf("application_name = %q, want %q (quote doubled in dpproxy.conf)", got, "it's")
	}
	_, err = Start(context.Background(), Options{NoFsync: true, Settings: map[string]string{"work_mem = 1; x": "1"}})
	if err == nil || !strings.Contains(err.Error(), "not a plain identifier") {
		t.Errorf("Start with a bad setting name: err = %v, want \"not a plain identifier\"", err)
	}
}
