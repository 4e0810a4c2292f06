package proxy

import (
	"fmt"
	"io"
	"time"

	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
)

// newShadowPools makes one shadow connection pool per dataset with a
// ShadowDSN (no connection is opened yet).
func newShadowPools(cfg Config) (map[*Dataset]*shadow.Pool, error) {
	pools := map[*Dataset]*shadow.Pool{}
	for name, ds := range cfg.Datasets {
		if ds.ShadowDSN == "" {
			continue
		}
		p, err := shadow.NewPool(shadow.PoolConfig{
			DSN:              ds.ShadowDSN,
			MaxConns:         cfg.ShadowMaxConns,
			AcquireTimeout:   cfg.ShadowAcquireTimeout,
			MaxConnsPerOwner: cfg.ShadowMaxConnsPerAnalyst,
			StatementTimeout: cfg.CatalogStatementTimeout,
			Configure: func(pc *pgconn.Config) {
				pc.ConnectTimeout = 10 * time.Second
				pc.RuntimeParams["application_name"] = "dpproxy"
				pc.RuntimeParams["client_encoding"] = "UTF8"
				// On cancel (CancelRequest, statement_timeout) send a
				// real cancel to the shadow server; the pool then closes
				// the connection rather than reuse it.
				pc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
					return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: 0, DeadlineDelay: 5 * time.Second}
				}
				// One message of the shadow is read whole: at most
				// MaxBufferedResult, refused before its body is read (the
				// relay's own framer has the same bound, openRelay), or one
				// 46-byte COPY (SELECT repeat('x', 134217728)) TO STDOUT
				// made the proxy hold its 128 MB row twice (attack round 36).
				pc.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
					f := pgproto3.NewFrontend(r, w)
					f.SetMaxBodyLen(cfg.MaxBufferedResult)
					return f
				}
			},
		})
		if err != nil {
			for _, p := range pools {
				p.Close()
			}
			return nil, fmt.Errorf("proxy: dataset %q: %w", name, err)
		}
		pools[ds] = p
	}
	return pools, nil
}

// shadowPool returns the dataset's shadow pool, or nil when it has no
// ShadowDSN.
func (s *Server) shadowPool(ds *Dataset) *shadow.Pool { return s.shadows[ds] }

// closeShadowPools closes every shadow pool (Serve's end).
func (s *Server) closeShadowPools() {
	for _, p := range s.shadows {
		p.Close()
	}
}
