// Package linerate bounds the log lines one analyst can make the proxy
// write: a token bucket per analyst (golang.org/x/time/rate), so what a
// free statement costs in log volume — a refused statement, a cancel, a
// catalog statement in the audit log — is bounded by the configured rate
// and burst, not by how fast a client can send (attack round 86: one
// session's refused statements wrote 16–18 MB/s of log, and rotated the
// other analysts' lines out of the audit log in about a second).
//
// A line that is not written is counted, and the owner's next line that
// is written carries the count, so the log still says how many were left
// out. The owners are the config's analysts (authenticated names), where
// the map stays bounded, or client networks before authentication
// (NewBounded), where it is bounded by forgetting them all and the lines
// of all owners together by one more bucket (WithTotal): whoever holds
// many networks (an IPv6 /48 is 65,536 of the /64s a network is) gets
// each a fresh bucket, and past the bound every bucket fresh again.
package linerate

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
)

// NotLoggedKey is the field of a written line that counts the owner's
// lines left out since the last one written.
const NotLoggedKey = "lines_not_logged"

// Limiter is a token bucket of log lines per owner. Safe for concurrent
// use; a nil *Limiter allows every line.
type Limiter struct {
	perSecond rate.Limit
	burst     int
	// maxOwners, when > 0, bounds the owners kept: past it every owner
	// is forgotten.
	maxOwners int
	// total, when set (WithTotal), bounds the lines of every owner
	// together: a line is written when its owner's bucket and this one
	// both allow it.
	total  *rate.Limiter
	mu     sync.Mutex
	owners map[string]*owner
}

type owner struct {
	lim     *rate.Limiter
	dropped atomic.Int64
}

// New returns a Limiter that lets each owner write burst lines at once
// and perSecond lines a second after that.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{perSecond: rate.Limit(perSecond), burst: max(burst, 1), owners: map[string]*owner{}}
}

// NewBounded is New for owners that are not the config's analysts (a
// client network): past maxOwners of them every owner is forgotten, so
// the limiter's memory stays bounded whoever connects.
func NewBounded(perSecond float64, burst, maxOwners int) *Limiter {
	l := New(perSecond, burst)
	l.maxOwners = maxOwners
	return l
}

// WithTotal bounds the lines of all owners together to burst at once and
// perSecond a second after that, besides each owner's bucket, and returns
// l. For NewBounded's owners, which anyone can be.
func (l *Limiter) WithTotal(perSecond float64, burst int) *Limiter {
	l.total = rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))
	return l
}

func (l *Limiter) owner(name string) *owner {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.owners[name]
	if !ok {
		if l.maxOwners > 0 && len(l.owners) >= l.maxOwners {
			clear(l.owners)
		}
		o = &owner{lim: rate.NewLimiter(l.perSecond, l.burst)}
		l.owners[name] = o
	}
	return o
}

// Allow reports whether owner's next line is written; one that is not is
// counted (Dropped).
func (l *Limiter) Allow(name string) bool {
	if l == nil {
		return true
	}
	o := l.owner(name)
	if o.lim.Allow() && (l.total == nil || l.total.Allow()) {
		return true
	}
	o.dropped.Add(1)
	return false
}

// Dropped returns, and clears, the number of owner's lines not written
// since the last call: the line being written reports it.
func (l *Limiter) Dropped(name string) int64 {
	if l == nil {
		return 0
	}
	return l.owner(name).dropped.Swap(0)
}

// Core wraps a logger's core for one owner: its Info and Warn entries are
// written only when Allow lets them, and a written entry of any level
// carries NotLoggedKey when some were left out before it. Debug entries
// (a steward who turned them on wants them all) and Error and above pass
// untouched.
func (l *Limiter) Core(c zapcore.Core, name string) zapcore.Core {
	if l == nil {
		return c
	}
	return &core{Core: c, l: l, name: name}
}

type core struct {
	zapcore.Core
	l    *Limiter
	name string
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	return &core{Core: c.Core.With(fields), l: c.l, name: c.name}
}

// Check lets an entry the bucket allows through to the inner core's own
// Check (its levels, its sampling: review round 87), with the count of
// those left out before it as a field.
func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Core.Enabled(e.Level) {
		return ce
	}
	if (e.Level == zapcore.InfoLevel || e.Level == zapcore.WarnLevel) && !c.l.Allow(c.name) {
		return ce
	}
	n := c.l.Dropped(c.name)
	if n == 0 {
		return c.Core.Check(e, ce)
	}
	out := c.Core.With([]zapcore.Field{zap.Int64(NotLoggedKey, n)}).Check(e, ce)
	if ce == nil && out == nil {
		c.l.owner(c.name).dropped.Add(n) // not written after all: keep the count
	}
	return out
}
