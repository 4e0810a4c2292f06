//go:build !linux

package proxy

import "github.com/jackc/pgx/v5/pgconn"

// The forwarding loop needs epoll: elsewhere every session stays on its
// goroutine.

type parkedSess struct{}

func (c *conn) parkable() bool         { return false }
func (c *conn) park() bool             { return true }
func (c *conn) unparkForShutdown()     {}
func (c *conn) abortParked()           {}
func wrapShadowDial(pc *pgconn.Config) {}

// ForwardLoopStats returns zeros: there is no forwarding loop here.
func ForwardLoopStats() (answered, handedBack int64) { return 0, 0 }
