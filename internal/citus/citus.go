// Package citus runs a throwaway Citus cluster (a coordinator and workers,
// each a pgcluster on loopback) for `dpproxy demo --citus-workers` and the
// tests that check dpproxy's emitted SQL on distributed tables.
//
// Citus metadata is per database: CreateDatabase makes a database on every
// node, creates the citus extension in each and registers the workers in the
// coordinator's copy. Distributing tables is the caller's business
// (create_distributed_table on the coordinator).
//
// Citus itself is not part of dpproxy: real deployments install it from
// Citus's own packages. The test machines build it from a vendored source
// tarball (scripts/ensure-citus.sh, `make test-citus`).
package citus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Settings are the server settings of every node (pgcluster.Options.Settings):
// the extension preloaded, and the nodes talking to each other over loopback
// without TLS (Citus's default, sslmode=require, also makes the server's
// libpq read the client certificate in the home directory of whoever started
// it, which the postgres system user cannot read when the tests run as
// root).
var Settings = map[string]string{
	"shared_preload_libraries": "citus",
	"citus.node_conninfo":      "sslmode=disable",
}

// InstallHint says how to get Citus for the tests.
const InstallHint = "the Citus extension for PostgreSQL is not installed: run `make test-citus` (it builds Citus from ../shared/vendor as root), or install Citus's own package for your PostgreSQL"

// ErrNotInstalled is returned by Check when citus.so is missing.
var ErrNotInstalled = errors.New("citus.so not found in PostgreSQL's library directory")

// Check reports whether the PostgreSQL server binaries in binDir (found as
// pgcluster does when empty) have the citus extension.
func Check(binDir string) error {
	if binDir == "" {
		var err error
		if binDir, err = pgcluster.FindBinDir(); err != nil {
			return err
		}
	}
	lib := filepath.Join(filepath.Dir(binDir), "lib")
	if out, err := exec.Command(filepath.Join(binDir, "pg_config"), "--pkglibdir").Output(); err == nil {
		lib = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(lib, "citus.so")); err != nil {
		return fmt.Errorf("%w (%s); %s", ErrNotInstalled, lib, InstallHint)
	}
	return nil
}

// Options configures Start.
type Options struct {
	// Workers is the number of worker nodes (at least 1).
	Workers int
	// Dir, when set, keeps the clusters: the coordinator in Dir, worker i
	// in Dir/citus-worker-i. Empty: temporary directories removed by Stop.
	Dir    string
	Logger *zap.Logger
	// NoFsync as in pgcluster.Options (throwaway clusters).
	NoFsync bool
	// Settings are extra settings for every node, on top of Settings.
	Settings map[string]string
}

// Cluster is a running Citus coordinator and its workers. Safe for
// concurrent use.
type Cluster struct {
	Coordinator *pgcluster.Cluster
	Workers     []*pgcluster.Cluster
	log         *zap.Logger
}

// Start starts the coordinator and the workers, one after the other (as
// root, the first start may create the postgres system user).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Workers < 1 {
		return nil, errors.New("citus: at least one worker")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if err := Check(""); err != nil {
		return nil, err
	}
	settings := map[string]string{}
	for k, v := range Settings {
		settings[k] = v
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	c := &Cluster{log: log}
	coord, err := pgcluster.Start(ctx, pgcluster.Options{Dir: opts.Dir, Logger: log.Named("citus-coordinator"), NoFsync: opts.NoFsync, Settings: settings})
	if err != nil {
		return nil, fmt.Errorf("start the Citus coordinator: %w", err)
	}
	c.Coordinator = coord
	workers, err := StartWorkers(ctx, opts.Dir, opts.Workers, opts.NoFsync, settings, log)
	if err != nil {
		c.Stop()
		return nil, err
	}
	c.Workers = workers
	return c, nil
}

// StartWorkers starts n worker clusters, in dir/citus-worker-I (temporary
// when dir is empty), with Settings and extra.
func StartWorkers(ctx context.Context, dir string, n int, noFsync bool, extra map[string]string, log *zap.Logger) ([]*pgcluster.Cluster, error) {
	settings := map[string]string{}
	for k, v := range Settings {
		settings[k] = v
	}
	for k, v := range extra {
		settings[k] = v
	}
	var workers []*pgcluster.Cluster
	for i := 1; i <= n; i++ {
		wdir := ""
		if dir != "" {
			wdir = filepath.Join(dir, fmt.Sprintf("citus-worker-%d", i))
		}
		w, err := pgcluster.Start(ctx, pgcluster.Options{Dir: wdir, Logger: log.Named(fmt.Sprintf("citus-worker-%d", i)), NoFsync: noFsync, Settings: settings})
		if err != nil {
			for _, w := range workers {
				w.Stop()
			}
			return nil, fmt.Errorf("start Citus worker %d: %w", i, err)
		}
		workers = append(workers, w)
	}
	return workers, nil
}

// Stop stops the coordinator first (it holds connections to the workers),
// then the workers, and returns the first error.
func (c *Cluster) Stop() error {
	var first error
	for _, n := range append([]*pgcluster.Cluster{c.Coordinator}, c.Workers...) {
		if n == nil {
			continue
		}
		if err := n.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CreateDatabase makes database name on every node (unless it exists),
// with the citus extension, and registers the workers in the coordinator's
// metadata of that database. Roles made in the coordinator after this are
// propagated to the workers by Citus; roles made before are not
// (EnsureRoles).
func CreateDatabase(ctx context.Context, coord *pgcluster.Cluster, workers []*pgcluster.Cluster, name string) error {
	for _, n := range append([]*pgcluster.Cluster{coord}, workers...) {
		if err := ensureDatabase(ctx, n, name); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, coord.DSN(name))
	if err != nil {
		return fmt.Errorf("connect to the Citus coordinator: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", coord.Host, coord.Port); err != nil {
		return fmt.Errorf("citus_set_coordinator_host: %w", err)
	}
	for _, w := range workers {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_dist_node WHERE nodename = $1 AND nodeport = $2", w.Host, w.Port).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT citus_add_node($1, $2)", w.Host, w.Port); err != nil {
			return fmt.Errorf("citus_add_node %s:%d: %w", w.Host, w.Port, err)
		}
	}
	return nil
}

// CreateDatabase is the package function for this cluster's nodes.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	return CreateDatabase(ctx, c.Coordinator, c.Workers, name)
}

func ensureDatabase(ctx context.Context, n *pgcluster.Cluster, name string) error {
	admin, err := pgx.Connect(ctx, n.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect to %s:%d: %w", n.Host, n.Port, err)
	}
	defer admin.Close(context.Background())
	var k int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&k); err != nil {
		return err
	}
	if k == 0 {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("create database %s on %s:%d: %w", name, n.Host, n.Port, err)
		}
	}
	conn, err := pgx.Connect(ctx, n.DSN(name))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
		return fmt.Errorf("create extension citus in %s on %s:%d: %w", name, n.Host, n.Port, err)
	}
	return nil
}

// PushDown is what CheckPushDown found in a Citus EXPLAIN (VERBOSE).
type PushDown struct {
	// WorkerGroupKeys are the Group Key lines, inside tasks that run on a
	// worker, that name a unit column: the per-unit aggregate in the shards.
	WorkerGroupKeys []string
	// WorkerWindows counts the WindowAgg nodes inside worker tasks (the
	// per-unit ranks of sample-and-aggregate).
	WorkerWindows int
	// CoordinatorGroupKeys are the Group Key lines outside worker tasks that
	// name a unit column: a per-unit aggregate on the coordinator, over rows
	// pulled from the shards.
	CoordinatorGroupKeys []string
	// Tasks is the Task Count of the first distributed scan.
	Tasks int
}

// CheckPushDown reads the text of EXPLAIN (VERBOSE) of a query on the Citus
// coordinator listening on coordPort and reports where the per-unit stage
// runs. units are the names a unit column may carry in the plan (the
// tables' unit columns, the emitter's aliases dp_unit and dp_ju). It
// returns an error when the plan is not distributed, when no worker task
// groups by a unit nor ranks rows in a window, or when the coordinator
// groups by a unit. (Citus runs a window function in the shards only when
// it is partitioned by the distribution column, so a window in a worker
// task is a per-unit one; a worker's GROUP BY of another column is only a
// partial aggregate, so group keys must name the unit.) A plan that reads
// no table (a WHERE proved false) passes.
func CheckPushDown(plan string, coordPort int, units []string) (PushDown, error) {
	var pd PushDown
	if !strings.Contains(plan, "Custom Scan (Citus") {
		return pd, errors.New("the plan has no Citus custom scan: the query did not run distributed")
	}
	var alts []string
	for _, u := range units {
		alts = append(alts, regexp.QuoteMeta(u))
	}
	// A unit column as a whole name: qualified (t.u), in a list or a call.
	unitRe := regexp.MustCompile(`(^|[.( ,])"?(` + strings.Join(alts, "|") + `)"?($|[^A-Za-z0-9_$])`)
	namesUnit := func(l string) bool {
		_, keys, _ := strings.Cut(l, ":")
		return unitRe.MatchString(keys)
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	taskIndent := -1 // indentation of the "->  Task" line of the task we are in
	worker := false
	coord := fmt.Sprintf("port=%d ", coordPort)
	scans := 0
	for _, l := range strings.Split(plan, "\n") {
		t := strings.TrimSpace(l)
		// A string literal of the query may span lines: only plan nodes
		// and their labelled lines give the structure.
		if !strings.HasPrefix(t, "->") && !planLabel.MatchString(t) {
			continue
		}
		if taskIndent >= 0 && indent(l) <= taskIndent {
			taskIndent, worker = -1, false
		}
		if tableScan.MatchString(t) {
			scans++
		}
		switch {
		case t == "->  Task":
			taskIndent, worker = indent(l), false
			continue
		case strings.HasPrefix(t, "Node: host="):
			worker = taskIndent >= 0 && !strings.Contains(t+" ", coord)
			continue
		case strings.HasPrefix(t, "Task Count: ") && pd.Tasks == 0:
			fmt.Sscanf(strings.TrimPrefix(t, "Task Count: "), "%d", &pd.Tasks)
		}
		inWorker := taskIndent >= 0 && worker
		if strings.HasPrefix(t, "Group Key:") && namesUnit(t) {
			if inWorker {
				pd.WorkerGroupKeys = append(pd.WorkerGroupKeys, t)
			} else {
				pd.CoordinatorGroupKeys = append(pd.CoordinatorGroupKeys, t)
			}
		}
		if inWorker && strings.Contains(t, "WindowAgg") {
			pd.WorkerWindows++
		}
	}
	switch {
	case scans == 0:
		// PostgreSQL proved the WHERE false: no shard is read.
		return pd, nil
	case len(pd.CoordinatorGroupKeys) > 0:
		return pd, fmt.Errorf("the coordinator groups by the unit (%s): the per-unit stage is not pushed down", pd.CoordinatorGroupKeys[0])
	case len(pd.WorkerGroupKeys) == 0 && pd.WorkerWindows == 0:
		return pd, errors.New("no worker task groups by the unit or ranks within it: the per-unit stage is not in the shards")
	}
	return pd, nil
}

var (
	// planLabel is a labelled line of a plan node ("Group Key: …",
	// "Task Count: 4", "Node: host=…") or a top-level node.
	planLabel = regexp.MustCompile(`^[A-Z][A-Za-z ()-]*(:|$| on | using |  \()`)
	// tableScan is a node that reads a table (or a shard of one).
	tableScan = regexp.MustCompile(`(Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan|Tid Scan|Tid Range Scan|Sample Scan) `)
)
