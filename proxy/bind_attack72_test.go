package proxy

import (
	"encoding/binary"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAttack72_BinaryNumericParamsAmplify (medium–high; rule 1: one
// analyst's message makes the proxy hold hundreds of times its size, past
// the per-analyst memory bound every analyst shares, before any check;
// nothing is charged): a DP statement's parameters are decoded into SQL
// literals ALL at once (extended.go boundText → bind.go literals), and only
// then does bindLiterals add up the length of the ones the text uses
// against rewrite.MaxStatementBytes. The statement's parameter count is
// the larger of its highest $n and the Parse message's ParameterOIDs
// (extended.go parse: n = len(m.ParameterOIDs)), so a statement that uses
// $1 alone can declare 65,535 numeric parameters, and each binary numeric
// value of 10 bytes (one digit group, weight 1000, dscale 1000) decodes
// to about 5,000 characters (decodeNumeric pads its integer part with
// 4 × weight zeros and its fraction to dscale; both may be 1,000), which
// the regexp numericText then scans.
//
// Here 20,000 such parameters (a 280 KB Bind; the Bind's values are charged
// to the analyst as they are: 0.3 MiB) make one Execute hold about 100 MB
// of literals at once under an 8 MiB per-analyst bound, before the
// statement is refused or planned. With 65,535 parameters (a 0.9 MB Bind,
// within the 1 MiB message bound) it is about 330 MB per Execute, and each
// of the analyst's sessions can run one at the same time: a handful of
// sessions end the proxy, and every analyst's session with it.
//
// The fix: decode only the parameters the text names, and count each
// literal's length into the bound as it is decoded (stop at
// rewrite.MaxStatementBytes before building the next), or bound a
// numeric's decoded length by its wire length (weight and dscale are what
// multiply it); also refuse more ParameterOIDs than the statement's
// placeholders use, as PostgreSQL's own limit does not help here.
func TestAttack72_BinaryNumericParamsAmplify(t *testing.T) {
	const budget = 8 << 20
	const nParams = 20000
	ts := startServer(t, serverOpts{mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	nc := ts.rawConn(t)

	oids := make([]uint32, nParams)
	for i := range oids {
		oids[i] = oidNumeric
	}
	// One binary numeric: ndigits 1, weight 1000, sign +, dscale 1000, digit 9999.
	v := make([]byte, 10)
	binary.BigEndian.PutUint16(v[0:], 1)
	binary.BigEndian.PutUint16(v[2:], 1000)
	binary.BigEndian.PutUint16(v[4:], 0)
	binary.BigEndian.PutUint16(v[6:], 1000)
	binary.BigEndian.PutUint16(v[8:], 9999)
	params := make([][]byte, nParams)
	for i := range params {
		params[i] = v
	}
	sendMsgs(t, nc, &pgproto3.Parse{Name: "s", Query: "SELECT count(*) FROM visits WHERE age > $1", ParameterOIDs: oids}, &pgproto3.Sync{})
	if r := discardUntilReady(t, nc); r != "1Z" {
		t.Fatalf("Parse: %s", r)
	}

	// The live heap, sampled while the Execute runs.
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := int64(sample[0].Value.Uint64())
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			metrics.Read(s)
			if d := int64(s[0].Value.Uint64()) - base; d > peak.Load() {
				peak.Store(d)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	sendMsgs(t, nc,
		&pgproto3.Bind{PreparedStatement: "s", ParameterFormatCodes: []int16{formatBinary}, Parameters: params},
		&pgproto3.Execute{},
		&pgproto3.Sync{})
	reply := discardUntilReady(t, nc)
	if len(reply) > 120 {
		reply = reply[:120] + "…"
	}
	close(stop)
	<-done
	bindBytes := nParams * (4 + len(v))
	t.Logf("Bind of %d binary numerics (%d KB): reply %s; live heap grew by up to %.1f MiB during the Execute (analyst bound %d MiB)",
		nParams, bindBytes>>10, reply, float64(peak.Load())/(1<<20), budget>>20)
	if peak.Load() > 2*budget {
		t.Errorf("one Execute of a %d KB Bind made the proxy hold %.1f MiB at once (%.0f× the message) under a %d MiB per-analyst bound: boundText decodes every declared parameter (%d, of which the text uses one) into literals of up to ~5 KB each before any length check",
			bindBytes>>10, float64(peak.Load())/(1<<20), float64(peak.Load())/float64(bindBytes), budget>>20, nParams)
	}
}
