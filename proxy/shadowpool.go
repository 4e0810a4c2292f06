package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
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
					f := pgproto3.NewFrontend(&shadowReader{r: r}, w)
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

// shadowReader sits under pgconn's frontend on a shadow connection and
// follows the messages' headers as their bytes pass: an ErrorResponse or
// NoticeResponse whose body is over maxShadowError is refused before its
// body is read (errShadowErrorTooLong; pgconn then closes the connection).
// pgconn reads a message whole, into a buffer of its size, and decodes an
// error into strings, and PostgreSQL quotes a cast's whole input in its
// error (attack round 88: DECLARE … FOR SELECT repeat('x', 60000000)::int
// from 8 sessions held 744–915 MiB uncounted against a 256 MiB bound). The
// relay (relay.go) reads the socket itself, past this reader, and charges
// and clips such a message instead (admitRelayed, clipShadowError): this
// is the pgconn path's (DECLARE's and COPY's query, a post-processed
// answer's outer SQL, Describe, the settings). Its state stays in step:
// the relay takes the socket only after SyncConn, at a message boundary.
// Used by one goroutine at a time (the connection's holder).
type shadowReader struct {
	r    io.Reader
	hdr  [frameHeaderLen]byte
	nh   int
	left int   // body bytes of the current message still to pass
	err  error // once refused, every read fails
}

// maxShadowError bounds the body of an error or notice pgconn reads: 8 KiB
// a field is all the client gets of one (clipShadowError).
const maxShadowError = 64 << 10

// errShadowErrorTooLong: the shadow's error was not read.
var errShadowErrorTooLong = pgerr.New(programLimitExceeded, "the catalog statement failed with an error message over %d KiB, which the proxy does not read", maxShadowError>>10).
	WithHint("the error likely quotes a long value: check the statement's casts and literals")

// Read hands out the bytes read, but for the last byte of a refused
// message's header: pgproto3 reads a header with io.ReadAtLeast, which
// drops an error that comes with enough bytes, and would then allocate a
// buffer of the body's size before its next read failed.
func (s *shadowReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	for i := 0; i < n; {
		if s.left > 0 {
			k := min(s.left, n-i)
			s.left -= k
			i += k
			continue
		}
		s.hdr[s.nh] = p[i]
		s.nh++
		i++
		if s.nh < frameHeaderLen {
			continue
		}
		s.nh = 0
		s.left = max(0, int(int32(binary.BigEndian.Uint32(s.hdr[1:])))-4)
		if (s.hdr[0] == 'E' || s.hdr[0] == 'N') && s.left > maxShadowError {
			s.err = errShadowErrorTooLong // the connection is broken: pgconn closes it
			return i - 1, s.err
		}
	}
	return n, err
}
