package proxy

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAttack36_StartupFloodEvictsAnalysts (high; a network attacker, no
// credentials): round 35 counts start-ups apart from sessions and, when
// max_connections start-ups are in progress, a new connection ends the
// OLDEST start-up (Server.addStarting). An attacker who opens connections
// faster than max_connections per handshake time ends every analyst's
// start-up before it authenticates: with max_connections 200 and a client
// whose SCRAM exchange takes 3 round trips of 100 ms, 700 connections a
// second (tens of kB/s) shut every remote analyst out, and no socket of
// the attacker needs to stay open. Before the round the attacker had to
// hold the sockets; now it need not even do that. (Serve also refuses at
// accept anything past 2·max_connections+1, which evicted sockets whose
// goroutines have not ended yet fill.) Here a flood of unauthenticated connections from one address
// (127.0.0.2; bob's is 127.0.0.1), against max_connections 4, and against the default 200 with bob
// 25 ms away: bob cannot connect.
// The fix: bound start-ups per remote address and evict from the address
// that holds the most (never a start-up that is further along, e.g. one
// in SASL, for one that has sent nothing), with a short deadline for the
// first start-up packet; an attacker with one address then only evicts
// its own sockets.
func TestAttack36_StartupFloodEvictsAnalysts(t *testing.T) {
	t.Run("max_connections=4", func(t *testing.T) { startupFlood(t, 4, 64, 0) })
	// The default max_connections, and bob 25 ms away (a LAN or a
	// nearby region): the flood's rate on loopback is enough.
	t.Run("max_connections=200,latency=25ms", func(t *testing.T) { startupFlood(t, 200, 600, 25*time.Millisecond) })
}

// startupFlood opens connections that send nothing, keeping up to open of
// them at once, while bob connects ten times through a link that delays
// each write by latency.
func startupFlood(t *testing.T, maxConns, open int, latency time.Duration) {
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxConnections = maxConns }})
	bobAddr := ts.addr
	if latency > 0 {
		bobAddr = delayedLink(t, ts.addr, latency)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var opened atomic.Int64
	// The attacker's address is not bob's (127.0.0.2; Linux routes all of
	// 127/8 to the loopback interface).
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	sem := make(chan struct{}, open) // the flood's sockets open at once
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sem <- struct{}{}
				nc, err := attacker.Dial("tcp", ts.addr)
				if err != nil {
					<-sem
					continue
				}
				opened.Add(1)
				go func() {
					// Sends nothing; closes when the proxy does.
					_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
					var b [1]byte
					_, _ = nc.Read(b[:])
					nc.Close()
					<-sem
				}()
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	time.Sleep(200 * time.Millisecond)
	ok, failed := 0, 0
	var lastErr error
	for i := 0; i < 10; i++ {
		// One session at a time (max_connections_per_analyst).
		pc, err := pgconn.Connect(ctxT(t), "postgres://bob:bob-secret@"+bobAddr+"/hospital?sslmode=disable")
		if err == nil {
			_, err = execAll(t, pc, "SHOW dp.epsilon")
			pc.Close(context.Background())
		}
		if err != nil {
			failed++
			lastErr = err
			continue
		}
		ok++
	}
	stop()
	t.Logf("flood: %d unauthenticated connections; bob: %d of 10 connected (last error: %v)", opened.Load(), ok, lastErr)
	if failed > 0 {
		t.Errorf("%d of bob's 10 connections failed while an unauthenticated client opened connections (%d) that sent nothing: start-ups in progress are evicted oldest first, so a flood ends every analyst's handshake (last error: %v)", failed, opened.Load(), lastErr)
	}
}

// delayedLink forwards connections to addr, each write delayed by d (a
// client d away from the proxy), and returns its address.
func delayedLink(t *testing.T, addr string, d time.Duration) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pipe := func(dst, src net.Conn) {
		defer dst.Close()
		defer src.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				time.Sleep(d)
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return ln.Addr().String()
}
