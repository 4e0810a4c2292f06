package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/dpproxy/dpproxy/internal/shadow"
	"github.com/dpproxy/dpproxy/pgsql"
	"golang.org/x/sys/unix"
)

// The forwarding loop: PgBouncer's design for the statements the proxy
// only forwards.
//
// A session that is idle between statements (ReadyForQuery sent, nothing
// buffered, no transaction, cursor, portal or pinned shadow connection:
// conn.parkable) is parked: its goroutine hands the client socket to this
// loop and waits. The loop is one goroutine running epoll over the parked
// sessions' sockets with raw system calls, so a
// forwarded statement costs a read and a write on each side and a share of
// one epoll_wait, with no goroutine woken, no read that returns EAGAIN
// before each wait, and no runtime poller in between (BENCHMARKS.md,
// "forwarding loop").
//
// When a parked session's next statement is one the proxy only forwards
// (a cached catalog route: a simple Query, or Parse/Bind/Describe/Execute/
// Sync of the unnamed portal), the loop runs it on an idle pooled shadow
// connection whose settings are the session's, and writes to the client
// exactly the bytes the session's goroutine would have written. Anything
// else goes back to the goroutine untouched ("unpark"): a DP statement, a
// session statement, an incomplete or malformed message, no idle shadow
// connection, a setting to apply. A forwarded statement whose reply is not
// the plain success the loop knows (an error, a notice, a result over
// relayFlushBytes) is read to its end and discarded, and the goroutine runs
// the statement again itself, so errors, notices and large results keep
// exactly their one code path; catalog statements read only the shadow and
// have no effect to repeat. A client's CancelRequest reaches the running
// shadow query as on the goroutine's path, and the statement it cancelled
// is then answered with 57014 without running again.
//
// The loop's system calls do not enter the runtime's syscall path
// (syscall.RawSyscall): that path costs about 0.7 µs per statement
// (BENCHMARKS.md, fourth pass). So while sessions are parked the loop holds
// a P; its epoll_wait times out every millisecond and the loop then yields
// (runtime.Gosched), and a preemption signal (a GC stop-the-world, the
// scheduler's 10 ms slice) interrupts the wait, so neither waits on it.
// With no session parked it waits in the ordinary way and holds nothing.
// Starting the loop adds one P (GOMAXPROCS + 1) for it.
//
// TLS sessions are parked too: the loop reads their records with raw
// calls and lets the session's own tls.Conn decrypt and encrypt them on
// its thread, over a transport that holds the bytes instead of a socket
// (tlsTransport). Linux only (epoll).

const (
	// loopTick: how long a raw epoll_wait may block (ms).
	loopTick = 1
	// readChunk: the least room a read is given.
	readChunk = 4096
	// loopMaxIn: client bytes buffered while a statement runs before the
	// client socket is no longer watched until it ends.
	loopMaxIn = 256 << 10
)

// fwdLoop is the process's forwarding loop (theLoop), shared by every
// Server: one thread, started at the first park.
type fwdLoop struct {
	once    sync.Once
	initErr error
	epfd    int
	wakeFD  int // eventfd: commands are waiting

	mu   sync.Mutex
	cmds []loopCmd

	// Owned by the loop goroutine.
	owners   []*parkedSess // by descriptor: the session a socket belongs to
	nParked  int
	events   []unix.EpollEvent
	lastScan time.Time
	rounds   uint
	now      time.Time // read once per round of events

	// obs are the Observer events of the statements answered in this
	// round of events, by server; sent to observeLoop at its end.
	obs   map[*Server][]StatementEvent
	nObs  int
	obsCh chan obsBatch

	// ran counts the statements the loop answered, handedBack the
	// sessions it gave back (tests, and the bench's sanity check).
	ran, handedBack atomic.Int64
}

// loopCmd is a request to the loop from another goroutine.
type loopCmd struct {
	park   *parkedSess // take this session
	unpark *conn       // give this session back as soon as it is idle
	// abort: give it back now, ending a statement the loop runs for it
	// (its shadow connection is closed): the drain deadline.
	abort bool
}

var theLoop fwdLoop

// doneCtx is a context that is already done (begin's SyncConn).
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// start makes the epoll instance and starts the loop, once.
func (l *fwdLoop) start() error {
	l.once.Do(func() {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			l.initErr = err
			return
		}
		wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			unix.Close(epfd)
			l.initErr = err
			return
		}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}); err != nil {
			unix.Close(epfd)
			unix.Close(wfd)
			l.initErr = err
			return
		}
		l.epfd, l.wakeFD = epfd, wfd
		l.events = make([]unix.EpollEvent, 128)
		l.obs = map[*Server][]StatementEvent{}
		l.obsCh = make(chan obsBatch, 256)
		// The loop's thread holds a P while sessions are parked (it
		// sleeps in the kernel, not on a CPU): one more P keeps the
		// sessions' own work (DP statements) on as many as before.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
		go l.run()
		go observeLoop(l.obsCh)
	})
	return l.initErr
}

// ForwardLoopStats returns the forwarding loop's counters: statements it
// answered and sessions it handed back, since the process started.
func ForwardLoopStats() (answered, handedBack int64) {
	return theLoop.ran.Load(), theLoop.handedBack.Load()
}

// send queues a command and wakes the loop. Safe for concurrent use.
func (l *fwdLoop) send(cmd loopCmd) {
	l.mu.Lock()
	l.cmds = append(l.cmds, cmd)
	l.mu.Unlock()
	var one = [8]byte{1}
	_, _ = unix.Write(l.wakeFD, one[:])
}

// forget removes fd from the loop's epoll set (a shadow socket going back
// to the runtime's poller). Safe for concurrent use: epoll_ctl is.
func (l *fwdLoop) forget(fd int) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

func (l *fwdLoop) run() {
	// Not locked to its thread: a locked goroutine's Gosched hands its P
	// to another thread and back (two wake-ups), an unlocked one's costs
	// a run-queue round trip.
	for {
		var n int
		if l.nParked == 0 {
			l.flushObserved() // nothing wakes the loop before the next park
			var err error
			n, err = unix.EpollWait(l.epfd, l.events, -1)
			if err != nil {
				n = 0
			}
		} else {
			n = rawEpollWait(l.epfd, l.events, loopTick)
			if n <= 0 {
				l.flushObserved()
				runtime.Gosched()
				l.scanIdle()
				continue
			}
		}
		l.now = time.Now() // this round's clock (the pool, idle deadlines)
		handedBack := false
		for i := 0; i < n; i++ {
			fd := int(l.events[i].Fd)
			if fd == l.wakeFD {
				var b [8]byte
				_, _ = unix.Read(l.wakeFD, b[:])
				if l.commands() {
					handedBack = true
				}
				continue
			}
			p := l.owner(fd)
			if p == nil {
				continue
			}
			var back bool
			if fd == p.fd {
				back = l.clientReady(p)
			} else if fd == p.sfd {
				back = l.shadowReady(p)
			}
			handedBack = handedBack || back
		}
		if l.nObs >= 64 || l.rounds%64 == 0 {
			l.flushObserved() // and at every idle tick: a wake-up per batch, not per round
		}
		if handedBack {
			// The woken goroutines wait in this P's run queue.
			runtime.Gosched()
		}
		if l.rounds++; l.rounds%256 == 0 {
			l.scanIdle() // also at every idle tick (above)
		}
	}
}

func (l *fwdLoop) owner(fd int) *parkedSess {
	if fd < 0 || fd >= len(l.owners) {
		return nil
	}
	return l.owners[fd]
}

func (l *fwdLoop) setOwner(fd int, p *parkedSess) {
	for fd >= len(l.owners) {
		l.owners = append(l.owners, make([]*parkedSess, len(l.owners)+64)...)
	}
	l.owners[fd] = p
}

// commands runs the queued commands; it reports whether a session was
// handed back.
func (l *fwdLoop) commands() bool {
	l.mu.Lock()
	cmds := l.cmds
	l.cmds = nil
	l.mu.Unlock()
	back := false
	for _, cmd := range cmds {
		switch {
		case cmd.park != nil:
			p := cmd.park
			if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, p.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(p.fd)}); err != nil {
				p.c.unparkCh <- unparkMsg{fd: p.fd, in: p.in}
				back = true
				continue
			}
			l.setOwner(p.fd, p)
			l.nParked++
			p.c.parked = p
			// Plaintext tls.Conn decrypted with its last record and
			// the goroutine did not read yet.
			if p.tls != nil && !p.decrypt() {
				p.clientGone = true
			}
			// A shutdown that asked before this park was seen: Shutdown
			// sets the flag before it sends its unpark.
			if p.wantBack = p.c.shuttingDown.Load(); p.wantBack || p.clientGone || len(p.in) > 0 {
				if l.next(p) {
					back = true
				}
				continue
			}
		case cmd.unpark != nil:
			p := cmd.unpark.parked
			if p == nil || p.c != cmd.unpark || l.owner(p.fd) != p {
				continue // not parked (any more)
			}
			if p.sc != nil && !cmd.abort {
				p.wantBack = true // when its statement has ended
				continue
			}
			if p.sc != nil {
				l.end(p, false) // hands it back
			} else {
				l.handBack(p)
			}
			back = true
		}
	}
	return back
}

// scanIdle hands back, about once a second, the sessions idle for longer
// than the server's IdleTimeout (their goroutine ends them with 57P05).
func (l *fwdLoop) scanIdle() {
	now := time.Now()
	if now.Sub(l.lastScan) < time.Second {
		return
	}
	l.lastScan = now
	for _, p := range l.owners {
		if p != nil && p.sc == nil && !p.idleAt.IsZero() && now.After(p.idleAt) && l.owner(p.fd) == p {
			p.idle = true
			l.handBack(p)
		}
	}
}

// handBack gives a session back to its goroutine with what the loop read
// and has not answered, and what it answered and could not write.
func (l *fwdLoop) handBack(p *parkedSess) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, p.fd, nil)
	l.handedBack.Add(1)
	l.setOwner(p.fd, nil)
	l.nParked--
	p.c.parked = nil
	out := p.out
	if p.tls != nil {
		// The goroutine writes the rest as it is: TLS records.
		p.seal()
		out, p.tport.out = p.tport.out, nil
	}
	p.c.unparkCh <- unparkMsg{fd: p.fd, in: p.in, out: out, cancelled: p.cancelled, idle: p.idle, err: p.tlsErr}
	p.tlsErr = nil
}

// clientReady reads what the client sent and starts its statement when the
// loop can run it. It reports whether the session was handed back.
func (l *fwdLoop) clientReady(p *parkedSess) bool {
	for {
		buf := &p.in // what the socket gives: plaintext, or TLS records
		if p.tls != nil {
			buf = &p.tport.in
		}
		if cap(*buf)-len(*buf) < readChunk {
			if p.held() >= loopMaxIn {
				if p.sc == nil {
					// No statement runs: next hands a message this
					// large to the goroutine (it never waits here with
					// the client unwatched).
					break
				}
				// A statement is running and the client keeps sending:
				// stop watching it until the statement ends.
				l.watchClient(p, false)
				return false
			}
			*buf = slices.Grow(*buf, readChunk)
		}
		space := cap(*buf) - len(*buf)
		k, errno := rawRead(p.fd, (*buf)[len(*buf):cap(*buf)])
		if k > 0 {
			*buf = (*buf)[:len(*buf)+k]
			if k < space {
				break // drained for now; the socket is watched level-triggered
			}
			continue
		}
		if errno == unix.EAGAIN {
			break
		}
		// End of stream or an error: the goroutine sees it for itself on
		// the socket.
		return l.clientLost(p)
	}
	if p.sc != nil {
		return false // the running statement ends first (end decrypts)
	}
	if p.tls != nil && !p.decrypt() {
		return l.clientLost(p) // a TLS alert or a bad record: the goroutine's error
	}
	return l.next(p)
}

// held is the client bytes the loop holds: plaintext, and TLS records not
// decrypted yet. clientReady stops reading and next hands the session back
// at the same count, so neither waits for the other.
func (p *parkedSess) held() int {
	n := len(p.in)
	if p.tport != nil {
		n += len(p.tport.in)
	}
	return n
}

// clientLost handles a client socket that ended or failed: the session
// goes back to its goroutine, at once or when its statement has ended.
func (l *fwdLoop) clientLost(p *parkedSess) bool {
	p.clientGone = true
	if p.sc != nil {
		l.watchClient(p, false)
		return false
	}
	l.handBack(p)
	return true
}

// decrypt moves plaintext of the TLS records received into p.in, a record
// at a time and only until p.in holds what the loop can decide on (a whole
// statement, or what goes to the goroutine): as the goroutine reads, which
// asks its tls.Conn for the next record only when it needs more bytes, so
// a bad record after a statement is met, and answered with TLS's alert,
// only after that statement's reply. It sends what TLS itself wrote (a
// key update, an alert) and reports false when the TLS session failed or
// ended; the error goes back to the goroutine with the session (p.tlsErr).
func (p *parkedSess) decrypt() bool {
	for len(p.in) == 0 || p.plan() == planWait {
		p.in = slices.Grow(p.in, readChunk)
		n, err := p.tls.Read(p.in[len(p.in):cap(p.in)])
		p.in = p.in[:len(p.in)+n]
		if err != nil {
			if len(p.tport.out) > 0 {
				p.flushTLS()
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return true
			}
			p.tlsErr = err
			return false
		}
	}
	if len(p.tport.out) > 0 {
		p.flushTLS()
	}
	return true
}

// flushTLS writes the TLS records waiting in the transport; what the
// socket does not take stays there (for the next write, or the
// goroutine).
func (p *parkedSess) flushTLS() {
	k, _ := rawWrite(p.fd, p.tport.out)
	if k > 0 {
		p.tport.out = p.tport.out[:copy(p.tport.out, p.tport.out[k:])]
	}
}

// seal turns the answer bytes in p.out into TLS records in the transport.
func (p *parkedSess) seal() {
	if len(p.out) > 0 {
		_, _ = p.tls.Write(p.out) // into p.tport.out: cannot fail
		p.out = p.out[:0]
	}
}

// sendOut writes the answer bytes in p.out (as TLS records on a TLS
// session); it reports whether all went out. What did not stays in p.out,
// or in the transport as records.
func (p *parkedSess) sendOut() bool {
	if p.tls != nil {
		p.seal()
		p.flushTLS()
		return len(p.tport.out) == 0
	}
	k, _ := rawWrite(p.fd, p.out)
	if k < 0 {
		k = 0
	}
	p.out = p.out[:copy(p.out, p.out[k:])]
	return len(p.out) == 0
}

// watchClient turns the client socket's read events on or off.
func (l *fwdLoop) watchClient(p *parkedSess, on bool) {
	if p.clientOff == !on {
		return
	}
	p.clientOff = !on
	// Off is out of the epoll set, not a watch of no event: epoll reports
	// EPOLLHUP and EPOLLERR whatever the events asked for, so a client
	// that reset its connection while its statement runs would wake the
	// loop at every wait until the statement ends.
	if !on {
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, p.fd, nil)
		return
	}
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, p.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(p.fd)})
}

// next starts the session's next statement, if it has a whole one the loop
// runs, and hands the session back otherwise. It reports whether it handed
// it back.
func (l *fwdLoop) next(p *parkedSess) bool {
	if p.wantBack || (len(p.in) == 0 && p.clientGone) {
		// Asked back (shutdown): no further statement starts here, even
		// of a client that keeps pipelining.
		l.handBack(p)
		return true
	}
	if len(p.in) == 0 {
		return false
	}
	switch p.plan() {
	case planWait:
		if p.held() < loopMaxIn && !p.clientGone {
			return false
		}
		// An incomplete message this large: the goroutine reads it. Or
		// one whose rest cannot come (a TLS close_notify or error found
		// in the tls.Conn at the park): the goroutine sees the end.
		l.handBack(p)
		return true
	case planGoroutine:
		l.handBack(p)
		return true
	}
	if !l.begin(p) {
		l.handBack(p)
		return true
	}
	return false
}

// begin borrows an idle shadow connection and sends it the statement. It
// reports false when the goroutine must run the statement instead.
func (l *fwdLoop) begin(p *parkedSess) bool {
	sc := p.pool.TakeIdle(l.now)
	if sc == nil {
		return false
	}
	pg := sc.PgConn()
	if last, ok := pg.CustomData()[appliedKey].([]shadow.Setting); !ok || !slices.Equal(last, p.want) {
		p.pool.ReleaseNoWait(sc, true, l.now)
		return false
	}
	sw, ok := pg.Conn().(*swapConn)
	if !ok {
		// TLS to the shadow: the loop cannot read it.
		p.c.srv.loopOff.Store(true)
		p.pool.ReleaseNoWait(sc, true, l.now)
		return false
	}
	// A context already done: pgconn then never does I/O, so a
	// connection that would need a ping to be in sync is refused here
	// (the goroutine's path syncs it) instead of waited on.
	if pg.SyncConn(doneCtx) != nil {
		p.pool.ReleaseNoWait(sc, true, l.now)
		return false
	}
	sfd, err := sw.detach()
	if err != nil {
		p.pool.ReleaseNoWait(sc, false, l.now)
		return false
	}
	p.req = p.request(p.req[:0])
	if len(p.req) == 0 {
		p.pool.ReleaseNoWait(sc, true, l.now)
		return false
	}
	if k, errno := rawWrite(sfd, p.req); k != len(p.req) {
		// Nothing or part of it went out: the goroutine runs the
		// statement; a connection left inside a message, or broken, is
		// closed.
		p.pool.ReleaseNoWait(sc, k <= 0 && errno == unix.EAGAIN, l.now)
		return false
	}
	// Watched edge-triggered from its first borrowing until it goes back
	// to the runtime's poller (swapConn.conn): an idle pooled socket
	// wakes the loop only if its server sends something unasked (its
	// owner is then nil and the event is ignored), and a statement costs
	// no epoll_ctl.
	sw.mu.Lock()
	if !sw.armed {
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, sfd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(sfd)}); err != nil {
			sw.mu.Unlock()
			p.pool.ReleaseNoWait(sc, false, l.now)
			return false
		}
		sw.armed = true
	}
	sw.mu.Unlock()
	p.sc, p.sw, p.sfd = sc, sw, sfd
	if c := p.c; c.srv.cfg.Observer != nil {
		p.start = time.Now() // the Observer's Duration
	}
	p.failed, p.skipped, p.dataBytes, p.zStatus = false, 0, 0, 0
	p.outMark = len(p.out)
	l.setOwner(sfd, p)
	c := p.c
	c.cancelMu.Lock()
	c.shadowPG = pg
	c.loopRunning = true
	c.cancelMu.Unlock()
	return true
}

// shadowReady reads the shadow's reply and passes its messages on; at
// ReadyForQuery the statement ends. It reports whether the session was
// handed back.
func (l *fwdLoop) shadowReady(p *parkedSess) bool {
	for {
		p.rb = slices.Grow(p.rb, readChunk)
		k, errno := rawRead(p.sfd, p.rb[len(p.rb):cap(p.rb)])
		if k > 0 {
			p.rb = p.rb[:len(p.rb)+k]
			switch p.walk() {
			case walkDone:
				return l.end(p, true)
			case walkAbandon:
				return l.end(p, false)
			}
			continue
		}
		if errno == unix.EAGAIN {
			return false // the next bytes are a new edge
		}
		return l.end(p, false) // the shadow connection broke
	}
}

// end finishes the running statement: the shadow connection goes back to
// the pool (or is closed), and the client gets the answer, or the session
// goes back to its goroutine to run the statement itself.
func (l *fwdLoop) end(p *parkedSess, complete bool) bool {
	c := p.c
	c.cancelMu.Lock()
	c.shadowPG = nil
	c.loopRunning = false
	cancelled := c.loopCancelled
	c.loopCancelled = false
	c.cancelMu.Unlock()

	l.setOwner(p.sfd, nil)
	// A connection a cancel may still reach is closed, never pooled
	// (cancelRunning); so is one with bytes read after ReadyForQuery
	// (they belong to nobody: relay.close).
	p.pool.ReleaseNoWait(p.sc, complete && p.zStatus == 'I' && !cancelled && p.rpos == len(p.rb), l.now)
	p.sc, p.sw, p.sfd = nil, nil, -1
	p.rb = p.rb[:0]
	p.rpos = 0

	if !complete || p.failed {
		// The goroutine runs the statement itself (cancelled: it answers
		// 57014 without running it).
		p.out = p.out[:p.outMark]
		p.cancelled = cancelled
		l.handBack(p)
		return true
	}
	p.commit()
	l.ran.Add(1)
	p.ran++
	p.out = append(p.out, 'Z', 0, 0, 0, 5, c.txStatus)
	if c.srv.cfg.Observer != nil {
		l.observed(c.srv, c.statementEvent(p.st, nil, time.Since(p.start)))
	}
	if !p.sendOut() || p.clientGone {
		l.handBack(p) // the goroutine writes the rest (or sees the end)
		return true
	}
	p.idleAt = c.idleDeadline(l.now) // idle from this round on
	if p.tls != nil && !p.decrypt() {
		return l.clientLost(p)
	}
	if p.clientOff {
		l.watchClient(p, true)
	}
	return l.next(p)
}

// obsBatch is Observer events the loop hands to observeLoop.
type obsBatch struct {
	o   Observer
	evs []StatementEvent
}

// observed queues an Observer event of a session of srv (loop goroutine).
func (l *fwdLoop) observed(srv *Server, ev StatementEvent) {
	l.obs[srv] = append(l.obs[srv], ev)
	l.nObs++
}

// flushObserved sends the queued events (loop goroutine). It blocks only
// when observeLoop is 256 batches behind.
func (l *fwdLoop) flushObserved() {
	if l.nObs == 0 {
		return
	}
	l.nObs = 0
	for srv, evs := range l.obs {
		if len(evs) > 0 {
			l.obsCh <- obsBatch{srv.cfg.Observer, evs}
			delete(l.obs, srv)
		}
	}
}

// observeLoop calls the Observers of the loop's statements.
func observeLoop(ch <-chan obsBatch) {
	for b := range ch {
		for _, ev := range b.evs {
			b.o.Statement(ev)
		}
	}
}

// rawEpollWait is epoll_wait without the runtime's syscall path.
func rawEpollWait(epfd int, events []unix.EpollEvent, msec int) int {
	r, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return -1
	}
	return int(r)
}

func rawRead(fd int, b []byte) (int, syscall.Errno)  { return rawIO(unix.SYS_READ, fd, b) }
func rawWrite(fd int, b []byte) (int, syscall.Errno) { return rawIO(unix.SYS_WRITE, fd, b) }

// rawIO is read or write (trap) without the runtime's syscall path.
func rawIO(trap uintptr, fd int, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	r, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(r), 0
}

// Message parsing of the loop's statements (loop goroutine only).

// loopPlan is what the loop does with a parked session's buffered bytes.
type loopPlan int

const (
	planWait      loopPlan = iota // an incomplete message: wait for more
	planGoroutine                 // hand the session back
	planRun                       // run the statement in the loop
)

// frame returns the message at b's start: its type, body and whole
// length. n is 0 when the message is not all there; ok is then false
// only when its length is invalid (below 4). A header not all there yet
// is incomplete, not invalid: a read can end anywhere.
func frame(b []byte) (typ byte, body []byte, n int, ok bool) {
	if len(b) < frameHeaderLen {
		return 0, nil, 0, true
	}
	size := int(int32(binary.BigEndian.Uint32(b[1:])))
	if size < 4 || len(b) < 1+size {
		return b[0], nil, 0, size >= 4
	}
	return b[0], b[frameHeaderLen : 1+size], 1 + size, true
}

// declaredBody is the body length the header at b's start announces (0
// when the header is not all there).
func declaredBody(b []byte) int {
	if len(b) < frameHeaderLen {
		return 0
	}
	return int(int32(binary.BigEndian.Uint32(b[1:]))) - 4
}

// walkResult is what walk found in the shadow's reply.
type walkResult int

const (
	walkMore    walkResult = iota // read on
	walkDone                      // ReadyForQuery
	walkAbandon                   // give the statement up: close the connection
)

// walk handles the complete shadow messages received so far. A reply
// the loop does not answer is read to its end only while it stays small
// (an error, a notice): a large one, or one that is broken, is abandoned
// (the connection is closed, which ends its query on the shadow), so the
// loop never reads, buffers or waits on a large result the goroutine then
// fetches again.
func (p *parkedSess) walk() walkResult {
	for {
		typ, _, n, whole := frame(p.rb[p.rpos:])
		if n == 0 {
			if !whole || declaredBody(p.rb[p.rpos:]) > relayFlushBytes {
				// A length below 4 (broken), or a message larger than
				// any reply the loop answers.
				p.failed = true
				return walkAbandon
			}
			// Keep the incomplete message at the buffer's start.
			if p.rpos > 0 {
				p.rb = p.rb[:copy(p.rb, p.rb[p.rpos:])]
				p.rpos = 0
			}
			return walkMore
		}
		m := p.rb[p.rpos : p.rpos+n]
		p.rpos += n
		if typ == 'Z' {
			if n == frameHeaderLen+1 {
				p.zStatus = m[frameHeaderLen]
			} else {
				p.failed = true
			}
			return walkDone
		}
		if p.failed {
			// Read to the end, keep nothing, up to a bound.
			if p.skipped += n; p.skipped > relayFlushBytes {
				return walkAbandon
			}
			continue
		}
		switch typ {
		case 'S', 'A':
			// The shadow's ParameterStatus and notifications are not the
			// client's (relayReply drops them too).
		case 'T', 'D', 'C':
			if typ == 'T' && p.ext && !p.sendDesc {
				continue
			}
			if typ == 'D' && p.ext {
				if p.dataBytes += n; p.dataBytes > p.c.srv.cfg.MaxBufferedResult {
					p.failed = true // the goroutine's error, not ours
					continue
				}
			}
			p.out = append(p.out, m...)
			if len(p.out)-p.outMark > relayFlushBytes {
				p.failed = true // large results stream from the goroutine
			}
		case '1', '2', 'n':
			if !p.ext {
				p.failed = true
				continue
			}
			if (typ == '1' && !p.sendParse) || (typ == 'n' && !p.sendDesc) {
				continue
			}
			p.out = append(p.out, m...)
		default:
			// An error, a notice or anything else: the goroutine's path.
			p.failed = true
		}
	}
}

// parkedSess is a session while the loop holds it.
type parkedSess struct {
	c  *conn
	fd int
	// A TLS session's tls.Conn and the transport under it (nil without
	// TLS): in then holds plaintext, the records are in tport.
	tls    *tls.Conn
	tport  *tlsTransport
	tlsErr error  // the tls.Conn's read error, for the goroutine
	in     []byte // client bytes read, not yet answered
	out    []byte // answer bytes not yet written
	want   []shadow.Setting
	pool   *shadow.Pool
	idleAt time.Time // zero: no idle timeout

	clientGone, clientOff bool
	wantBack, cancelled   bool
	idle                  bool
	ran                   int // statements the loop answered since the park

	// The statement the loop runs.
	st        statement
	batch     int // bytes of in it takes
	ext       bool
	sendParse bool
	sendDesc  bool
	bindStmt  *preparedStatement // the statement the batch binds
	// The Bind's values and formats (pointing into in) and the Parse's
	// parameter types, reused.
	params                      [][]byte
	paramFormats, resultFormats []int16
	oids                        []uint32
	portal                      portal
	req                         []byte
	sc                          *shadow.Conn
	sw                          *swapConn
	sfd                         int
	rb                          []byte
	rpos                        int
	start                       time.Time
	failed                      bool
	skipped                     int // bytes of a failed reply read since it failed
	dataBytes                   int
	zStatus                     byte
	outMark                     int
}

// plan decides what to do with the buffered client bytes.
func (p *parkedSess) plan() loopPlan {
	c := p.c
	maxBody := c.srv.cfg.MaxMessage
	typ, body, n, whole := frame(p.in)
	if n == 0 {
		if !whole || declaredBody(p.in) > maxBody {
			return planGoroutine // the goroutine's error
		}
		return planWait
	}
	if n-frameHeaderLen > maxBody {
		return planGoroutine
	}
	p.ext, p.sendParse, p.sendDesc, p.bindStmt = false, false, false, nil
	cc := c.classifyCache // the routes the loop may take
	if cc == nil || cc.policy != c.ds.Policy {
		return planGoroutine
	}
	switch typ {
	case 'Q':
		if len(body) == 0 || bytes.IndexByte(body, 0) != len(body)-1 {
			return planGoroutine
		}
		cs, ok := cc.m[string(body[:len(body)-1])] // no copy of the text
		if !ok || cs.st.route != pgsql.RouteCatalog || cs.st.err != nil {
			return planGoroutine
		}
		p.st, p.batch = cs.st, n
		return planRun
	case 'P', 'B':
		return p.planExtended(cc)
	}
	return planGoroutine
}

// planExtended accepts [Parse] Bind [Describe portal] Execute Sync of one
// portal whose statement is a cached catalog route, all received, with
// nothing the goroutine would refuse. The messages are read in place (no
// copy, no allocation when the Parse repeats the unnamed statement, as
// libpq and pgbench send it): each must use its whole body, as wellSized
// and pgproto3's decoders require; anything unusual goes to the goroutine.
func (p *parkedSess) planExtended(cc *classifyCache) loopPlan {
	c := p.c
	maxBody := c.srv.cfg.MaxMessage
	b := p.in
	off := 0
	nextMsg := func() (byte, []byte, bool) {
		typ, body, n, whole := frame(b[off:])
		if n == 0 {
			return 0, nil, whole && declaredBody(b[off:]) <= maxBody
		}
		if n-frameHeaderLen > maxBody {
			return 0, nil, false
		}
		off += n
		return typ, body, true
	}
	typ, body, ok := nextMsg()
	if typ == 0 {
		return waitOr(ok)
	}
	var ps *preparedStatement
	if typ == 'P' {
		name, rest, ok1 := bytes.Cut(body, nul)
		query, rest, ok2 := bytes.Cut(rest, nul)
		oids, ok3 := p.readOIDs(rest)
		if !ok1 || !ok2 || !ok3 {
			return planGoroutine
		}
		old, exists := c.stmts[string(name)]
		if exists && len(name) != 0 {
			return planGoroutine
		}
		cs, ok := cc.m[string(query)]
		if !ok || cs.st.route != pgsql.RouteCatalog || cs.st.err != nil || cs.nParams < 0 {
			return planGoroutine
		}
		nParams := max(cs.nParams, len(oids))
		if exists && old.st.text == cs.st.text && old.st.route == cs.st.route && old.nParams == nParams && slices.Equal(old.parseOIDs, oids) {
			ps = old // the same statement again: no new object
		} else {
			ps = &preparedStatement{name: string(name), st: cs.st, text: cs.st.text, nParams: nParams, parseOIDs: slices.Clone(oids)}
		}
		p.sendParse = true
		if typ, body, ok = nextMsg(); typ == 0 {
			return waitOr(ok)
		}
	}
	if typ != 'B' {
		return planGoroutine
	}
	portalName, stmtName, ok := p.readBind(body)
	if !ok {
		return planGoroutine
	}
	if ps == nil || string(stmtName) != ps.name {
		if ps = c.stmts[string(stmtName)]; ps == nil || p.sendParse {
			return planGoroutine
		}
	}
	if ps.st.route != pgsql.RouteCatalog || ps.st.err != nil || len(p.params) != ps.nParams {
		return planGoroutine
	}
	if k := len(p.paramFormats); k > 1 && k != len(p.params) {
		return planGoroutine
	}
	for _, f := range p.resultFormats {
		if f != formatText && f != formatBinary {
			return planGoroutine
		}
	}
	if typ, body, ok = nextMsg(); typ == 0 {
		return waitOr(ok)
	}
	if typ == 'D' {
		name, rest, ok := bytes.Cut(body[min(1, len(body)):], nul)
		if len(body) == 0 || body[0] != 'P' || !ok || len(rest) != 0 || string(name) != string(portalName) {
			return planGoroutine
		}
		p.sendDesc = true
		if typ, body, ok = nextMsg(); typ == 0 {
			return waitOr(ok)
		}
	}
	if typ != 'E' {
		return planGoroutine
	}
	name, rest, ok := bytes.Cut(body, nul)
	if !ok || len(rest) != 4 || string(name) != string(portalName) || binary.BigEndian.Uint32(rest) != 0 {
		return planGoroutine // a row limit: PortalSuspended is the goroutine's
	}
	if typ, body, ok = nextMsg(); typ == 0 {
		return waitOr(ok)
	}
	if typ != 'S' || len(body) != 0 {
		return planGoroutine
	}
	if ps.desc != nil && p.sendParse {
		ps.desc = nil // a new Parse is described afresh, as on the goroutine
	}
	p.ext, p.bindStmt, p.st, p.batch = true, ps, ps.st, off
	return planRun
}

// readOIDs reads a Parse's parameter types, which must end the body.
func (p *parkedSess) readOIDs(b []byte) ([]uint32, bool) {
	if len(b) < 2 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) != 4*n {
		return nil, false
	}
	p.oids = p.oids[:0]
	for i := 0; i < n; i++ {
		p.oids = append(p.oids, binary.BigEndian.Uint32(b[4*i:]))
	}
	return p.oids, true
}

// readBind reads a Bind into p.params, p.paramFormats and p.resultFormats
// (the values point into the client's bytes).
func (p *parkedSess) readBind(b []byte) (portal, stmt []byte, ok bool) {
	if portal, b, ok = bytes.Cut(b, nul); !ok {
		return nil, nil, false
	}
	if stmt, b, ok = bytes.Cut(b, nul); !ok {
		return nil, nil, false
	}
	var fmts []int16
	if fmts, b, ok = readInt16s(b, p.paramFormats[:0]); !ok {
		return nil, nil, false
	}
	p.paramFormats = fmts
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	p.params = p.params[:0]
	for i := 0; i < n; i++ {
		if len(b) < 4 {
			return nil, nil, false
		}
		size := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		switch {
		case size == -1:
			p.params = append(p.params, nil)
		case size < 0 || size > len(b):
			return nil, nil, false
		default:
			p.params = append(p.params, b[:size:size])
			b = b[size:]
		}
	}
	if fmts, b, ok = readInt16s(b, p.resultFormats[:0]); !ok || len(b) != 0 {
		return nil, nil, false
	}
	p.resultFormats = fmts
	return portal, stmt, true
}

// readInt16s reads an int16 count and as many int16s.
func readInt16s(b []byte, dst []int16) ([]int16, []byte, bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) < 2*n {
		return nil, nil, false
	}
	for i := 0; i < n; i++ {
		dst = append(dst, int16(binary.BigEndian.Uint16(b[2*i:])))
	}
	return dst, b[2*n:], true
}

// nul ends the strings of protocol messages.
var nul = []byte{0}

func waitOr(whole bool) loopPlan {
	if whole {
		return planWait
	}
	return planGoroutine
}

// request appends what the goroutine's path sends the shadow for the
// statement (execShadowSimple, execShadowExtended).
func (p *parkedSess) request(dst []byte) []byte {
	if !p.ext {
		return appendQuery(dst, p.st.text)
	}
	ps := p.bindStmt
	oids := ps.parseOIDs
	if ps.desc != nil {
		oids = ps.desc.paramOIDs
	}
	if len(oids) > len(p.params) {
		oids = oids[:len(p.params)]
	}
	p.portal = portal{params: p.params, paramFormats: p.paramFormats, resultFormats: p.resultFormats}
	out, err := appendExtended(dst, ps.text, oids, &p.portal)
	if err != nil {
		return dst[:0]
	}
	return out
}

// commit makes the session's state what the goroutine's path leaves after
// the statement: a Parse's prepared statement (the portal ends at Sync).
func (p *parkedSess) commit() {
	if p.ext && p.sendParse {
		p.c.stmts[p.bindStmt.name] = p.bindStmt
	}
	p.in = p.in[:copy(p.in, p.in[p.batch:])]
	p.batch = 0
}
