package upstream

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestAttack98_StaleRefusesUnreachableServer: Stale, which release asks
// before every charge, says 58000 "nothing was charged" when the data
// server refuses connections (attack round 98: each DP statement had been
// charged and then failed to connect), without the server's text (host,
// role); a pool whose every connection is held by running statements is
// busy, not down, and passes.
func TestAttack98_StaleRefusesUnreachableServer(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	host, port, _ := net.SplitHostPort(addr)
	pc, err := pgxpool.ParseConfig("postgres://reader:secret@" + host + ":" + port + "/hospital?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc) // lazy: no connection yet
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	down := &Pool{pool: pool, timeout: time.Second}
	err = down.Stale()
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.SystemError || !strings.Contains(pe.Detail, "nothing was charged") {
		t.Fatalf("Stale with the data server down = %v, want 58000 saying nothing was charged", err)
	}
	for _, s := range []string{pe.Message, pe.Detail, pe.Hint} {
		if strings.Contains(s, "reader") || strings.Contains(s, port) || strings.Contains(s, "refused") {
			t.Errorf("the connection error's text reached the analyst: %q", s)
		}
	}

	dsn := pgtest.NewDatabase(t)
	p, err := New(ctx, Config{DSN: dsn, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Stale(); err != nil {
		t.Fatalf("Stale with the server up: %v", err)
	}
	held, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	old := reachTimeout
	reachTimeout = 200 * time.Millisecond
	defer func() { reachTimeout = old }()
	if err := p.Stale(); err != nil && !errors.Is(err, pgerr.ErrCatalogChanged) {
		t.Fatalf("Stale with every connection held by a running statement = %v, want nil (busy, not down)", err)
	}
}

// TestAttack98_StaleReplacesJustBrokenConnection: a pooled connection the
// server closed less than a second ago (a quick crash-and-restart of the
// data server; here its backend is terminated) is not pinged by pgxpool;
// Stale, asked before the charge, pings it, so the query after the charge
// gets a working connection instead of failing with its charge spent.
func TestAttack98_StaleReplacesJustBrokenConnection(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	p, err := New(ctx, Config{DSN: dsn, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rows, err := p.Query(ctx, "SELECT pg_backend_pid()")
	if err != nil || len(rows) != 1 || rows[0][0] == nil {
		t.Fatalf("pid: %v %v", rows, err)
	}
	if err := pgtest.Exec(ctx, dsn, "SELECT pg_terminate_backend("+*rows[0][0]+")"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the backend has gone; the pooled connection does not know yet
	if err := p.Stale(); err != nil {
		t.Fatalf("Stale after the backend was terminated: %v", err)
	}
	if _, err := p.Query(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the query after Stale (its charge) failed on the broken connection: %v", err)
	}
}
