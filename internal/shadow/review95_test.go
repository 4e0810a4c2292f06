package shadow

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestReview95_DoneContextDiscardsHealthyIdle: an Acquire whose context
// has already ended (a statement's 1 ms statement_timeout spent on
// parsing, a CancelRequest) pings each idle connection that was idle over
// a second with that context; the ping fails at once (pgconn: context
// already done, nothing sent) and acquire discards the connection, healthy
// as it is, and goes on to the next. One such Acquire closes every such
// idle connection of the pool (other analysts' too), none of them counted
// as closed by the caller (the proxy counts only what Release closes:
// attack round 92's bucket), and then opens a new one.
func TestReview95_DoneContextDiscardsHealthyIdle(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 4, MaxConnsPerOwner: 4})
	ctx := ctxT(t)
	var cs []*Conn
	for i := 0; i < 3; i++ {
		c, err := p.Acquire(ctx, "bob")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		if !p.Release(c, true) {
			t.Fatal("not kept")
		}
	}
	time.Sleep(idlePing + 100*time.Millisecond)
	before := p.Stats()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Acquire(done, "alice")
	after := p.Stats()
	t.Logf("Acquire under a done context: %v; pool before %+v, after %+v", err, before, after)
	if after.Opened-before.Opened > 0 || after.Idle < before.Idle {
		t.Errorf("an Acquire whose context had ended closed %d healthy idle connections and opened %d (pool %+v -> %+v): a caller's ended context is not a broken connection",
			before.Idle-after.Idle+int(after.Opened-before.Opened), after.Opened-before.Opened, before, after)
	}
}

// TestReview95_OpenNoLeak: the connection open() makes without the
// statement's context is never left holding a slot: the statement ends
// during the open (the connection is pooled), and the pool is closed
// during the open too (it is closed, its slot freed); a connect that
// fails frees its slot.
func TestReview95_OpenNoLeak(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	delay := make(chan time.Duration, 10)
	slowDial := func(pc *pgconn.Config) {
		d := &net.Dialer{}
		pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case x := <-delay:
				time.Sleep(x)
			default:
			}
			return d.DialContext(ctx, network, addr)
		}
	}
	// 1. The statement ends during the open: pooled, slot held by it.
	p := newPool(t, PoolConfig{DSN: dsn, MaxConns: 2, Configure: slowDial})
	delay <- 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Acquire(ctx, "alice")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v", err)
	}
	if st := p.Stats(); st.Open != 1 || st.Idle != 1 {
		t.Errorf("after a statement ended during its open: %+v, want the connection pooled", st)
	}
	// alice's share is back.
	if n := p.held["alice"]; n != 0 {
		t.Errorf("alice holds %d after her Acquire failed", n)
	}
	// 2. The pool closes during the open of an ended statement.
	p2 := newPool(t, PoolConfig{DSN: dsn, MaxConns: 2, Configure: slowDial})
	delay <- 300 * time.Millisecond
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	go func() { time.Sleep(100 * time.Millisecond); p2.Close() }()
	_, err = p2.Acquire(ctx2, "alice")
	if err == nil {
		t.Fatal("Acquire succeeded")
	}
	if st := p2.Stats(); st.Open != 0 {
		t.Errorf("pool closed during an open: %+v, want nothing open", st)
	}
	// 3. The pool closes during the open of a live statement: the caller
	// gets the connection, and its Release closes it.
	p3 := newPool(t, PoolConfig{DSN: dsn, MaxConns: 2, Configure: slowDial})
	delay <- 300 * time.Millisecond
	go func() { time.Sleep(100 * time.Millisecond); p3.Close() }()
	c, err := p3.Acquire(ctxT(t), "alice")
	if err == nil {
		if p3.Release(c, true) {
			t.Error("Release kept a connection of a closed pool")
		}
	}
	if st := p3.Stats(); st.Open != 0 {
		t.Errorf("pool closed during a live open: %+v, want nothing open", st)
	}
	// 4. A connect that fails (nothing listens) frees its slot.
	p4 := newPool(t, PoolConfig{DSN: "postgres://x:y@127.0.0.1:1/db?connect_timeout=1", MaxConns: 1})
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, err := p4.Acquire(ctx, "alice")
		cancel()
		if err == nil {
			t.Fatal("Acquire to nothing succeeded")
		}
	}
	if st := p4.Stats(); st.Open != 0 {
		t.Errorf("failed connects left %+v", st)
	}
}
