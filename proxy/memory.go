package proxy

import (
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// What a session keeps in the proxy's memory between statements — named
// prepared statements' text, portals' parameters, the results of
// suspended portals and cursors, savepoints' copies of the settings — is
// bounded per session (session.go), and, since one analyst holds up to
// MaxConnectionsPerAnalyst sessions, per analyst too: the sessions of one
// analyst together hold at most MaxMemoryPerAnalyst (attack round 37:
// the per-session bounds, about 210 MiB, multiplied by 50 sessions made
// about 10 GB, enough to end the proxy and every analyst's session with
// it).
//
// Each session charges its analyst's account before it keeps more
// (checkMemory, with the bytes it is about to keep; a kept result, once
// its size is known: chargeMemoryOwn), and sets its charge to what it
// really holds at each ReadyForQuery while it holds anything (syncMemory:
// the statements' text is counted as they come and go, the portals and
// cursors it walks are few between statements), and at its end. A result
// kept is charged when its size is known, so the sessions of one analyst
// may pass the bound by the results they are keeping at that moment (one
// each at most, MaxBufferedResult).

// defaultMaxMemoryPerAnalyst is MaxMemoryPerAnalyst's default.
const defaultMaxMemoryPerAnalyst = 256 << 20

// memoryHeld is what the session keeps between statements.
func (s *session) memoryHeld() int64 {
	n := int64(s.heldBytes("")) + int64(s.stmtBytes)
	for _, p := range s.portals {
		for _, v := range p.params {
			n += int64(len(v))
		}
	}
	return n + int64(s.savepointsBytes())
}

// savepointsBytes is what the transaction's savepoints hold.
func (s *session) savepointsBytes() int {
	if k := len(s.savepoints); k > 0 {
		return s.savepoints[k-1].bytes
	}
	return 0
}

// syncMemory brings the analyst's account in line with what the session
// holds now.
func (c *conn) syncMemory() {
	held := c.sess.memoryHeld()
	if held == c.memCharged {
		return
	}
	c.srv.chargeMemory(c.sess.analyst, held-c.memCharged)
	c.memCharged = held
}

// checkMemory refuses (54000, before anything is kept or run) when the
// analyst's sessions would hold more than MaxMemoryPerAnalyst with grow
// more bytes; otherwise it charges grow.
func (c *conn) checkMemory(grow int) error {
	if c.tryCharge(int64(grow)) {
		return nil
	}
	c.syncMemory() // the charge may be stale: what the session holds now
	if c.tryCharge(int64(grow)) {
		return nil
	}
	return pgerr.New(pgerr.ProgramLimitExceeded, "your sessions hold too much of the proxy's memory (at most %d MiB for all sessions of one analyst)", c.srv.cfg.MaxMemoryPerAnalyst>>20).
		WithDetail("Prepared statements, open portals, unread results of suspended portals and cursors, and savepoints count. Nothing was run or charged.").
		WithHint("DEALLOCATE or Close what your sessions no longer use, read or close suspended portals and cursors, or close idle sessions")
}

// tryCharge adds n to the account when it stays within the bound.
func (c *conn) tryCharge(n int64) bool {
	s := c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memory[c.sess.analyst]+n > s.cfg.MaxMemoryPerAnalyst {
		return false
	}
	s.memory[c.sess.analyst] += n
	c.memCharged += n
	return true
}

// chargeMemoryOwn charges n bytes the session has kept (a result, whose
// size is known once it ran).
func (c *conn) chargeMemoryOwn(n int) {
	if n > 0 {
		c.srv.chargeMemory(c.sess.analyst, int64(n))
		c.memCharged += int64(n)
	}
}

// releaseMemory gives back the session's charge (its end).
func (c *conn) releaseMemory() {
	if c.memCharged != 0 {
		c.srv.chargeMemory(c.sess.analyst, -c.memCharged)
		c.memCharged = 0
	}
}

// chargeMemory adds delta bytes to analyst's account.
func (s *Server) chargeMemory(analyst string, delta int64) {
	s.mu.Lock()
	if s.memory[analyst] += delta; s.memory[analyst] <= 0 {
		delete(s.memory, analyst)
	}
	s.mu.Unlock()
}
