package proxy

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestExtended_ErrorSentWithoutSync: after a failing Parse, a client that
// sends Describe and Flush (asyncpg's prepare) and waits must get the
// ErrorResponse at once, as from PostgreSQL, not after a Sync it never
// sends; the messages after the error are skipped until Sync.
func TestExtended_ErrorSentWithoutSync(t *testing.T) {
	ts := startServer(t, serverOpts{})
	fe, _ := ts.rawSession(t)
	fe.Send(&pgproto3.Parse{Name: "s1", Query: "DELETE FROM visits"})
	fe.Send(&pgproto3.Describe{ObjectType: 'S', Name: "s1"})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make(chan pgproto3.BackendMessage, 1)
	go func() {
		msg, err := fe.Receive()
		if err != nil {
			got <- nil
			return
		}
		got <- copyMessage(msg)
	}()
	select {
	case msg := <-got:
		if _, ok := msg.(*pgproto3.ErrorResponse); !ok {
			t.Fatalf("first reply %T, want ErrorResponse", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ErrorResponse without Sync: the client would wait forever")
	}
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := receiveUntilReady(t, fe)
	if len(msgs) != 1 {
		t.Fatalf("after Sync: %d messages (%T…), want only ReadyForQuery", len(msgs), msgs[0])
	}
}

// TestStartup_EncodingNames: client_encoding is read as PostgreSQL reads
// encoding names (letters and digits, any case): asyncpg sends 'utf-8'
// with the quotes.
func TestStartup_EncodingNames(t *testing.T) {
	ts := startServer(t, serverOpts{})
	for _, enc := range []string{"'utf-8'", "utf-8", "Unicode", "UTF_8", "sql_ascii"} {
		cfg, err := pgconn.ParseConfig(ts.dsn("alice", "alice", "hospital") + "&client_encoding=" + url.QueryEscape(enc))
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pc, err := pgconn.ConnectConfig(ctx, cfg)
		cancel()
		if err != nil {
			t.Errorf("client_encoding=%s: %v", enc, err)
			continue
		}
		if got := pc.ParameterStatus("client_encoding"); got != "UTF8" {
			t.Errorf("client_encoding=%s: reported %q, want UTF8", enc, got)
		}
		pc.Close(context.Background())
	}
}
