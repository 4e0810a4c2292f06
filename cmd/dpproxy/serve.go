package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/doctor"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/proxy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// limitMemory warns when the analysts' memory bounds do not fit this
// machine (doctor.MemoryFinding), and, unless GOMEMLIMIT is set, makes the
// collector work harder as the heap nears nine tenths of the memory the
// process may use, instead of letting it grow to twice what is live.
func limitMemory(log *zap.Logger, cfg *config.Config) {
	limit, source := doctor.MemoryLimit()
	if f := doctor.MemoryFinding(cfg, limit, source); !f.OK {
		log.Warn(f.Message)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && limit > 0 {
		debug.SetMemoryLimit(limit / 10 * 9)
	}
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (dpproxy.yaml)")
	// Hidden, for end-to-end tests of budget windows only: the ledger's
	// clock reads an RFC 3339 time from this file at every charge.
	clockFile := fs.String("testonly-clock-file", "", "")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *clockFile != "" {
		testOnlyClock = fileClock(*clockFile)
	}
	if *path == "" {
		return usagef("serve: --config FILE is required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	return runServer(ctx, cfg, log, stderr, func(addr, _ net.Addr) {
		log.Info("dpproxy listening", zap.String("addr", addr.String()))
	})
}

// testOnlyClock, when set, replaces the ledger's clock (budget windows).
var testOnlyClock func() time.Time

// fileClock is a clock that reads an RFC 3339 time from path at every call
// (the real time when the file cannot be read).
func fileClock(path string) func() time.Time {
	return func() time.Time {
		b, err := os.ReadFile(path)
		if err != nil {
			return time.Now()
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(b)))
		if err != nil {
			return time.Now()
		}
		return t
	}
}

// loadPolicies loads cfg.Policies: one file or a directory of them.
func loadPolicies(cfg *config.Config) ([]*policy.Dataset, error) {
	p := cfg.Path(cfg.Policies)
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	if st.IsDir() {
		return policy.LoadDir(p)
	}
	ds, err := policy.Load(p)
	if err != nil {
		return nil, err
	}
	return []*policy.Dataset{ds}, nil
}

// verifyCatalog checks ds's column types against the data database's
// catalog (as the data role), learns its unit columns' types and returns
// the fingerprint of those types that every DP query's transaction reads
// again (catalog.GuardSQL).
func verifyCatalog(ctx context.Context, name, dsn string, ds *policy.Dataset) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("datasets.%s.upstream: %w", name, err)
	}
	defer conn.Close(context.Background())
	// One snapshot for the check and the fingerprint: a type changed
	// between two statements would have become the fingerprint every
	// answer is held to while the planner kept the checked type.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", fmt.Errorf("datasets.%s.upstream: %w", name, err)
	}
	defer tx.Rollback(context.Background())
	problems, err := catalog.Verify(ctx, tx, ds)
	if err != nil {
		return "", fmt.Errorf("datasets.%s: %w", name, err)
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("the policy of %s does not match the data database (%s):\n  %s", name, ds.Path, strings.Join(problems, "\n  "))
	}
	fp, err := catalog.Fingerprint(ctx, tx, ds)
	if err != nil {
		return "", fmt.Errorf("datasets.%s: %w", name, err)
	}
	return fp, nil
}

// runServer is the code path of both `serve` and `demo`: policies, ledger,
// shadow catalogs, upstream pools, releaser, proxy; ready is called once the
// listener accepts connections, with the admin endpoint's address (nil when
// it is off). It returns when ctx is cancelled and the proxy has drained.
func runServer(ctx context.Context, cfg *config.Config, log *zap.Logger, stderr io.Writer, ready func(addr, admin net.Addr)) error {
	policies, err := loadPolicies(cfg)
	if err != nil {
		return err
	}
	byName := map[string]*policy.Dataset{}
	for _, ds := range policies {
		byName[ds.Name] = ds
	}
	var names []string
	for n := range cfg.Datasets {
		names = append(names, n)
		if byName[n] == nil {
			return fmt.Errorf("config: datasets.%s has no policy file in %s; add one (dataset: %s) or remove the entry", n, cfg.Path(cfg.Policies), n)
		}
	}
	sort.Strings(names)
	for n := range byName {
		if _, ok := cfg.Datasets[n]; !ok {
			return fmt.Errorf("config: the policy of dataset %s has no datasets.%s entry (upstream, shadow, shadow_admin)", n, n)
		}
	}

	limitMemory(log, cfg)

	led, err := ledger.Open(ctx, cfg.Ledger, log)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	defer led.Close()
	if testOnlyClock != nil {
		log.Warn("the ledger's clock is read from a file (--testonly-clock-file): budget windows follow it; for tests only")
		led.SetClock(testOnlyClock)
	}
	ops, err := openOps(cfg, names, stderr)
	if err != nil {
		return err
	}
	defer ops.close()
	store := ops.store(led)
	ups := map[string]*upstream.Pool{}

	datasets := map[string]*proxy.Dataset{}
	var shadows []*shadowTarget
	for _, n := range names {
		dc, ds := cfg.Datasets[n], byName[n]
		// The policy's column types against the live catalog: a type the
		// column cannot honour would fail on one person's row after a
		// charge (internal/catalog). The types found are held for every
		// answer: each DP query's transaction reads their fingerprint again
		// (catalog.GuardSQL).
		fingerprint, err := verifyCatalog(ctx, n, dc.Upstream, ds)
		if err != nil {
			return err
		}
		sc, err := pgx.ParseConfig(dc.Shadow)
		if err != nil {
			return fmt.Errorf("datasets.%s.shadow: %w", n, err)
		}
		// The shadow catalog, with the public tables' rows (public.go).
		tg := newShadowTarget(n, dc.ShadowAdmin, dc.Upstream, sc.User, ds, dc.PublicMaxRows, dc.PublicRefresh.Duration)
		if err := tg.build(ctx, log); err != nil {
			return fmt.Errorf("build shadow catalog of %s: %w", n, err)
		}
		shadows = append(shadows, tg)
		up, err := upstream.New(ctx, upstream.Config{DSN: dc.Upstream, StatementTimeout: cfg.StatementTimeout.Duration, MaxConns: int32(cfg.UpstreamMaxConnections),
			Guard: catalog.GuardSQL(ds), Fingerprint: fingerprint})
		if err != nil {
			return fmt.Errorf("datasets.%s.upstream: %w", n, err)
		}
		defer up.Close()
		ups[n] = up
		datasets[n] = &proxy.Dataset{Policy: ds, Upstream: up, ShadowDSN: dc.Shadow, ResponseTime: dc.ResponseTime.Duration, WorkRate: dc.WorkRate}
		if dc.ResponseTime.Duration == 0 {
			log.Warn("response_time is off: the time of each DP answer shows how much work the data made upstream (SECURITY.md G5); set datasets."+n+".response_time above the slowest DP query",
				zap.String("dataset", n))
		}
		log.Info("dataset ready", zap.String("dataset", n), zap.String("policy_version", ds.Version))
	}

	stopRefresh := startPublicRefresh(ctx, log, shadows)
	defer stopRefresh()

	rel, err := release.New(release.Config{Ledger: store, Planner: rewrite.Replan})
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		cert, err := tls.LoadX509KeyPair(cfg.Path(cfg.TLS.Cert), cfg.Path(cfg.TLS.Key))
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	srv, err := proxy.New(proxy.Config{
		Datasets:                 datasets,
		Analysts:                 cfg.Analysts,
		Releaser:                 rel,
		Ledger:                   store,
		TLS:                      tlsCfg,
		RequireTLS:               cfg.TLS != nil && cfg.TLS.Require,
		AllowCleartextOverTLS:    cfg.TLS != nil && cfg.TLS.AllowCleartextPassword,
		MaxConnections:           cfg.MaxConnections,
		MaxConnectionsPerAnalyst: cfg.MaxConnectionsPerAnalyst,
		MaxMemoryPerAnalyst:      int64(cfg.MaxMemoryPerAnalystMB) << 20,
		IdleTimeout:              cfg.IdleTimeout.Duration,
		MaxMessage:               cfg.MaxMessageBytes,
		ShadowMaxConns:           cfg.ShadowMaxConnections,
		ShadowAcquireTimeout:     cfg.ShadowAcquireTimeout.Duration,
		ShadowMaxConnsPerAnalyst: cfg.ShadowMaxConnectionsPerAnalyst,
		CatalogStatementTimeout:  cfg.CatalogStatementTimeout.Duration,
		DPConcurrency:            cfg.DPConcurrency,
		DPConcurrencyPerAnalyst:  cfg.DPConcurrencyPerAnalyst,
		DPQueueTimeout:           cfg.DPQueueTimeout.Duration,
		StatementTimeout:         cfg.StatementTimeout.Duration,
		Logger:                   log,
		DefaultRateLimit:         cfg.RateLimit,
		Observer:                 ops.observer(),
	})
	if err != nil {
		return err
	}
	// The admin endpoint listens first: once analysts can connect, the
	// steward can see it.
	var adminAddr net.Addr
	if cfg.Admin != nil {
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		if adminAddr, err = startAdmin(actx, cfg, ops, led, byName, ups, log); err != nil {
			return err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose another address with listen: in the config, or --listen for the demo)", cfg.Listen, err)
	}
	ready(ln.Addr(), adminAddr)
	err = srv.Serve(ctx, ln)
	if errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	// Incidents still waiting for their statements' publish time are
	// written before the ledger closes (its incident write takes at most
	// 5 s).
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	rel.Stop(sctx)
	scancel()
	log.Info("dpproxy stopped")
	return err
}
