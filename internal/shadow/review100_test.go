package shadow

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// slowConn delays each write by delay while slow is set.
type slowConn struct {
	net.Conn
	slow *atomic.Bool
}

func (s slowConn) Write(b []byte) (int, error) {
	if s.slow.Load() {
		time.Sleep(100 * time.Millisecond)
	}
	return s.Conn.Write(b)
}

// TestReview100_ContextEndsDuringPing (low; any analyst, others'
// connections): review round 95 made an Acquire whose statement had
// already ended take no idle connection, but one whose statement ends
// while the idle connection's ping is in flight (a statement_timeout or a
// CancelRequest timed to it: the ping is a round trip on a connection idle
// over a second) still pings under the statement's context. The ping
// fails with the context (pgconn sets the connection's deadline, or sends
// a cancel request: one more fork on the shadow server), and acquire
// closes the healthy connection — another analyst's warm one, as often as
// not — uncounted by the closing analyst's churn bucket (the proxy counts
// what Release closes), and the next statement opens a new one.
//
// Here the ping takes 100 ms (a slow write) and the statement ends after
// 30 ms: the connection must stay in the pool.
func TestReview100_ContextEndsDuringPing(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var slow atomic.Bool
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 2, Configure: func(pc *pgconn.Config) {
		d := &net.Dialer{}
		pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return slowConn{Conn: c, slow: &slow}, nil
		}
	}})
	c, err := p.Acquire(ctxT(t), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Release(c, true) {
		t.Fatal("not kept")
	}
	time.Sleep(idlePing + 100*time.Millisecond) // pinged when next taken
	before := p.Stats()
	slow.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = p.Acquire(ctx, "alice")
	slow.Store(false)
	after := p.Stats()
	t.Logf("Acquire whose statement ended during the ping: %v; pool before %+v, after %+v", err, before, after)
	if err == nil {
		t.Fatal("Acquire succeeded after its context ended")
	}
	if after.Idle != before.Idle || after.Opened != before.Opened {
		t.Errorf("a statement that ended during the ping of a healthy idle connection closed it (pool %+v -> %+v)", before, after)
	}
	// The connection kept works.
	c, err = p.Acquire(ctxT(t), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if got := pooledScalar(t, c, "SELECT 1"); got != "1" {
		t.Errorf("SELECT 1 on the kept connection: %q", got)
	}
	p.Release(c, true)
}
