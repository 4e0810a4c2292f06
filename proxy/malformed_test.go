package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawMsg frames one message: type byte, int32 length, body.
func rawMsg(typ byte, body string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// rawLen frames a message with a given (possibly wrong) length field.
func rawLen(typ byte, length int32, body string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(length))
	return append(b, body...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// parseOK is a well-formed Parse of the unnamed statement "SELECT 1".
var parseOK = rawMsg('P', "\x00SELECT 1\x00\x00\x00")

// malformedCases are byte sequences sent after start-up, each followed by
// Sync and Query("SELECT 1") (the marker that ends a transcript).
var malformedCases = []struct {
	name  string
	bytes []byte
	// fatal: PostgreSQL closes without a word where the proxy first sends
	// FATAL 08P01 saying why (a message length it cannot frame).
	fatal bool
}{
	{"query with NUL inside", rawMsg('Q', "SELECT 1\x00SELECT 2\x00"), false},
	{"query with NUL right after the text", rawMsg('Q', "SELECT 1\x00\x00"), false},
	{"query without terminator", rawMsg('Q', "SELECT 1"), false},
	{"empty query body", rawMsg('Q', ""), false},
	{"query NUL inside, in a transaction", cat(rawMsg('Q', "BEGIN\x00"), rawMsg('Q', "SELECT 1\x00x\x00"), rawMsg('Q', "SELECT 2\x00"), rawMsg('Q', "ROLLBACK\x00")), false},
	{"parse without terminators", rawMsg('P', "s1\x00SELECT 1"), false},
	{"parse truncated parameter count", rawMsg('P', "s1\x00SELECT 1\x00\x00"), false},
	{"parse with trailing bytes", rawMsg('P', "s1\x00SELECT 1\x00\x00\x00junk"), false},
	{"parse with NUL inside, then bind/execute", cat(rawMsg('P', "\x00SELECT 1\x00x\x00\x00\x00"), rawMsg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), rawMsg('E', "\x00\x00\x00\x00\x00")), false},
	{"bind truncated", cat(parseOK, rawMsg('B', "\x00\x00\x00")), false},
	{"bind parameter longer than the message", cat(parseOK, rawMsg('B', "\x00\x00\x00\x00\x00\x01\x00\x00\x00\x10ab")), false},
	{"bind with trailing bytes", cat(parseOK, rawMsg('B', "\x00\x00\x00\x00\x00\x00\x00\x00junk")), false},
	{"describe with trailing bytes", cat(parseOK, rawMsg('D', "S\x00junk")), false},
	{"close with trailing bytes", cat(parseOK, rawMsg('C', "S\x00junk")), false},
	{"execute with trailing bytes", cat(parseOK, rawMsg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), rawMsg('E', "\x00\x00\x00\x00\x00junk")), false},
	{"describe of an unknown kind", cat(parseOK, rawMsg('D', "X\x00")), false},
	{"close of an unknown kind", cat(parseOK, rawMsg('C', "X\x00")), false},
	{"execute of the unnamed portal", cat(parseOK, rawMsg('B', "\x00\x00\x00\x00\x00\x00\x00\x00"), rawMsg('E', "\x00\x00\x00\x00\x00")), false},
	{"describe empty", rawMsg('D', ""), false},
	{"describe without terminator", rawMsg('D', "Sname"), false},
	{"execute without terminator", rawMsg('E', "portal"), false},
	{"execute truncated row count", rawMsg('E', "\x00\x00\x00"), false},
	{"close empty", rawMsg('C', ""), false},
	{"flush with a body", rawMsg('H', "x"), false},
	{"sync with a body", rawMsg('S', "x"), false},
	{"function call truncated", rawMsg('F', "\x00\x00"), false},
	{"copy data outside COPY", rawMsg('d', "1\t2\n"), false},
	{"copy done with a body", rawMsg('c', "x"), false},
	{"copy fail without terminator", rawMsg('f', "oops"), false},
	{"malformed parse then malformed query before sync", cat(rawMsg('P', "x"), rawMsg('Q', "SELECT 1")), false},
	{"terminate with a body", rawMsg('X', "x"), false},
	{"unknown message type", rawMsg('Y', ""), false},
	{"unknown message type with a body", rawMsg('y', "abc"), false},
	{"length below 4", rawLen('Q', 3, ""), true},
	{"negative length", rawLen('Q', -1, ""), true},
}

// transcript sends b, then Sync and Query("SELECT 1"), on a hijacked
// session and describes what comes back until the answer to SELECT 1 or
// the end of the connection: message types, the severity and SQLSTATE of
// errors, and "closed".
func transcript(t *testing.T, nc net.Conn, fe *pgproto3.Frontend, b []byte) string {
	t.Helper()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	b = cat(b, rawMsg('S', ""), rawMsg('Q', "SELECT 1\x00"))
	if _, err := nc.Write(b); err != nil {
		return "write failed"
	}
	var out []string
	selectDone := false
	for {
		m, err := fe.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
				return strings.Join(append(out, "closed"), " ")
			}
			return strings.Join(append(out, "receive: "+err.Error()), " ")
		}
		switch m := m.(type) {
		case *pgproto3.ErrorResponse:
			if m.Message == "" {
				out = append(out, "Error without a message")
			}
			out = append(out, fmt.Sprintf("Error(%s %s)", m.Severity, m.Code))
		case *pgproto3.ReadyForQuery:
			out = append(out, "Ready("+string(m.TxStatus)+")")
			if selectDone {
				return strings.Join(out, " ")
			}
		case *pgproto3.CommandComplete:
			out = append(out, "Complete("+string(m.CommandTag)+")")
			selectDone = selectDone || string(m.CommandTag) == "SELECT 1"
		case *pgproto3.ParameterStatus, *pgproto3.NoticeResponse:
		default:
			out = append(out, strings.TrimPrefix(fmt.Sprintf("%T", m), "*pgproto3."))
		}
	}
}

// isReset reports whether err is the connection ending (reset by the
// peer), not a timeout.
func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// hijack opens a session with dsn and takes over its socket. Replies must
// be read with the returned Frontend: pgconn may have started a background
// reader on the socket (after a slow write) whose buffer holds them.
func hijack(t *testing.T, dsn string) (net.Conn, *pgproto3.Frontend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	return hj.Conn, hj.Frontend
}

// TestMalformedMessages_LikePostgres sends each malformed message to a real
// PostgreSQL and to the proxy, and wants the same answer: the same errors
// (severity and SQLSTATE; the message texts differ where PostgreSQL names
// the field it could not read), the same ReadyForQuery statuses, and the
// session kept or closed in the same way.
func TestMalformedMessages_LikePostgres(t *testing.T) {
	shadow := shadowDB(t)
	ts := startServer(t, serverOpts{shadowDSN: shadow})
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			nc, fe := hijack(t, shadow)
			want := transcript(t, nc, fe, tc.bytes)
			if tc.fatal {
				want = strings.Replace(want, "closed", "Error(FATAL 08P01) closed", 1)
			}
			nc, fe = hijack(t, ts.dsn("alice", "alice", "hospital"))
			got := transcript(t, nc, fe, tc.bytes)
			if got != want {
				t.Errorf("proxy:\n  %s\nPostgreSQL:\n  %s", got, want)
			}
		})
	}
}
