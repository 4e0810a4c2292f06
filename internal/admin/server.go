// Package admin is the steward's HTTP endpoint (issue 18): Prometheus
// metrics at /metrics, a health check at /healthz and a server-rendered
// dashboard at /. It sits beside the proxy, never on the data path: it
// reads the ledger (budgets, charge times and costs, incidents) and the
// proxy's per-statement counters, never a released value, a statement's
// text or an upstream row.
//
// Every path except /healthz needs the steward's credentials (HTTP basic
// authentication, admin.user and admin.password of the config, never an
// analyst's). /healthz answers without them, so that load balancers and
// orchestrators can probe it; it says only "ok" or which dependency is
// down.
package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Ledger is what the endpoint reads of the ledger. *ledger.Ledger
// implements it.
type Ledger interface {
	Budgets(ctx context.Context, policies map[string]*policy.Dataset, dataset, analyst string) ([]ledger.BudgetInfo, error)
	Incidents(ctx context.Context, dataset, analyst string, limit int) ([]ledger.IncidentInfo, error)
	History(ctx context.Context, since time.Time, limit int) ([]ledger.ChargePoint, error)
	Ping(ctx context.Context) error
	PoolStat() *pgxpool.Stat
}

// Upstream is one dataset's data pool. *upstream.Pool implements it.
type Upstream interface {
	Ping(ctx context.Context) error
	Stat() *pgxpool.Stat
}

// Config configures the endpoint.
type Config struct {
	// User and Password are the steward's credentials: Password is a
	// SCRAM-SHA-256 verifier (dpproxy passwd) or "plain:…".
	User, Password string
	// TLS, when set, serves HTTPS.
	TLS       *tls.Config
	Ledger    Ledger
	Policies  map[string]*policy.Dataset
	Upstreams map[string]Upstream // by dataset
	Metrics   *Metrics
	// Analysts are the analysts who may connect, with the datasets each
	// may query (empty: all): the dashboard lists those without a charge
	// yet too.
	Analysts map[string][]string
	Logger   *zap.Logger
	// Now is the clock of the dashboard's "now" (default time.Now).
	Now func() time.Time
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Server is the admin endpoint. Safe for concurrent use.
type Server struct {
	cfg     Config
	cred    *credential
	budgets *budgetSource
	health  healthCache
	http    *http.Server
}

// New validates cfg and builds the endpoint.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil || cfg.Metrics == nil {
		return nil, errors.New("admin: Ledger and Metrics are required")
	}
	cred, err := newCredential(cfg.User, cfg.Password)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Server{cfg: cfg, cred: cred}
	s.budgets = &budgetSource{cfg: &s.cfg}
	reg := cfg.Metrics.Registry()
	if err := reg.Register(newBudgetCollector(s.budgets)); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	if err := reg.Register(newPoolCollector(s.poolStats)); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", cred.requireSteward(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	mux.Handle("GET /{$}", cred.requireSteward(http.HandlerFunc(s.dashboard)))
	mux.Handle("/", cred.requireSteward(http.NotFoundHandler()))
	s.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ConnState:         connState,
		TLSConfig:         cfg.TLS,
		ErrorLog:          zap.NewStdLog(cfg.Logger.Named("admin")),
	}
	return s, nil
}

// Handler returns the endpoint's handler (for tests).
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.http.Shutdown(sctx)
	}()
	// Counted below TLS: a handshake that never ends holds a place too.
	ln = newConnLimit(ln, maxConns)
	var err error
	if s.cfg.TLS != nil {
		err = s.http.Serve(tls.NewListener(ln, s.cfg.TLS))
	} else {
		err = s.http.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) poolStats() map[string]*pgxpool.Stat {
	out := map[string]*pgxpool.Stat{"ledger": s.cfg.Ledger.PoolStat()}
	for n, u := range s.cfg.Upstreams {
		out["upstream/"+n] = u.Stat()
	}
	return out
}

// healthTTL is how long one probe of the ledger and the data pools
// answers /healthz. /healthz needs no credentials, so its cost must not
// grow with its request rate: every request had pinged the ledger and
// every data pool, outside the analysts' shares of the ledger pool (attack
// round 86: 10,500 unauthenticated requests a second made as many pings
// to each, and slowed the analysts' charges queueing for the ledger pool).
const healthTTL = time.Second

// healthCache is the last probe; its mutex makes concurrent requests wait
// for one probe instead of each running its own.
type healthCache struct {
	mu    sync.Mutex
	valid bool
	at    time.Time
	down  []string
}

// healthz answers 200 when the ledger and every upstream answered a ping
// within two seconds at the last probe (at most healthTTL old), else 503
// naming what is down (no details: a connection error could name hosts).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	h := &s.health
	h.mu.Lock()
	now := s.cfg.now()
	if !h.valid || now.Sub(h.at) >= healthTTL || now.Before(h.at) {
		// Not the request's context: a client that goes away must not
		// leave a failed probe for the others.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var down []string
		if err := s.cfg.Ledger.Ping(ctx); err != nil {
			down = append(down, "ledger")
		}
		for n, u := range s.cfg.Upstreams {
			if err := u.Ping(ctx); err != nil {
				down = append(down, "upstream/"+n)
			}
		}
		cancel()
		h.valid, h.at, h.down = true, s.cfg.now(), down
	}
	down := h.down
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(down) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unavailable: %v\n", down)
		return
	}
	fmt.Fprintln(w, "ok")
}

func zapError(err error) zap.Field { return zap.Error(err) }
