package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"go.uber.org/zap"
)

// Dataset is one dataset the proxy serves.
type Dataset struct {
	Policy *policy.Dataset
	// Upstream runs emitted SQL (the only thing that touches private data).
	Upstream release.Upstream
	// ShadowDSN is where catalog statements of analysts' sessions go; the
	// proxy opens one shadow connection per client session that needs it.
	ShadowDSN string
}

// Config configures a Server.
type Config struct {
	Datasets       map[string]*Dataset // by dataset (database) name
	Analysts       map[string]config.Analyst
	Releaser       *release.Releaser
	Ledger         accountant.Store // for SHOW dp.budget
	TLS            *tls.Config      // nil: answer SSLRequest with N
	RequireTLS     bool
	MaxConnections int
	IdleTimeout    time.Duration
	Logger         *zap.Logger
}

// Server is the PostgreSQL wire-protocol server. Safe for concurrent use.
type Server struct{ cfg Config }

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) { return &Server{cfg: cfg}, nil }

// Serve accepts connections on ln until ctx is cancelled, then closes ln and
// waits for sessions to finish (up to a drain deadline).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return errors.New("proxy: not implemented")
}
