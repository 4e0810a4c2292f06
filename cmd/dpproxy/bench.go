package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"go.uber.org/zap"
)

// cmdBenchServe is `dpproxy serve` for the benchmark suite (bench/, `make
// bench --profile`): the same server, plus net/http/pprof on a loopback
// address so that the suite can take CPU and heap profiles of one item at a
// time. Not in the usage text: it is a measuring tool, not a way to run the
// proxy.
func cmdBenchServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-serve", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (dpproxy.yaml)")
	pprofAddr := fs.String("pprof", "", "serve /debug/pprof/ on this loopback address (host:port)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *path == "" {
		return usagef("bench-serve: --config FILE is required")
	}
	if *pprofAddr != "" {
		host, _, err := net.SplitHostPort(*pprofAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return usagef("bench-serve: --pprof %q is not a loopback host:port", *pprofAddr)
		}
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
	if *pprofAddr != "" {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("pprof listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln)
		defer hs.Close()
		log.Info("pprof listening", zap.String("addr", ln.Addr().String()))
	}
	return runServer(ctx, cfg, log, stderr, func(addr, adminAddr net.Addr) {
		log.Info("dpproxy listening", zap.String("addr", addr.String()))
	})
}
