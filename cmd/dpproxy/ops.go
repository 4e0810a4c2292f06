package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/admin"
	"github.com/dpproxy/dpproxy/internal/audit"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/proxy"
	"go.uber.org/zap"
)

// ops holds the steward-facing parts of a running server: the admin
// endpoint's metrics and the audit log (either may be off).
type ops struct {
	metrics *admin.Metrics // nil: no admin endpoint
	audit   *audit.Log     // nil: no audit log
}

// openOps opens the audit log and builds the metrics named by the config.
func openOps(cfg *config.Config, datasets []string, stderr io.Writer) (*ops, error) {
	o := &ops{}
	if cfg.Audit != nil {
		a := cfg.Audit
		path := a.Path
		if path != "stderr" {
			path = cfg.Path(path)
		}
		l, err := audit.Open(audit.Config{Path: path, MaxSizeMB: a.MaxSizeMB, MaxBackups: a.MaxBackups, MaxAgeDays: a.MaxAgeDays}, stderr)
		if err != nil {
			return nil, err
		}
		o.audit = l
	}
	if cfg.Admin != nil {
		o.metrics = admin.NewMetrics(datasets)
	}
	return o, nil
}

func (o *ops) close() { _ = o.audit.Close() }

// store wraps the ledger so that charges, refusals and incidents reach the
// audit log and the metrics.
func (o *ops) store(l accountant.Store) accountant.Store {
	if o.audit == nil && o.metrics == nil {
		return l
	}
	s := &audit.Store{Store: l, Log: o.audit}
	if o.metrics != nil {
		s.Counters = o.metrics
	}
	return s
}

// observer returns the proxy's per-statement hook, or nil when neither
// the metrics nor the audit log want statements (the forwarding path then
// pays nothing).
func (o *ops) observer() proxy.Observer {
	if o.audit == nil && o.metrics == nil {
		return nil
	}
	return opsObserver{o}
}

type opsObserver struct{ o *ops }

// Statement counts the statement and writes its audit line. The
// fingerprint (a hash of the normalized text) is computed only for the
// audit log and for DP statements on the dashboard; it is never a metric
// label.
func (h opsObserver) Statement(ev proxy.StatementEvent) {
	m, a := h.o.metrics, h.o.audit
	var dp *admin.DPAnswer
	if ev.DP != nil {
		dp = &admin.DPAnswer{Cached: ev.DP.Cached, CostEpsilon: ev.DP.CostEpsilon, CostDelta: ev.DP.CostDelta}
	}
	if m != nil {
		m.Statement(ev.Route, ev.SQLState, ev.Dataset, ev.Duration, dp)
	}
	isDP := ev.Route == "dp"
	if a == nil && !(m != nil && isDP) {
		return
	}
	fp := ev.Fingerprint()
	code := ev.SQLState
	if code == "" {
		code = "00000"
	}
	if m != nil && isDP {
		r := admin.RecentStatement{At: time.Now(), Analyst: ev.Analyst, Dataset: ev.Dataset, Fingerprint: fp, SQLState: ev.SQLState}
		if dp != nil {
			r.Cached, r.CostEpsilon, r.CostDelta = dp.Cached, dp.CostEpsilon, dp.CostDelta
		}
		m.RecordDP(r)
	}
	if a != nil {
		s := audit.Statement{Analyst: ev.Analyst, Dataset: ev.Dataset, Route: ev.Route, Fingerprint: fp, SQLState: code, Duration: ev.Duration}
		if ev.DP != nil {
			s.DP, s.Cached, s.CostEpsilon, s.CostDelta, s.Charge = true, ev.DP.Cached, ev.DP.CostEpsilon, ev.DP.CostDelta, ev.DP.ChargeFingerprint
		}
		a.Statement(s)
	}
}

// startAdmin listens on the admin address and serves the endpoint until
// ctx ends; it returns the listener's address.
func startAdmin(ctx context.Context, cfg *config.Config, o *ops, led *ledger.Ledger, policies map[string]*policy.Dataset,
	ups map[string]*upstream.Pool, log *zap.Logger) (net.Addr, error) {
	a := cfg.Admin
	var tlsCfg *tls.Config
	if a.TLS != nil {
		cert, err := tls.LoadX509KeyPair(cfg.Path(a.TLS.Cert), cfg.Path(a.TLS.Key))
		if err != nil {
			return nil, fmt.Errorf("admin.tls: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	upstreams := map[string]admin.Upstream{}
	for n, u := range ups {
		upstreams[n] = u
	}
	analysts := map[string][]string{}
	for n, an := range cfg.Analysts {
		analysts[n] = an.Datasets
	}
	srv, err := admin.New(admin.Config{User: a.User, Password: a.Password, TLS: tlsCfg, Ledger: led, Policies: policies,
		Upstreams: upstreams, Metrics: o.metrics, Analysts: analysts, Logger: log})
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", a.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin.listen: listen on %s: %w", a.Listen, err)
	}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("admin endpoint stopped", zap.Error(err))
		}
	}()
	log.Info("admin endpoint listening", zap.String("addr", ln.Addr().String()), zap.Bool("tls", tlsCfg != nil))
	return ln.Addr(), nil
}
