package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

func systemIdentifier(t *testing.T, c *pgcluster.Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id int64
	if err := conn.QueryRow(ctx, "SELECT system_identifier FROM pg_control_system()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// The demo's two clusters are distinct servers; with an explicit data
// directory both are kept (DIR and DIR/shadow) and started again.
func TestStartClusters_KeptDataDir(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if pgtest.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	start := func() (data, shadow *pgcluster.Cluster, ids [2]int64) {
		t.Helper()
		data, shadow, err := startClusters(ctx, dir, nil, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		ids = [2]int64{systemIdentifier(t, data), systemIdentifier(t, shadow)}
		for _, c := range []*pgcluster.Cluster{shadow, data} {
			if err := c.Stop(); err != nil {
				t.Errorf("stop %s: %v", c.Dir, err)
			}
		}
		return data, shadow, ids
	}
	data, shadow, first := start()
	if first[0] == first[1] {
		t.Fatalf("data and shadow clusters have the same system identifier %d", first[0])
	}
	if data.DataDir() != filepath.Join(dir, "pgdata") || shadow.DataDir() != filepath.Join(dir, "shadow", "pgdata") {
		t.Errorf("data directories %s and %s, want DIR/pgdata and DIR/shadow/pgdata", data.DataDir(), shadow.DataDir())
	}
	// Stopped clusters of an explicit directory are kept ...
	for _, d := range []string{data.DataDir(), shadow.DataDir()} {
		if _, err := os.Stat(filepath.Join(d, "PG_VERSION")); err != nil {
			t.Errorf("cluster in %s not kept: %v", d, err)
		}
	}
	// ... and started again, not re-created.
	_, _, second := start()
	if second != first {
		t.Errorf("restarted clusters have system identifiers %v, want the kept %v", second, first)
	}
}
