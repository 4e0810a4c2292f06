package proxy

import (
	"testing"
)

// TestReview74_UnusedInvalidParameterAccepted (low; rule 3 and PostgreSQL
// parity: a bad input that PostgreSQL refuses is run, and charged).
//
// Since 781e803 boundText (proxy/extended.go:539) decodes only the
// parameters a DP statement's text uses (bindWith, proxy/bind.go:60). A
// Bind whose unused parameter, declared int4 by Parse, holds "abc" was
// refused before (22P02 "invalid value for parameter $2", nothing
// charged), as PostgreSQL refuses it (exec_bind_message converts every
// parameter with its type's input function, used or not); now the
// statement is released and charged. A client's bug that PostgreSQL
// reports is hidden, at the cost of ε.
//
// Suggested fix: keep the lazy decoding for building the text, but check
// every bound value's syntax cheaply (its wire length bounds the work:
// literal() on each with the decoded text discarded, or a validating pass
// that does not build numerics' expanded text) before the charge.
func TestReview74_UnusedInvalidParameterAccepted(t *testing.T) {
	r := startRealDP(t, nil)
	pc := r.connect(t)
	n0 := len(r.charges(t))
	res := pc.ExecParams(ctxT(t), "SELECT COUNT(*) FROM visits WHERE age > $1",
		[][]byte{[]byte("30"), []byte("abc")}, []uint32{oidInt4, oidInt4}, nil, nil).Read()
	charged := len(r.charges(t)) - n0
	t.Logf("Bind of $1 = 30, unused $2 (int4) = 'abc': err %v (%s), %d charge(s)", res.Err, sqlstate(res.Err), charged)
	if res.Err == nil || charged > 0 {
		t.Errorf("an unused int4 parameter bound to 'abc' was accepted (err %v) and the statement charged %d time(s); PostgreSQL refuses the Bind with 22P02", res.Err, charged)
	}
}
