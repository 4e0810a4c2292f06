package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dpproxy/dpproxy/internal/linerate"
	"github.com/dpproxy/dpproxy/internal/share"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/kdflimit"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Dataset is one dataset the proxy serves.
type Dataset struct {
	Policy *policy.Dataset
	// Upstream runs emitted SQL (the only thing that touches private data).
	Upstream release.Upstream
	// ShadowDSN is where catalog statements of analysts' sessions go,
	// through a pool of connections shared by the sessions (shadowpool.go).
	ShadowDSN string
	// ResponseTime pads every DP answer (and every error after a charge)
	// to at least this long (0: no padding); see padResponse.
	ResponseTime time.Duration
	// WorkRate (rows per second) turns a plan's work bound into its time
	// slot (timeSlot; 0: every slot is ResponseTime).
	WorkRate float64
}

// Releaser answers one DP request: reserve → run → noise → record.
// *release.Releaser implements it; tests use fakes.
type Releaser interface {
	Run(ctx context.Context, req release.Request) (*release.Result, error)
	// RunBatch answers the DP leaves of one statement under one charge
	// (release.Releaser.RunBatch).
	RunBatch(ctx context.Context, reqs []release.Request) ([]*release.Result, error)
}

// ledgerShareOf is the releaser's per-analyst share of the ledger's pool
// (release.Releaser.LedgerShare), or a share of the proxy's own for a
// releaser without one (tests' fakes).
func ledgerShareOf(r Releaser) *share.PerOwner {
	if s, ok := r.(interface{ LedgerShare() *share.PerOwner }); ok && s.LedgerShare() != nil {
		return s.LedgerShare()
	}
	return share.New(1)
}

// Config configures a Server.
type Config struct {
	Datasets   map[string]*Dataset // by dataset (database) name
	Analysts   map[string]config.Analyst
	Releaser   Releaser
	Ledger     accountant.Store // for SHOW dp.budget
	TLS        *tls.Config      // nil: answer SSLRequest with N
	RequireTLS bool
	// AllowCleartextOverTLS lets sessions that use TLS authenticate with a
	// cleartext password message (for clients without SCRAM), checked
	// against the same SCRAM credentials. Plaintext sessions always use
	// SCRAM-SHA-256.
	AllowCleartextOverTLS bool
	MaxConnections        int // 0: 200
	// MaxConnectionsPerAnalyst bounds one analyst's sessions (53300
	// beyond it, after authentication; 0: a quarter of MaxConnections, at
	// least 2): one analyst's sessions cannot take every connection.
	MaxConnectionsPerAnalyst int
	// MaxMemoryPerAnalyst bounds what one analyst's sessions together keep
	// in the proxy's memory between statements (memory.go; 54000 beyond
	// it; 0: 256 MiB).
	MaxMemoryPerAnalyst int64
	IdleTimeout         time.Duration // 0: none; idle sessions are closed after it
	Logger              *zap.Logger
	// DefaultRateLimit bounds the DP queries of analysts without a
	// RateLimit of their own (nil: none).
	DefaultRateLimit *config.RateLimit

	// ServerVersion is reported as server_version (default
	// DefaultServerVersion). Clients parse its leading "NN.N".
	ServerVersion string
	// MaxStartupMessage bounds every message before authentication ends
	// (default 10,000 bytes, PostgreSQL's MAX_STARTUP_PACKET_LENGTH).
	MaxStartupMessage int
	// MaxMessage bounds every message after authentication (default 1 MiB).
	MaxMessage int
	// AuthTimeout bounds the whole start-up and authentication exchange
	// (default 30s, PostgreSQL's authentication_timeout is 60s).
	AuthTimeout time.Duration
	// DrainTimeout is how long Serve waits for running statements after
	// its context is cancelled before cancelling them (default 10s).
	DrainTimeout time.Duration
	// MaxBufferedResult bounds the bytes of one shadow result the proxy
	// holds for a portal of the extended protocol (default 64 MiB).
	MaxBufferedResult int
	// ShadowMaxConns bounds the shadow connections of each dataset,
	// shared by all sessions (default shadow.DefaultMaxConns).
	// ShadowAcquireTimeout is how long a catalog statement waits for one
	// when all are busy before failing with 53300 (default
	// shadow.DefaultAcquireTimeout).
	ShadowMaxConns       int
	ShadowAcquireTimeout time.Duration
	// ShadowMaxConnsPerAnalyst bounds the shadow connections one
	// analyst's sessions hold at once (default: a quarter of
	// ShadowMaxConns, at least 1); over it a catalog statement waits up to
	// ShadowAcquireTimeout, then fails with 53300.
	ShadowMaxConnsPerAnalyst int
	// CatalogStatementTimeout is the statement_timeout of every shadow
	// connection, and (with catalogDeadlineGrace) the proxy's own bound on
	// a catalog statement (default shadow.DefaultStatementTimeout).
	CatalogStatementTimeout time.Duration
	// Observer, when set, is told of every statement (observer.go).
	Observer Observer
	// DPConcurrency bounds the DP statements that read data at once on
	// each dataset (default 10: dpproxy.yaml's upstream_max_connections
	// default), DPConcurrencyPerAnalyst those of one analyst (default 2),
	// and DPQueueTimeout how long a statement waits for its turn before
	// 53000, uncharged (default 30s); admission.go.
	DPConcurrency           int
	DPConcurrencyPerAnalyst int
	DPQueueTimeout          time.Duration
	// StatementTimeout is the upstream time limit of DP queries
	// (dpproxy.yaml's statement_timeout): a plan whose time slot exceeds
	// it is refused before the charge (timeSlot; 0: no such check).
	StatementTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultServerVersion     = "15.0 (dpproxy)"
	defaultMaxConnections    = 200
	defaultMaxStartupMessage = 10_000 // PostgreSQL's MAX_STARTUP_PACKET_LENGTH
	defaultMaxMessage        = 1 << 20
	defaultAuthTimeout       = 30 * time.Second
	defaultDrainTimeout      = 10 * time.Second
	// drainGrace is how long Serve still waits, after the drain deadline
	// has cancelled every statement, before it returns without them.
	drainGrace               = 2 * time.Second
	defaultMaxBufferedResult = 64 << 20
	defaultDPConcurrency     = 10
	// An analyst's sessions write at most sessionLinesBurst Info and Warn
	// lines at once, then sessionLinesPerSecond a second (about 36 MB a
	// day per analyst at most); those left out are counted on the next
	// line written (lines_not_logged). Debug lines, which a steward turns
	// on, and errors are not limited.
	sessionLinesBurst     = 60
	sessionLinesPerSecond = 2
	// An analyst's session lines (started, ended, terminated) have a
	// bucket of their own, so that neither kind of flood hides the other
	// kind's lines (review round 87): twice max_connections_per_analyst
	// lines at once (each of their sessions opened and closed), then
	// sessionStartLinesPerSecond a second (one session a second, opened
	// and closed).
	sessionStartLinesPerSecond = 2
	// Before authentication a client network's connections write at most
	// startLinesBurst Info and Warn lines at once (a refused start-up, a
	// failed TLS handshake, a cancel request with an unknown key, a
	// start-up ended to make room), then startLinesPerSecond a second, for
	// at most maxStartNetworks networks at a time (their limiter forgets
	// them all past it). One client had written 0.97 MB/s of "cancel
	// request with an unknown key" lines and 1.15 MB/s of "connection
	// refused" lines with connections that needed no password.
	// All networks together write at most startLinesTotalBurst lines at
	// once, then startLinesTotalPerSecond a second (at about 300 bytes a
	// line, 6 KB/s): whoever holds many networks (an IPv6 /48 is 65,536
	// /64s, each a network here) had a fresh bucket in each, and all of
	// them fresh again past maxStartNetworks.
	startLinesBurst          = 20
	startLinesPerSecond      = 2
	maxStartNetworks         = 4096
	startLinesTotalBurst     = 200
	startLinesTotalPerSecond = 20
)

// newStartLines is a limiter of lines before authentication: a bucket per
// client network and one for all of them together.
func newStartLines() *linerate.Limiter {
	return linerate.NewBounded(startLinesPerSecond, startLinesBurst, maxStartNetworks).WithTotal(startLinesTotalPerSecond, startLinesTotalBurst)
}

// Server is the PostgreSQL wire-protocol server. Safe for concurrent use.
type Server struct {
	cfg   Config
	log   *zap.Logger
	creds map[string]scramCredentials // by analyst
	// mockKey derives stable fake SCRAM salts for unknown users, so that a
	// probe cannot tell an unknown user from a wrong password.
	mockKey []byte
	rt      router
	plans   *planCache // nil: no plan cache
	shadows map[*Dataset]*shadow.Pool
	// admissions holds each dataset's DP slots (admission.go).
	admissions map[*Dataset]*admission
	// derivations bounds the key derivations of cleartext passwords
	// (auth.go; attack round 53).
	derivations *kdflimit.Limiter
	// tlsRate bounds each client network's TLS handshakes (tlsrate.go).
	tlsRate rateLimiters

	limits rateLimiters
	// churn holds each analyst's bucket of shadow connections closed by
	// their statements (shadow.go, shadowChurn).
	churn rateLimiters

	nextConnID atomic.Uint32
	active     atomic.Int64

	mu       sync.Mutex
	sessions map[uint32]*conn // by BackendKeyData process id
	// perAnalyst counts each analyst's registered sessions (register);
	// planning holds each analyst's planning slot (dp.go prepare).
	perAnalyst map[string]int
	planning   map[string]chan struct{}
	// memory is what each analyst's sessions keep (memory.go).
	memory map[string]*memAccount
	// ledgerShare bounds each analyst's budget reads (SHOW dp.budget, the
	// granted limit of SET dp.epsilon) to one at a time: the ledger's pool
	// is every analyst's (internal/share; attack round 66).
	ledgerShare *share.PerOwner
	// logLines bounds the Info and Warn lines of each analyst's sessions
	// (internal/linerate; attack round 86: a refused statement wrote a
	// line each, 16–18 MB/s of log from one session).
	logLines *linerate.Limiter
	// sessionLines bounds each analyst's session lines, apart from
	// logLines (conn.sessLog; a connect loop of one analyst had written
	// 0.49 MB/s of "session started" and "session ended" lines).
	sessionLines *linerate.Limiter
	// startLines bounds the Info and Warn lines of each client network's
	// connections before authentication (conn.free until then), and
	// authLines their failed authentications (conn.authLog), apart, so
	// that a flood of the first kind does not hide the second.
	startLines *linerate.Limiter
	authLines  *linerate.Limiter
	conns      map[*conn]struct{}
	// starting holds the connections still in start-up (TLS, the
	// start-up packet, authentication), at most MaxConnections; a new
	// one past that ends the oldest (handle). Sessions are counted apart
	// (register): connections that never authenticate cannot take an
	// analyst's place (attack round 35: four silent sockets shut every
	// analyst out for the whole AuthTimeout).
	starting map[*conn]struct{}
	startSeq uint64
	// startingFrom counts the start-ups in progress by remote address
	// (host without port).
	startingFrom map[string]int
}

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if len(cfg.Datasets) == 0 {
		return nil, errors.New("proxy: no datasets configured")
	}
	for name, ds := range cfg.Datasets {
		if ds == nil || ds.Policy == nil {
			return nil, fmt.Errorf("proxy: dataset %q has no policy", name)
		}
	}
	if cfg.Releaser == nil {
		return nil, errors.New("proxy: Config.Releaser is required")
	}
	if cfg.Ledger == nil {
		return nil, errors.New("proxy: Config.Ledger is required")
	}
	if cfg.AllowCleartextOverTLS && cfg.TLS == nil {
		return nil, errors.New("proxy: AllowCleartextOverTLS needs a TLS config")
	}
	if cfg.RequireTLS && cfg.TLS == nil {
		return nil, errors.New("proxy: RequireTLS needs a TLS config")
	}
	if cfg.MaxConnections < 0 || cfg.MaxStartupMessage < 0 || cfg.MaxMessage < 0 {
		return nil, errors.New("proxy: limits must not be negative")
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = defaultMaxConnections
	}
	if cfg.MaxMemoryPerAnalyst <= 0 {
		cfg.MaxMemoryPerAnalyst = defaultMaxMemoryPerAnalyst
	}
	if cfg.MaxConnectionsPerAnalyst <= 0 {
		cfg.MaxConnectionsPerAnalyst = config.DefaultMaxConnectionsPerAnalyst(cfg.MaxConnections)
	}
	if cfg.MaxStartupMessage == 0 {
		cfg.MaxStartupMessage = defaultMaxStartupMessage
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = defaultMaxMessage
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = defaultAuthTimeout
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = defaultDrainTimeout
	}
	if cfg.MaxBufferedResult <= 0 {
		cfg.MaxBufferedResult = defaultMaxBufferedResult
	}
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = DefaultServerVersion
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Server{
		cfg:          cfg,
		log:          cfg.Logger.Named("proxy"),
		creds:        make(map[string]scramCredentials, len(cfg.Analysts)),
		mockKey:      make([]byte, 32),
		rt:           defaultRouter(),
		plans:        newPlanCache(),
		sessions:     map[uint32]*conn{},
		perAnalyst:   map[string]int{},
		memory:       map[string]*memAccount{},
		ledgerShare:  ledgerShareOf(cfg.Releaser),
		logLines:     linerate.New(sessionLinesPerSecond, sessionLinesBurst),
		sessionLines: linerate.New(sessionStartLinesPerSecond, 2*cfg.MaxConnectionsPerAnalyst),
		startLines:   newStartLines(),
		authLines:    newStartLines(),
		tlsRate:      rateLimiters{max: maxTLSNetworks},
		planning:     map[string]chan struct{}{},
		conns:        map[*conn]struct{}{},
		starting:     map[*conn]struct{}{},
		startingFrom: map[string]int{},
	}
	if _, err := rand.Read(s.mockKey); err != nil {
		return nil, fmt.Errorf("proxy: random key: %w", err)
	}
	s.admissions = map[*Dataset]*admission{}
	s.derivations = kdflimit.New()
	act := newActivity() // one for all datasets: they share data servers
	for _, ds := range cfg.Datasets {
		limit := cfg.DPConcurrency
		if limit <= 0 {
			limit = defaultDPConcurrency
		}
		adm := newAdmission(limit, cfg.DPConcurrencyPerAnalyst, cfg.DPQueueTimeout)
		adm.act = act
		s.admissions[ds] = adm
	}
	var err error
	if s.shadows, err = newShadowPools(cfg); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cfg.Analysts))
	for n := range cfg.Analysts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c, err := credentialsFor(cfg.Analysts[n].Password)
		if err != nil {
			return nil, fmt.Errorf("proxy: analyst %q: %w", n, err)
		}
		s.creds[n] = c
	}
	return s, nil
}

// Serve accepts connections on ln until ctx is cancelled, then closes ln and
// waits for sessions to finish (up to a drain deadline).
//
// Idle sessions are closed at once with 57P01; a statement that is running
// finishes and sends its answer, unless the drain deadline passes first, in
// which case it is cancelled. Serve returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Sessions run under baseCtx, which outlives ctx by the drain deadline.
	baseCtx, cancelAll := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelAll(errShutdown)

	var wg sync.WaitGroup
	defer s.closeShadowPools()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	s.log.Info("serving", zap.String(logKeyAddr, ln.Addr().String()))
	var acceptErr error
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if transientAcceptError(err) {
				// Out of descriptors or buffers (another listener of the
				// process, e.g. the admin endpoint, holding them): back
				// off like net/http does and serve again once some are
				// free (attack round 106: EMFILE had ended Serve, and the
				// whole proxy stopped).
				if tempDelay == 0 {
					s.log.Warn("accept failed; retrying", zap.Error(err))
					tempDelay = 5 * time.Millisecond
				} else if tempDelay *= 2; tempDelay > time.Second {
					tempDelay = time.Second
				}
				select {
				case <-time.After(tempDelay):
				case <-ctx.Done():
				}
				continue
			}
			acceptErr = fmt.Errorf("accept: %w", err)
			break
		}
		tempDelay = 0
		id := s.nextConnID.Add(1)
		if n := s.active.Add(1); n > 3*int64(s.cfg.MaxConnections)+1 && (n > 4*int64(s.cfg.MaxConnections)+1 || !s.fromMinority(nc.RemoteAddr())) {
			// At most MaxConnections sessions and as many start-ups, and
			// as many again of evicted start-ups whose goroutines have
			// not ended yet (addStarting): beyond, do not even spend a
			// goroutine on it, unless it comes from an address with fewer
			// start-ups than another (a flood from one address then fills
			// this with its own evicted sockets, not an analyst's; its
			// start-up evicts one of the flood's).
			s.active.Add(-1)
			nc.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.active.Add(-1)
			s.handle(baseCtx, nc, id)
		}()
	}

	// Drain: close idle sessions now, let running statements finish.
	s.log.Info("draining", zap.Int64(logKeyActive, s.active.Load()))
	s.mu.Lock()
	for c := range s.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.DrainTimeout):
		s.log.Warn("drain deadline passed; cancelling running statements")
		cancelAll(errShutdown)
		s.mu.Lock()
		for c := range s.conns {
			c.cancelRunning(errShutdown) // shadow queries pgconn does not watch
			c.raw.Close()
		}
		s.mu.Unlock()
		// Whatever still runs (a statement that ignores cancellation)
		// gets a short grace, then Serve returns anyway: SIGTERM always
		// ends the proxy (issue 14). Its charge, if any, stays reserved.
		select {
		case <-done:
		case <-time.After(drainGrace):
			s.log.Error("sessions still running after the drain deadline and its grace; stopping without them",
				zap.Int64(logKeyActive, s.active.Load()), zap.Duration("grace", drainGrace))
		}
	}
	return acceptErr
}

// transientAcceptError reports whether an Accept error passes with time:
// a timeout, or the process or system out of descriptors or memory
// (EMFILE is not a net.Error timeout: it had ended Serve).
func transientAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EINTR)
}

// handle runs one client connection. A panic is contained here: the client
// gets a FATAL XX000 written directly to the socket (never the partially
// built reply), the panic is logged, and the process goes on.
func (s *Server) handle(ctx context.Context, nc net.Conn, id uint32) {
	log := s.log.With(zap.Uint32(logKeyConnID, id), zap.String(logKeyRemote, nc.RemoteAddr().String()))
	from := remoteHost(nc.RemoteAddr())
	start := log.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return s.startLines.Core(core, from) }))
	auth := log.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return s.authLines.Core(core, from) }))
	c := &conn{srv: s, id: id, raw: nc, netConn: nc, log: log, free: start, startLog: start, authLog: auth, from: from}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.addStarting(c)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.endStarting(c)
		s.mu.Unlock()
	}()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic in session; connection closed", zap.Any(logKeyPanic, r), zap.ByteString(logKeyStack, debug.Stack()))
			writeRawFatal(nc, internalErrorMessage)
		}
		c.close()
	}()
	c.run(ctx)
}

// addStarting counts c among the start-ups in progress. When they are
// MaxConnections already, one is ended (its socket closed) to make room:
// the oldest of those from the remote address that has the most in
// progress, preferring one that has not sent its start-up packet yet. So
// a flood from one address ends only its own start-ups (attack round 36:
// ending the oldest of all ended every analyst's handshake under a flood
// of connections that sent nothing), and a real client's start-up, which
// takes milliseconds, is ended only by floods from more addresses than it
// shares with others. Called with s.mu held.
func (s *Server) addStarting(c *conn) {
	s.startSeq++
	c.startSeq = s.startSeq
	s.starting[c] = struct{}{}
	s.startingFrom[c.from]++
	if len(s.starting) <= s.cfg.MaxConnections {
		return
	}
	top := ""
	for from, n := range s.startingFrom {
		if n > s.startingFrom[top] {
			top = from
		}
	}
	var victim *conn
	for o := range s.starting {
		if o.from != top {
			continue
		}
		better := victim == nil ||
			(!o.begun.Load() && victim.begun.Load()) ||
			(o.begun.Load() == victim.begun.Load() && o.startSeq < victim.startSeq)
		if better {
			victim = o
		}
	}
	s.endStarting(victim)
	victim.evicted = true
	victim.startLog.Info("start-up ended to make room for a newer one", zap.Int("max_connections", s.cfg.MaxConnections))
	_ = victim.raw.Close()
}

// fromMinority reports whether a has fewer start-ups in progress than
// some other address.
func (s *Server) fromMinority(a net.Addr) bool {
	from := remoteHost(a)
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.startingFrom[from]
	for _, n := range s.startingFrom {
		if n > mine {
			return true
		}
	}
	return false
}

// endStarting stops counting c among the start-ups in progress (it is a
// session now, or gone). Called with s.mu held.
func (s *Server) endStarting(c *conn) {
	if _, ok := s.starting[c]; !ok {
		return
	}
	delete(s.starting, c)
	if s.startingFrom[c.from]--; s.startingFrom[c.from] <= 0 {
		delete(s.startingFrom, c.from)
	}
}

// remoteHost is where a client comes from, for counting start-ups: its
// IPv4 address, or the /64 of its IPv6 address (a host usually holds a
// whole /64 and could give each connection its own address; attack round
// 37); an IPv4-mapped address counts as IPv4.
func remoteHost(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		host = a.String()
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// register makes the session reachable by CancelRequest and by Serve's
// drain. It picks a process id that no other session uses. A session
// counts against MaxConnections from here (start-ups apart: addStarting).
func (s *Server) register(c *conn) error {
	var b [8]byte
	for tries := 0; tries < 16; tries++ {
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		pid := binary.BigEndian.Uint32(b[:4]) & 0x7fffffff // positive, like a real pid
		if pid == 0 {
			continue
		}
		s.mu.Lock()
		if c.evicted {
			s.mu.Unlock()
			return errors.New("start-up ended to make room for a newer one")
		}
		if len(s.sessions) >= s.cfg.MaxConnections {
			s.mu.Unlock()
			return pgerr.New(pgerr.TooManyConnections, "sorry, too many clients already").
				WithHint("the proxy serves at most %d sessions (max_connections in dpproxy.yaml); close idle sessions", s.cfg.MaxConnections)
		}
		if s.perAnalyst[c.sess.analyst] >= s.cfg.MaxConnectionsPerAnalyst {
			s.mu.Unlock()
			return pgerr.New(pgerr.TooManyConnections, "too many connections for role %q", c.sess.analyst).
				WithDetail("Each analyst may hold at most %d sessions of this proxy at once.", s.cfg.MaxConnectionsPerAnalyst).
				WithHint("close idle sessions, or lower the connection pool size of your client")
		}
		if _, taken := s.sessions[pid]; !taken {
			c.pid = pid
			c.secret = append([]byte(nil), b[4:8]...)
			s.sessions[pid] = c
			s.perAnalyst[c.sess.analyst]++
			s.endStarting(c)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
	}
	return errors.New("no free process id")
}

// planSlot is analyst's planning slot: a channel of capacity one.
func (s *Server) planSlot(analyst string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.planning[analyst]
	if !ok {
		ch = make(chan struct{}, 1)
		s.planning[analyst] = ch
	}
	return ch
}

func (s *Server) unregister(c *conn) {
	if c.pid == 0 {
		return
	}
	s.mu.Lock()
	if s.sessions[c.pid] == c {
		delete(s.sessions, c.pid)
		if s.perAnalyst[c.sess.analyst]--; s.perAnalyst[c.sess.analyst] <= 0 {
			delete(s.perAnalyst, c.sess.analyst)
		}
	}
	s.mu.Unlock()
}

// cancel handles a CancelRequest: if the key matches a session, its running
// statement (if any) is cancelled. Nothing is ever replied, whether or not
// the key matched (PostgreSQL's behaviour).
func (s *Server) cancel(pid uint32, secret []byte) bool {
	s.mu.Lock()
	c := s.sessions[pid]
	s.mu.Unlock()
	if c == nil || !constantTimeEqual(c.secret, secret) {
		return false
	}
	c.cancelStatement()
	return true
}
