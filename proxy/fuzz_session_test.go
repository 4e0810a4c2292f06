package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Stages of FuzzSession: where in a connection's life the fuzzed bytes
// arrive.
const (
	stageStartup = iota // the first bytes of a connection
	stageAuth           // after a StartupMessage, in place of the SASL exchange
	stageSession        // after authentication: the message stream
	numStages
)

// fuzzServer is the proxy FuzzSession drives, shared by all inputs.
type fuzzServer struct {
	ts   *testServer
	logs *observer.ObservedLogs
}

func startFuzzServer(f *testing.F) *fuzzServer {
	core, logs := observer.New(zapcore.ErrorLevel)
	ts := startServer(f, serverOpts{mutate: func(c *Config) {
		c.Logger = zap.New(core)
		c.AuthTimeout = 5 * time.Second
		c.MaxMessage = 1 << 16
	}})
	return &fuzzServer{ts: ts, logs: logs}
}

// fuzzSeeds are message streams for the session stage: well-formed and
// malformed messages of every kind a client sends, in simple, extended,
// copy and terminate flows.
func fuzzSeeds() [][]byte {
	q := func(s string) []byte { return rawMsg('Q', s+"\x00") }
	sync := rawMsg('S', "")
	bind := rawMsg('B', "\x00\x00\x00\x00\x00\x00\x00\x00")
	exec := rawMsg('E', "\x00\x00\x00\x00\x00")
	parse := func(s string) []byte { return rawMsg('P', "\x00"+s+"\x00\x00\x00") }
	seeds := [][]byte{
		q("SELECT 1"),
		q("SHOW dp.budget"),
		q("SELECT count(*) FROM visits"),
		q("SELECT department, count(*) FROM visits GROUP BY department"),
		q("SELECT * FROM visits"),
		q("BEGIN; SET dp.epsilon = 0.2; SELECT sum(cost) FROM visits; COMMIT"),
		q("COPY visits TO STDOUT"),
		q("COPY visits FROM STDIN"),
		cat(q("BEGIN"), q("SELECT 1/0"), q("SELECT 2"), q("ROLLBACK")),
		cat(parse("SELECT count(*) FROM visits WHERE age > $1"), rawMsg('B', "\x00\x00\x00\x00\x00\x01\x00\x00\x00\x0240\x00\x00"), rawMsg('D', "P\x00"), exec, sync),
		cat(parse("SHOW dp.epsilon"), rawMsg('D', "S\x00"), bind, exec, rawMsg('C', "S\x00"), rawMsg('C', "P\x00"), sync),
		cat(parse("SELECT count(*) FROM visits"), bind, rawMsg('E', "\x00\x00\x00\x00\x01"), exec, rawMsg('H', ""), sync),
		cat(rawMsg('P', "s1\x00SELECT $1\x00\x00\x01\x00\x00\x00\x17"), sync),
		cat(rawMsg('d', "1\t2\n"), rawMsg('c', ""), rawMsg('f', "stop\x00"), q("SELECT 1")),
		rawMsg('F', "\x00\x00\x0b\xb8\x00\x00\x00\x00\x00\x00"),
		rawMsg('X', ""),
		cat(q("SELECT 1"), rawMsg('X', ""), q("SELECT 2")),
	}
	for _, tc := range malformedCases {
		seeds = append(seeds, tc.bytes)
	}
	return seeds
}

// FuzzSession sends arbitrary bytes to the proxy at each stage of a
// connection (start-up, authentication, the session's message stream:
// simple query, Parse/Bind/Describe/Execute/Sync, Close, Flush, copy
// messages, FunctionCall, Terminate). Whatever arrives:
//   - the proxy does not panic (nothing logged at Error level);
//   - every reply parses as backend messages, and a FATAL error is the last
//     thing the proxy sends;
//   - the connection ends once the client stops sending (no hang), and the
//     proxy keeps no session or goroutine afterwards;
//   - in the session stage, when the bytes are a sequence of whole messages
//     of known types without Terminate, the session survives: a ROLLBACK
//     and a SHOW sent after them are answered. So every malformed message
//     got an ERROR (and the session went on) or, for a message that cannot
//     be framed, FATAL and a clean close.
func FuzzSession(f *testing.F) {
	fs := startFuzzServer(f)
	baseline := runtime.NumGoroutine()
	for _, s := range fuzzSeeds() {
		f.Add(uint8(stageSession), s)
	}
	f.Add(uint8(stageStartup), startupBytes(map[string]string{"user": "alice", "database": "hospital"}))
	f.Add(uint8(stageStartup), []byte{0, 0, 0, 8, 4, 210, 22, 47})
	f.Add(uint8(stageStartup), []byte{0, 0, 0, 16, 4, 210, 22, 46, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add(uint8(stageStartup), []byte{0, 0, 0, 7, 0, 3, 0, 0})
	f.Add(uint8(stageAuth), rawMsg('p', "SCRAM-SHA-256\x00\x00\x00\x00\x20n,,n=,r=abcdefghijklmnopqrstuvwxyzABCDEF"))
	f.Add(uint8(stageAuth), rawMsg('p', "SCRAM-SHA-256\x00\xff\xff\xff\xff"))
	f.Add(uint8(stageAuth), rawMsg('p', "MD5\x00\x00\x00\x00\x00"))
	f.Add(uint8(stageAuth), rawMsg('Q', "SELECT 1\x00"))
	f.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > baseline+2 {
			buf := make([]byte, 1<<20)
			f.Errorf("%d goroutines after fuzzing, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
		}
	})
	f.Fuzz(func(t *testing.T, stage uint8, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		fs.run(t, stage%numStages, data)
	})
}

func startupBytes(params map[string]string) []byte {
	body := []byte{0, 3, 0, 0}
	for _, k := range []string{"user", "database"} {
		if v, ok := params[k]; ok {
			body = append(body, k+"\x00"+v+"\x00"...)
		}
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(4+len(body))), body...)
}

func (fs *fuzzServer) run(t *testing.T, stage uint8, data []byte) {
	var nc net.Conn
	var fe *pgproto3.Frontend // nil: read the socket
	switch stage {
	case stageStartup, stageAuth:
		var err error
		nc, err = net.Dial("tcp", fs.ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		if stage == stageAuth {
			data = cat(startupBytes(map[string]string{"user": "bob", "database": "hospital"}), data)
		}
	case stageSession:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pc, err := pgconn.Connect(ctx, fs.ts.dsn("alice", "alice", "hospital"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		hj, err := pc.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		nc, fe = hj.Conn, hj.Frontend
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(8 * time.Second))

	survives := stage == stageSession && wholeMessages(data)
	if survives {
		data = cat(data, rawMsg('S', ""), rawMsg('Q', "ROLLBACK\x00"), rawMsg('Q', "SHOW dp.epsilon\x00"))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		// Write while reading: a client that does not read could block the
		// proxy's writes and ours.
		defer wg.Done()
		_, _ = nc.Write(data)
		if !survives {
			_ = nc.(interface{ CloseWrite() error }).CloseWrite()
		}
	}()
	msgs, closed, err := readAll(nc, fe, stage, survives)
	wg.Wait()
	if err != nil {
		t.Fatalf("stage %d: %v (after %s)", stage, err, strings.Join(msgs, " "))
	}
	if survives && closed {
		t.Fatalf("stage %d: whole messages of known types closed the session: %s (input %q)", stage, strings.Join(msgs, " "), data)
	}
	if i := indexFatal(msgs); i >= 0 && i != len(msgs)-1 {
		t.Fatalf("stage %d: messages after FATAL: %s", stage, strings.Join(msgs, " "))
	}
	nc.Close()
	// The proxy's side of the connection ends too.
	deadline := time.Now().Add(8 * time.Second)
	for fs.ts.srv.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stage %d: %d connections still open after the client closed", stage, fs.ts.srv.active.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if errs := fs.logs.TakeAll(); len(errs) > 0 {
		t.Fatalf("stage %d: logged at Error level: %s %v", stage, errs[0].Message, errs[0].ContextMap())
	}
}

// readAll reads the proxy's replies. Before authentication they may be
// single bytes ('N' to SSLRequest) and then messages; it reads until the
// connection ends or, when the session survives, until the ReadyForQuery
// after the SHOW of the trailer.
func readAll(nc net.Conn, fe *pgproto3.Frontend, stage uint8, survives bool) (msgs []string, closed bool, err error) {
	var r io.Reader = nc
	if stage == stageStartup {
		// Skip the one-byte answers to SSLRequest/GSSENCRequest: read
		// everything, then parse what follows them as messages.
		all, err := io.ReadAll(nc)
		if err != nil && !isReset(err) {
			return nil, false, err
		}
		for len(all) > 0 && (all[0] == 'N') {
			all = all[1:]
		}
		r = strings.NewReader(string(all))
	}
	if fe == nil {
		fe = pgproto3.NewFrontend(r, io.Discard)
	}
	shown := false
	for {
		m, err := fe.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
				return msgs, true, nil
			}
			return msgs, false, err
		}
		switch m := m.(type) {
		case *pgproto3.ErrorResponse:
			msgs = append(msgs, "Error("+m.Severity+" "+m.Code+")")
		case *pgproto3.CommandComplete:
			msgs = append(msgs, "Complete("+string(m.CommandTag)+")")
			shown = shown || string(m.CommandTag) == "SHOW"
		case *pgproto3.ReadyForQuery:
			msgs = append(msgs, "Ready("+string(m.TxStatus)+")")
			if survives && shown {
				return msgs, false, nil
			}
		default:
			msgs = append(msgs, strings.TrimPrefix(typeName(m), "*pgproto3."))
		}
	}
}

func indexFatal(msgs []string) int {
	for i, m := range msgs {
		if strings.HasPrefix(m, "Error(FATAL") {
			return i
		}
	}
	return -1
}

// wholeMessages reports whether b is a sequence of whole frontend messages
// of the types a session accepts, with valid lengths, and no Terminate.
func wholeMessages(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 5 || !strings.ContainsRune("QPBDECHSFdcf", rune(b[0])) {
			return false
		}
		n := int(int32(binary.BigEndian.Uint32(b[1:5])))
		if n < 4 || n > 1<<16 || len(b) < 1+n {
			return false
		}
		b = b[1+n:]
	}
	return true
}
