package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/pipeline"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Startup packet codes (PostgreSQL's pqcomm.h).
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
	cancelRequestCode = 80877102
)

// conn is one client connection: the socket and TLS, the framer and the
// Backend, authentication, the shadow connections and the relay,
// cancellation and shutdown. It holds the session's state in sess, which
// changes it without I/O (session.go); conn runs the statements and
// sends what sess decides. Not safe for concurrent use, except for
// cancelStatement and shutdown, which other goroutines call.
type conn struct {
	srv     *Server
	id      uint32
	raw     net.Conn // the socket (for shutdown from other goroutines)
	netConn net.Conn // the socket, or the TLS connection over it
	tls     bool
	be      *clientOut // messages to the client (out.go)
	fr      *framer    // the client's messages after start-up
	msgs    frontendMessages
	log     *zap.Logger
	// free logs what the client does for free (refused start-ups and
	// statements, catalog warnings, cancels) at a bounded rate: its
	// network's before authentication (Server.startLines), the analyst's
	// once authenticated (Server.logLines); startLog is free as created,
	// for other goroutines (Server.addStarting ends a start-up while free
	// changes).
	free, startLog *zap.Logger
	// authLog logs a failed authentication before the session is
	// authenticated: its network's bucket in Server.authLines, which the
	// lines that need no password (unknown
	// cancel keys, refused TLS handshakes) cannot empty (review round
	// 112: a cancel flood had hidden the password guesses after it).
	authLog *zap.Logger
	// sessLog logs the session's start and end at a bounded rate per
	// analyst (Server.sessionLines), set once authenticated.
	sessLog *zap.Logger
	// startSeq orders start-ups in progress; evicted: the session's
	// start-up was ended to make room for a newer one (Server.starting).
	startSeq uint64
	evicted  bool
	// from is the client's address without its port; begun is set when
	// its start-up packet has been read.
	from  string
	begun atomic.Bool

	pid    uint32
	secret []byte

	// sess is the session's state, apart from the socket (session.go).
	sess session

	// shadow is a pooled shadow connection pinned to the session while it
	// holds state (shadow.Conn.HasState), else nil (shadow.go).
	shadow *shadow.Conn
	// Reused by forwarded statements (relay.go, shadow.go): the request
	// sent to the shadow, the wrapper that copies the shadow's messages
	// to the client, the notice callback, and the shadow settings of the
	// session as last computed.
	relayOut      []byte
	onNotice      func(*pgconn.Notice)
	shadowWant    []shadow.Setting
	classifyCache *classifyCache
	dpTexts       pipeline.Texts

	cancelMu   sync.Mutex
	cancelFunc context.CancelCauseFunc // of the running statement, or nil
	// shadowPG is the shadow connection the running statement waits on
	// when it was started without pgconn watching the context (watchShadow):
	// cancelling the statement then sends PostgreSQL's CancelRequest.
	shadowPG *pgconn.PgConn

	shuttingDown atomic.Bool

	// sessCtx is the session's context: cancelled only when the proxy's
	// drain deadline passes, never by the client. DP releases run under it
	// (dp.go).
	sessCtx context.Context
	// planHeld: this session holds its analyst's planning slot
	// (takePlanSlot), so a nested check of a big text does not wait for
	// the slot it holds. Read and written by the session's goroutine only.
	planHeld bool
	// pendingDP, when not nil, is closed when the DP release that the
	// client cancelled (or timed out) has finished in the background; the
	// session's next DP statement and its end wait for it (dp.go).
	pendingDP chan struct{}
	// ticket is the DP admission slot the running statement holds when it
	// took one for all its releases (a post-processing statement's
	// leaves: post.go); nil otherwise, and release takes its own.
	ticket *ticket
	// memCharged is what the session has charged to its analyst's
	// memory account (memory.go).
	memCharged int64
	memAcct    *memAccount
	// keepAnswer: how many copies of a DP answer the running statement
	// keeps (a portal, a cursor, COPY: 1; 0 when it is sent at once),
	// whose room execDP checks before the charge.
	keepAnswer int
	// malformedSeen counts the session's malformed messages (frame.go:
	// the first is logged, the count at the session's end).
	malformedSeen int
	// sendingRoom: the room of a DP answer, charged by execDP before the
	// charge; one sent at once (the simple protocol) keeps it until the
	// statement's reply is written (query.go): a client that stops
	// reading holds the answer that long (attack round 66); one kept (a
	// portal, a cursor, COPY) until execDP returns, its keeper charging
	// what it keeps.
	sendingRoom int
	// postRoom: the room a post-processing statement holds for its DP
	// answers while it runs (post.go), given back when it returns.
	// Counted by syncMemory as the others here: kept in a local
	// variable, a sync mid-statement dropped it from the session's
	// charge and its return gave it back a second time (review 100).
	postRoom int
	// resultReserved: what the result being kept has reserved so far
	// (reserveResult, growResult); 0 outside one.
	resultReserved int
	// relayCharged: what the relay of a catalog statement holds of the
	// shadow's large messages (admitRelayed).
	relayCharged int
	admitFn      func(int) error // admitRelayed, as the relay's framer calls it
	// ticketKept: paced handed ticket to a release it left running (a
	// cancelled statement), which frees it when it ends.
	ticketKept bool
}

// shutdown asks the session to end at its next read: it then sends 57P01
// and closes. A statement that is running finishes first. Safe for
// concurrent use.
func (c *conn) shutdown() {
	c.shuttingDown.Store(true)
	_ = c.raw.SetReadDeadline(time.Now())
}

// cancelStatement cancels the running statement, if any. Safe for
// concurrent use.
func (c *conn) cancelStatement() {
	if c.cancelRunning(errCancelRequest) {
		c.freeLog().Info("statement cancelled by cancel request")
	}
}

// cancelRunning cancels the running statement's context with cause and,
// when it waits on a shadow query that pgconn does not watch (watchShadow),
// sends that query a CancelRequest. The context is cancelled under
// cancelMu, so once shadowDone has returned either the statement's context
// is cancelled (and releaseShadow closes the connection instead of pooling
// it) or no CancelRequest will be sent to it: a late CancelRequest never
// reaches another session's query on a pooled connection.
func (c *conn) cancelRunning(cause error) bool {
	c.cancelMu.Lock()
	f, pg := c.cancelFunc, c.shadowPG
	if f != nil {
		f(cause)
	}
	// One CancelRequest to the shadow per statement: each is a connection
	// and a fork on the shadow server, and a client may repeat its own
	// cancel thousands of times a second (attack round 83: 2,400 shadow
	// connections for one statement in 3 s, another analyst's catalog
	// statements 10 times slower); watchShadow sets shadowPG per statement.
	c.shadowPG = nil
	c.cancelMu.Unlock()
	if pg != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = pg.CancelRequest(ctx)
		}()
	}
	return f != nil
}

// statementContext returns the context of one statement: cancellable by a
// CancelRequest and bounded by statement_timeout. done must be called when
// the statement ends. It reads the statement's start, the one clock read
// its relative dates are folded at.
func (c *conn) statementContext(ctx context.Context) (context.Context, func()) {
	c.cancelMu.Lock()
	running := c.cancelFunc != nil
	c.cancelMu.Unlock()
	if running {
		// Within a running statement (an Execute that describes its
		// statement first): its context, start and cancel stay (attack
		// round 75: the nested one's end had dropped the Execute's cancel).
		return ctx, func() {}
	}
	c.sess.stmtStart = time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	var stopTimer context.CancelFunc = func() {}
	if ms := c.sess.statementTimeout(); ms > 0 {
		ctx, stopTimer = context.WithTimeoutCause(ctx, time.Duration(ms)*time.Millisecond, errStatementTimeout)
	}
	c.cancelMu.Lock()
	c.cancelFunc = cancel
	c.cancelMu.Unlock()
	return ctx, func() {
		c.sess.stmtStart = time.Time{}
		c.cancelMu.Lock()
		c.cancelFunc = nil
		c.cancelMu.Unlock()
		stopTimer()
		cancel(nil)
	}
}

func (c *conn) close() {
	c.releaseMemory()
	c.srv.unregister(c)
	c.closeShadow()
	c.netConn.Close()
}

// run drives the connection from the first byte to the end.
func (c *conn) run(ctx context.Context) {
	_ = c.netConn.SetDeadline(time.Now().Add(c.srv.cfg.AuthTimeout))
	if c.shuttingDown.Load() {
		return
	}
	startup, err := c.negotiate()
	if err != nil {
		c.startupFailed(err)
		return
	}
	if startup == nil {
		return // cancel request, or the client went away
	}
	if err := c.startup(ctx, startup); err != nil {
		c.startupFailed(err)
		return
	}
	_ = c.netConn.SetDeadline(time.Time{})
	c.fr.max = c.srv.cfg.MaxMessage
	c.sessLog.Info("session started", zap.Bool(logKeyTLS, c.tls), zap.String(logKeyApplication, c.sess.settings["application_name"]))
	c.sessCtx = ctx
	c.loop(ctx)
	c.waitPendingDP(ctx)
	if c.malformedSeen > 1 {
		c.sessLog.Info("session ended", zap.Int("malformed_messages", c.malformedSeen))
	} else {
		c.sessLog.Info("session ended")
	}
}

// startupFailed reports a start-up error to the client as FATAL (when it is
// one the client should see) and logs it.
func (c *conn) startupFailed(err error) {
	if isDisconnect(err) {
		c.log.Debug("client went away during start-up", zap.Error(err))
		return
	}
	// A start-up refused after authentication (a start-up parameter's
	// value, a database the analyst may not use, their share of the
	// connections) is the analyst's free doing: logged at their rate of
	// free lines (freeLog), and its text, which quotes their values (up
	// to MaxStartupMessage bytes), clipped (attack round 99: 18 KB lines,
	// 20 MB/s of log from one analyst's refused start-ups).
	lg := c.freeLog()
	var pe *pgerr.Error
	if c.sessLog == nil && c.authLog != nil && errors.As(err, &pe) && pe.Code == pgerr.InvalidPassword {
		lg = c.authLog // a failed authentication: the network's own bucket
	}
	lg.Info("connection refused", zap.String(logKeyError, pgerr.Truncate(err.Error(), maxLogText)))
	if c.be == nil {
		c.be = newClientOut(c.netConn)
	}
	c.be.Send(errorResponse(err, severityFatal, c.log))
	_ = c.be.Flush()
}

// maxLogText is how much of an error's text a log line of a start-up
// carries.
const maxLogText = 256

func isDisconnect(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// negotiate reads start-up packets until a StartupMessage arrives, handling
// SSLRequest, GSSENCRequest and CancelRequest. It returns nil, nil when the
// connection ends without a session (a cancel request).
//
// Start-up packets are read with exact-length reads from the socket, with no
// buffering: after an SSLRequest nothing but the TLS handshake can follow,
// so plaintext bytes a client (or a man in the middle) pipelined after the
// SSLRequest are read by the TLS layer as a broken handshake and refused,
// never taken as part of the encrypted session (CVE-2021-23214's class).
//
// As PostgreSQL, each of SSLRequest and GSSENCRequest is answered once per
// connection: another ends the start-up (attack round 46: a socket sent
// them back to back, each answered, for the whole auth_timeout).
func (c *conn) negotiate() (*startupPacket, error) {
	sslDone, gssDone := false, false
	for {
		code, body, err := readStartupPacket(c.netConn, c.srv.cfg.MaxStartupMessage)
		if err != nil {
			return nil, err
		}
		c.begun.Store(true)
		switch code {
		case sslRequestCode:
			if c.tls {
				return nil, pgerr.New(pgerr.ProtocolViolation, "SSLRequest received on an encrypted connection")
			}
			if sslDone {
				return nil, pgerr.New(pgerr.ProtocolViolation, "a second SSLRequest on one connection")
			}
			sslDone = true
			if c.srv.cfg.TLS == nil {
				if _, err := c.netConn.Write([]byte{'N'}); err != nil {
					return nil, err
				}
				continue
			}
			// Before the 'S': a refusal is still plaintext, which libpq
			// reads as the server's error.
			if !waitHandshake(&c.srv.tlsRate, c.from) {
				return nil, errTLSRate()
			}
			if _, err := c.netConn.Write([]byte{'S'}); err != nil {
				return nil, err
			}
			tc := tls.Server(c.netConn, c.srv.cfg.TLS)
			if err := tc.Handshake(); err != nil {
				c.freeLog().Info("TLS handshake failed", zap.Error(err))
				return nil, nil
			}
			c.netConn, c.tls = tc, true
		case gssEncRequestCode:
			if gssDone {
				return nil, pgerr.New(pgerr.ProtocolViolation, "a second GSSENCRequest on one connection")
			}
			gssDone = true
			if _, err := c.netConn.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case cancelRequestCode:
			if len(body) < 8 {
				return nil, nil
			}
			pid := binary.BigEndian.Uint32(body[:4])
			if c.srv.cancel(pid, body[4:]) {
				c.log.Debug("cancel request matched a session")
			} else {
				c.freeLog().Warn("cancel request with an unknown key ignored")
			}
			return nil, nil
		default:
			major, minor := code>>16, code&0xffff
			if major != 3 {
				return nil, pgerr.New(pgerr.FeatureNotSupported,
					"unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", major, minor)
			}
			sp, err := parseStartupParams(body)
			if err != nil {
				return nil, err
			}
			sp.minor = minor
			return sp, nil
		}
	}
}

// startupPacket is a decoded StartupMessage.
type startupPacket struct {
	minor  uint32
	params map[string]string
	order  []string
}

// readStartupPacket reads one start-up packet of at most max bytes with
// exact reads (framer.exact) and returns its code and the bytes after it.
func readStartupPacket(r io.Reader, max int) (uint32, []byte, error) {
	f := framer{r: r, exact: true, min: 4, max: max - 4}
	_, m, err := f.next()
	var tooBig *frameTooLargeError
	if errors.Is(err, errFrameLength) || errors.As(err, &tooBig) {
		return 0, nil, pgerr.New(pgerr.ProtocolViolation, "invalid length of startup packet")
	}
	if err != nil {
		return 0, nil, err
	}
	return binary.BigEndian.Uint32(m[4:8]), m[8:], nil
}

func parseStartupParams(b []byte) (*startupPacket, error) {
	sp := &startupPacket{params: map[string]string{}}
	bad := pgerr.New(pgerr.ProtocolViolation, "invalid startup packet layout: expected terminator as last byte")
	for {
		if len(b) == 0 {
			return nil, bad
		}
		if b[0] == 0 {
			if len(b) != 1 {
				return nil, bad
			}
			return sp, nil
		}
		k, rest, ok := cutNul(b)
		if !ok {
			return nil, bad
		}
		v, rest, ok := cutNul(rest)
		if !ok {
			return nil, bad
		}
		if _, dup := sp.params[k]; !dup {
			sp.order = append(sp.order, k)
		}
		sp.params[k] = v
		b = rest
	}
}

func cutNul(b []byte) (string, []byte, bool) {
	for i, x := range b {
		if x == 0 {
			return string(b[:i]), b[i+1:], true
		}
	}
	return "", nil, false
}

// startup authenticates the client, checks the dataset, sets up the session
// and sends the ParameterStatus set, BackendKeyData and ReadyForQuery.
func (c *conn) startup(ctx context.Context, sp *startupPacket) error {
	c.fr = newFramer(c.netConn, c.srv.cfg.MaxStartupMessage)
	c.be = newClientOut(c.netConn)
	if c.srv.cfg.RequireTLS && !c.tls {
		return pgerr.New(pgerr.InvalidAuthorization, "connection requires TLS").
			WithHint("connect with sslmode=require (or verify-full)")
	}
	if sp.minor > 0 {
		// A newer 3.x client: offer 3.0 and the options we do not know.
		var unknown []string
		for _, k := range sp.order {
			if strings.HasPrefix(k, "_pq_.") {
				unknown = append(unknown, k)
			}
		}
		c.be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
	}
	user := sp.params["user"]
	if user == "" {
		return pgerr.New(pgerr.InvalidAuthorization, "no PostgreSQL user name specified in startup packet")
	}
	if v, ok := sp.params["replication"]; ok && v != "false" && v != "off" && v != "0" && v != "no" {
		return pgerr.New(pgerr.FeatureNotSupported, "replication connections are not supported")
	}
	database := sp.params["database"]
	if database == "" {
		database = user
	}
	// As PostgreSQL reads them: at most NAMEDATALEN−1 bytes, before they
	// reach the log (attack round 46: a failed login logged 9,000 bytes
	// of its chosen user name).
	user, database = pgsql.TruncateIdent(user), pgsql.TruncateIdent(database)
	c.log = c.log.With(zap.String(logKeyAnalyst, user), zap.String(logKeyDataset, database))
	if c.free != nil {
		c.free = c.free.With(zap.String(logKeyAnalyst, user), zap.String(logKeyDataset, database))
	}
	if c.authLog != nil {
		c.authLog = c.authLog.With(zap.String(logKeyAnalyst, user), zap.String(logKeyDataset, database))
	}

	creds, known := c.srv.creds[user]
	if err := c.authenticate(user, creds, known); err != nil {
		return err
	}
	// The lines of what an analyst does for free (a refused statement, a
	// catalog statement's warning, a cancel) are written at a bounded rate
	// per analyst (sessionLinesPerSecond), and the session's start and end
	// at another (sessionStartLinesPerSecond); a charged answer's are not
	// limited (the budget and rate_limit bound them).
	c.free = c.log.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return c.srv.logLines.Core(core, user) }))
	c.sessLog = c.log.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return c.srv.sessionLines.Core(core, user) }))
	ds, ok := c.srv.cfg.Datasets[database]
	if !ok {
		// The analyst is authenticated: name the datasets they may query
		// (a new user's misspelt database had been told to run SHOW
		// dp.budget, which needs a connection to one).
		var yours []string
		for name := range c.srv.cfg.Datasets {
			if c.srv.cfg.Analysts[user].MayQuery(name) {
				yours = append(yours, name)
			}
		}
		sort.Strings(yours)
		hint := "you may query no dataset of this proxy; ask the data steward to add you to one"
		if len(yours) > 0 {
			hint = "connect to a dataset you may query as the database: " + strings.Join(yours, ", ")
		}
		return pgerr.New(pgerr.InvalidCatalogName, "database %q does not exist", database).WithHint("%s", hint)
	}
	if !c.srv.cfg.Analysts[user].MayQuery(database) {
		return pgerr.New(pgerr.InvalidAuthorization, "permission denied for database %q", database).
			WithDetail("User does not have CONNECT privilege.").
			WithHint("ask the data steward to add %q to the analyst's datasets", database)
	}
	c.sess = newSession(user, ds, c.srv.cfg.ServerVersion)
	c.sess.grantedLimit = c.grantedLimit
	if err := c.sess.initSettings(sp); err != nil {
		return err
	}
	if err := c.srv.register(c); err != nil {
		if pe, ok := err.(*pgerr.Error); ok {
			return pe // the analyst's share of the connections (53300)
		}
		return fmt.Errorf("register session: %w", err)
	}
	c.sendParameterStatus()
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret})
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: c.sess.txStatus})
	return c.be.Flush()
}

// freeLog is the logger of what the client does for free (free): rate
// limited per client network until the session is authenticated, then
// per analyst.
func (c *conn) freeLog() *zap.Logger {
	if c.free != nil {
		return c.free
	}
	return c.log
}

// loop reads and answers messages until Terminate, a disconnect, shutdown
// or a fatal error.
func (c *conn) loop(ctx context.Context) {
	for {
		if t := c.srv.cfg.IdleTimeout; t > 0 && !c.fr.whole() {
			_ = c.netConn.SetReadDeadline(time.Now().Add(t))
		}
		// Without IdleTimeout the read deadline stays unset (run clears it
		// after start-up); only shutdown sets one, to end this read. A
		// message already buffered whole is read without the socket (the
		// rest of a pipelined batch: one deadline per read, not per message).
		if c.shuttingDown.Load() {
			c.fatal(pgerr.New(adminShutdown, "terminating connection due to administrator command"))
			return
		}
		// The last message's fields (a Query's text, a Bind's values) are
		// not kept while the session waits: they are up to MaxMessage
		// bytes (review 74: a session idle after a 1 MB Query held it).
		c.msgs = frontendMessages{}
		typ, m, err := c.fr.next()
		if err != nil {
			c.receiveFailed(err)
			return
		}
		msg, err := c.msgs.decode(m)
		if err != nil {
			// Read whole but malformed: the stream is still in step.
			if c.malformed(ctx, typ) {
				continue
			}
			return
		}
		if c.sess.extFailed {
			// After an error in an extended batch PostgreSQL ignores every
			// message until Sync, simple queries included.
			switch msg.(type) {
			case *pgproto3.Sync, *pgproto3.Terminate:
			case *pgproto3.Flush:
				// Still honoured: whatever is buffered goes out now.
				if err := c.be.Flush(); err != nil {
					return
				}
				continue
			default:
				continue
			}
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			c.simpleQuery(ctx, m.String)
		case *pgproto3.Parse, *pgproto3.Bind, *pgproto3.Describe, *pgproto3.Execute,
			*pgproto3.Close, *pgproto3.Sync, *pgproto3.Flush:
			c.extended(ctx, msg)
		case *pgproto3.Terminate:
			return
		case *pgproto3.FunctionCall:
			c.sendError(pgerr.New(pgerr.FeatureNotSupported, "the fast-path function call interface is not supported"))
			c.readyForQuery()
		case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
			// PostgreSQL ignores copy messages outside COPY.
		default:
			c.fatal(pgerr.New(pgerr.ProtocolViolation, "invalid frontend message type %T", msg))
			return
		}
		if err := c.be.failed(); err != nil {
			// A write to the client failed (gone, or past a deadline):
			// nothing more of this session reaches it, so nothing more
			// runs (the rest of a pipelined batch would be run, and
			// charged, for no one).
			c.log.Debug("write failed", zap.Error(err))
			return
		}
		if !needsFlush(msg) {
			continue
		}
		if err := c.be.Flush(); err != nil {
			c.log.Debug("write failed", zap.Error(err))
			return
		}
	}
}

func (c *conn) receiveFailed(err error) {
	var tooBig *frameTooLargeError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		c.fatal(pgerr.New(pgerr.ProtocolViolation, "message of %d bytes exceeds the limit of %d bytes", tooBig.size, tooBig.max))
	case errors.As(err, &ne) && ne.Timeout() && c.shuttingDown.Load():
		c.fatal(pgerr.New(adminShutdown, "terminating connection due to administrator command"))
	case errors.As(err, &ne) && ne.Timeout() && c.srv.cfg.IdleTimeout > 0:
		c.fatal(pgerr.New(idleSessionTimeout, "terminating connection due to idle-session timeout"))
	case isDisconnect(err):
		c.log.Debug("client went away", zap.Error(err))
	case errors.Is(err, errFrameLength):
		c.fatal(pgerr.New(pgerr.ProtocolViolation, "invalid message length"))
	default:
		c.fatal(pgerr.New(pgerr.ProtocolViolation, "invalid message from client").Wrap(err))
	}
}

// fatal sends a FATAL error; the caller then closes the connection.
func (c *conn) fatal(err error) {
	log := c.log
	if c.sessLog != nil {
		log = c.sessLog
	}
	log.Info("session terminated", zap.Error(err))
	c.be.Send(errorResponse(err, severityFatal, c.log))
	_ = c.netConn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = c.be.Flush()
}

// sendError sends an ERROR for a failed statement. Inside an explicit
// transaction block the transaction becomes failed ('E').
func (c *conn) sendError(err error) {
	resp := errorResponse(err, severityError, c.log)
	if resp.Code == pgerr.InternalError {
		c.log.Error("statement failed", zap.String(logKeySQLState, resp.Code))
	} else {
		c.log.Debug("statement failed", zap.String(logKeySQLState, resp.Code))
	}
	c.be.Send(resp)
	c.sess.fail()
}

// notice sends a NoticeResponse unless client_min_messages hides it.
func (c *conn) notice(severity, code, msg, hint string) {
	if !c.sess.wantsMessages(severity) {
		return
	}
	c.be.Send(&pgproto3.NoticeResponse{Severity: severity, SeverityUnlocalized: severity, Code: code, Message: msg, Hint: hint})
}

// warn sends a session transition's WARNING, if any.
func (c *conn) warn(w warning) {
	if w.msg != "" {
		c.notice(severityWarning, w.code, w.msg, "")
	}
}

// readyForQuery reports changed settings and sends ReadyForQuery.
func (c *conn) readyForQuery() {
	if c.memCharged > 0 {
		c.syncMemory() // what the statement let go is the analyst's again (memory.go)
	}
	c.sendParameterStatus()
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: c.sess.txStatus})
}
