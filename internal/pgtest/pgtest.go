// Package pgtest gives tests a real PostgreSQL server: one throwaway cluster
// per test binary (internal/pgcluster), started on first use and stopped
// after the tests, and fresh databases in it.
//
// Use it as
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and call [NewDatabase] or [Cluster] in tests. When DPPROXY_TEST_DATABASE
// holds a superuser DSN, its server is used instead of starting one.
//
// Without PostgreSQL server binaries, tests are skipped with the install
// command, except under CI=true or CI=1, where they fail: nothing that needs
// PostgreSQL may be skipped in CI.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// EnvDatabase names the environment variable with an external superuser DSN.
const EnvDatabase = "DPPROXY_TEST_DATABASE"

var (
	mu       sync.Mutex
	shared   *pgcluster.Cluster
	startErr error
	started  bool
	dbSeq    atomic.Int64
)

// Main runs the tests and then stops the shared cluster if one was started.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop cluster:", err)
		}
		shared = nil
	}
	mu.Unlock()
	os.Exit(code)
}

// InCI reports whether CI=true or CI=1 is set (pgcluster.InCI).
func InCI() bool { return pgcluster.InCI() }

// Cluster returns the shared cluster (starting it on first use); skips or
// fails per CI.
func Cluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	c, err := cluster()
	if err != nil {
		if errors.Is(err, pgcluster.ErrNotInstalled) && !InCI() {
			t.Skipf("pgtest: %v", err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	return c
}

func cluster() (*pgcluster.Cluster, error) {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return shared, startErr
	}
	started = true
	if dsn := os.Getenv(EnvDatabase); dsn != "" {
		shared, startErr = pgcluster.External(dsn)
		if startErr != nil {
			startErr = fmt.Errorf("%s: %w", EnvDatabase, startErr)
		}
		return shared, startErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shared, startErr = pgcluster.Start(ctx, pgcluster.Options{NoFsync: true})
	return shared, startErr
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates a fresh empty database with a unique name and returns
// its superuser DSN. The database is dropped when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	c := Cluster(t)
	name := strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("t_%d_%d_%s", os.Getpid(), dbSeq.Add(1), name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Exec(ctx, c.DSN("postgres"), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// WITH (FORCE) ends sessions a test left open (PostgreSQL 13+).
		if err := Exec(ctx, c.DSN("postgres"), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// Exec runs statements on a fresh connection to dsn.
func Exec(ctx context.Context, dsn string, sqls ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// NewCluster starts a second, private throwaway cluster (e.g. for a shadow
// catalog, which must not share the data's cluster), stopped when the test
// ends. It skips or fails like Cluster when PostgreSQL is missing.
func NewCluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	return NewClusterWith(t, pgcluster.Options{})
}

// NewClusterWith is NewCluster with options (NoFsync is always set).
func NewClusterWith(t testing.TB, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	Cluster(t) // skips, or fails under CI, without PostgreSQL
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts.NoFsync = true
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		if errors.Is(err, pgcluster.ErrNotInstalled) && !InCI() {
			t.Skipf("a second PostgreSQL cluster: %v", err)
		}
		t.Fatalf("start a second cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the second cluster: %v", err)
		}
	})
	return c
}
