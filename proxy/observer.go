package proxy

import "time"

// Observer receives one call per statement a session ran or refused, after
// its reply is known (the admin endpoint's metrics and the audit log,
// internal/admin and internal/audit). It runs on the session's goroutine,
// on the forwarding path: it must be cheap and must not block. It is told
// the route, the SQLSTATE and the time taken, and can ask for the
// statement's fingerprint (a hash of its normalized text, literals
// removed); it never sees the statement's text, parameters or results.
type Observer interface {
	Statement(s StatementEvent)
}

// StatementEvent is one statement as an Observer sees it.
type StatementEvent struct {
	Analyst string
	Dataset string
	// Route is "session", "catalog", "dp" or "refuse".
	Route string
	// SQLState is the error's SQLSTATE, "" on success.
	SQLState string
	Duration time.Duration
	// DP is set for a DP statement that was answered.
	DP *DPEvent

	fp func() string // for Fingerprint only (conn.fingerprintOf)
}

// DPEvent describes a released DP answer.
type DPEvent struct {
	Cached bool
	// Cost is what the answer added to the analyst's composed spending
	// (zero for a cached answer).
	CostEpsilon, CostDelta float64
	// ChargeFingerprint is the ledger's fingerprint of the charge (the
	// answer cache key), "" when the releaser did not say.
	ChargeFingerprint string
}

// Fingerprint returns the statement's fingerprint (computed on each call;
// call it only when it is written somewhere).
func (s StatementEvent) Fingerprint() string {
	if s.fp == nil {
		return fingerprint("")
	}
	return s.fp()
}

// observe reports one statement to the Observer, if any.
func (c *conn) observe(st statement, err error, d time.Duration) {
	o := c.srv.cfg.Observer
	if o == nil {
		return
	}
	text := st.text
	ev := StatementEvent{Route: routeName(st.route), Duration: d, fp: func() string { return c.fingerprintOf(text) }, DP: c.sess.lastDP}
	c.sess.lastDP = nil
	if c.sess.ds != nil && c.sess.ds.Policy != nil {
		ev.Dataset = c.sess.ds.Policy.Name
	}
	ev.Analyst = c.sess.analyst
	if err != nil {
		ev.SQLState = errorCode(err)
	}
	o.Statement(ev)
}
