package proxy

import (
	"sync/atomic"

	"github.com/dpproxy/dpproxy/internal/config"
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
// Each session charges its analyst's account before it keeps anything
// (checkMemory: a named statement, a portal's parameters, a savepoint's
// copy; a result as it grows, 1 MiB at a time: reserveResult, growResult,
// settleResult), and sets its charge to what it holds at each
// ReadyForQuery while it holds anything (syncMemory) and to nothing at its
// end. A charge that does not fit is refused (54000) before what it is for
// is kept, so the account stays within the bound but for steps taken at
// the same moment by several sessions (1 MiB each).

// defaultMaxMemoryPerAnalyst is MaxMemoryPerAnalyst's default.
const defaultMaxMemoryPerAnalyst = config.DefaultMaxMemoryPerAnalystMB << 20

// memoryHeld is what the session keeps between statements.
func (s *session) memoryHeld() int64 {
	n := int64(s.heldBytes("")) + int64(s.stmtBytes)
	var pinned map[*preparedStatement]bool
	for _, p := range s.portals {
		n += int64(p.bytes)
		// A portal keeps its statement alive after the statement is
		// replaced (Parse of the unnamed statement) or deallocated: its
		// text is counted here then, once (attack round 93: 64 portals
		// of replaced 1 MiB statements had kept 63 MiB counted as 0).
		if ps := p.stmt; s.stmts[ps.name] != ps && !pinned[ps] {
			if pinned == nil {
				pinned = map[*preparedStatement]bool{}
			}
			pinned[ps] = true
			n += int64(ps.size())
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

// memAccount is one analyst's account: the bytes their sessions keep.
type memAccount struct{ held atomic.Int64 }

// account returns analyst's account (made once, kept: analysts are the
// config's).
func (s *Server) account(analyst string) *memAccount {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.memory[analyst]
	if !ok {
		a = &memAccount{}
		s.memory[analyst] = a
	}
	return a
}

// syncMemory brings the analyst's account in line with what the session
// holds now.
func (c *conn) syncMemory() {
	held := c.sess.memoryHeld() + int64(c.resultReserved) + int64(c.sendingRoom) + int64(c.relayCharged) + int64(c.postRoom) // a result being kept, sent or relayed, a post-processing statement's answers too
	if held != c.memCharged {
		c.mem().held.Add(held - c.memCharged)
		c.memCharged = held
	}
}

// mem is the session's analyst's account.
func (c *conn) mem() *memAccount {
	if c.memAcct == nil {
		c.memAcct = c.srv.account(c.sess.analyst)
	}
	return c.memAcct
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
		WithDetail("Prepared statements, open portals, unread results, and savepoints count. Nothing was run or charged.").
		WithHint("DEALLOCATE or Close what your sessions no longer use, read results to the end or close suspended portals and cursors, or close idle sessions")
}

// tryCharge adds n to the account when it stays within the bound.
func (c *conn) tryCharge(n int64) bool {
	a := c.mem()
	for {
		cur := a.held.Load()
		if cur+n > c.srv.cfg.MaxMemoryPerAnalyst {
			return false
		}
		if a.held.CompareAndSwap(cur, cur+n) {
			c.memCharged += n
			return true
		}
	}
}

// reserveResult starts charging a result the session is about to keep (a
// portal's): the first resultStep now (54000 when the analyst's bound has
// no room for it), and more as the result grows (growResult, which the
// relay calls before it keeps another message), so the account never
// passes the bound however many of the analyst's sessions run results at
// once (attack round 38: each had passed a check of the account before
// its result was known) and no session holds room it does not use.
// settleResult then sets the charge to the result's size.
func (c *conn) reserveResult() error {
	if err := c.checkMemory(resultStep); err != nil {
		return err
	}
	c.resultReserved = resultStep
	return nil
}

// resultStep is how much more a growing result reserves at a time.
const resultStep = 1 << 20

// growResult reserves room for a kept result to reach size bytes: within
// MaxBufferedResult and the analyst's bound (while reserveResult's
// reservation is open), or an error (54000).
func (c *conn) growResult(size int) error {
	if size > c.srv.cfg.MaxBufferedResult {
		return pgerr.New(programLimitExceeded, "catalog result too large (over %d bytes)", c.srv.cfg.MaxBufferedResult).
			WithHint("add a LIMIT or use the simple query protocol")
	}
	for c.resultReserved > 0 && size > c.resultReserved {
		step := max(resultStep, size-c.resultReserved)
		if err := c.checkMemory(step); err != nil {
			return err
		}
		c.resultReserved += step
	}
	return nil
}

// settleResult replaces a reservation by the size of what was kept.
func (c *conn) settleResult(kept int) {
	c.chargeMemoryOwn(kept - c.resultReserved)
	c.resultReserved = 0
}

// chargeMemoryOwn charges n bytes the session has kept (a result, whose
// size is known once it ran).
func (c *conn) chargeMemoryOwn(n int) {
	if n != 0 {
		c.mem().held.Add(int64(n))
		c.memCharged += int64(n)
	}
}

// endSending gives back the room of a DP answer sent at once (execDP),
// once the statement's reply has been written.
func (c *conn) endSending() {
	if c.sendingRoom != 0 {
		c.chargeMemoryOwn(-c.sendingRoom)
		c.sendingRoom = 0
	}
}

// releaseMemory gives back the session's charge (its end).
func (c *conn) releaseMemory() {
	if c.memCharged != 0 {
		c.mem().held.Add(-c.memCharged)
		c.memCharged = 0
	}
}

// admitRelayed charges the analyst's account, before the relay reads it,
// for a shadow message of body bytes: the relay holds it whole and the
// client's write buffer a copy (attack round 82: unread sessions held
// 60 MB rows and errors of the shadow uncounted, 401 MiB of one analyst
// against a 256 MiB bound). The charge stands until the statement's relay
// ends (releaseRelayed).
func (c *conn) admitRelayed(body int) error {
	if want := 2 * body; want > c.relayCharged {
		if err := c.checkMemory(want - c.relayCharged); err != nil {
			return err
		}
		c.relayCharged = want
	}
	return nil
}

// releaseRelayed ends admitRelayed's charge.
func (c *conn) releaseRelayed() {
	if c.relayCharged > 0 {
		c.relayCharged = 0
		c.syncMemory()
	}
}
