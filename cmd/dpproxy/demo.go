package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"go.uber.org/zap"
)

// examplePGAddr is the PostgreSQL address written in examples/dpproxy.yaml;
// the demo replaces it with its cluster's.
const examplePGAddr = "127.0.0.1:5432"

var listenLine = regexp.MustCompile(`(?m)^listen: .*$`)

// demoConfig turns examples/dpproxy.yaml into the demo's config: the
// cluster's address in every DSN and the --listen address.
func demoConfig(tmpl []byte, pgAddr, listen string) ([]byte, error) {
	s := string(tmpl)
	if !strings.Contains(s, "@"+examplePGAddr+"/") || !listenLine.MatchString(s) {
		return nil, fmt.Errorf("examples/dpproxy.yaml no longer has the %s DSNs and listen: line the demo replaces", examplePGAddr)
	}
	s = strings.ReplaceAll(s, "@"+examplePGAddr+"/", "@"+pgAddr+"/")
	s = listenLine.ReplaceAllLiteralString(s, "listen: "+listen)
	return []byte(s), nil
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "keep the cluster, its data and its ledger in DIR across restarts (default: a temporary directory removed on exit)")
	listen := fs.String("listen", "127.0.0.1:6432", "address analysts connect to")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return usagef("demo: --listen %q is not host:port", *listen)
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usagef("demo: --log-level: %v", err)
	}
	defer log.Sync()

	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: *dataDir, Logger: log})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			log.Error("stop PostgreSQL", zap.Error(err))
		}
	}()
	if _, err := demo.Setup(ctx, cluster, demo.Options{Passwords: true, Logger: log}); err != nil {
		return fmt.Errorf("set up demo data: %w", err)
	}

	pgAddr := net.JoinHostPort(cluster.Host, strconv.Itoa(cluster.Port))
	text, err := demoConfig(examples.Config(), pgAddr, *listen)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(cluster.Dir, "dpproxy.yaml")
	if err := os.MkdirAll(filepath.Join(cluster.Dir, "policies"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cluster.Dir, "policies", "hospital.yaml"), examples.HospitalPolicy(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(cfgPath, text, 0o600); err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	log.Info("demo configuration written", zap.String("config", cfgPath))

	return runServer(ctx, cfg, log, func(addr net.Addr) {
		fmt.Fprintf(stdout, "ready: postgres://alice:alice@%s/%s\n", addr, demo.Database)
		fmt.Fprintf(stdout, "upstream: postgres://%s@%s/%s\n", cluster.Superuser, pgAddr, demo.Database)
		if f, ok := stdout.(*os.File); ok {
			f.Sync()
		}
	})
}

func cmdDemoSetup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo-setup", flag.ContinueOnError)
	adminDSN := fs.String("admin-dsn", os.Getenv("DPPROXY_ADMIN_DSN"), "superuser DSN of the PostgreSQL server (default $DPPROXY_ADMIN_DSN)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *adminDSN == "" {
		return usagef("demo-setup: --admin-dsn DSN (or DPPROXY_ADMIN_DSN) is required")
	}
	log, err := newLogger(stderr, "info")
	if err != nil {
		return err
	}
	defer log.Sync()
	c, err := pgcluster.External(*adminDSN)
	if err != nil {
		return fmt.Errorf("--admin-dsn: %w", err)
	}
	res, err := demo.Setup(ctx, c, demo.Options{Passwords: true, Logger: log})
	if err != nil {
		return fmt.Errorf("set up demo data: %w", err)
	}
	fmt.Fprintf(stdout, "demo data ready (generated: %v)\n", res.Generated)
	return nil
}
