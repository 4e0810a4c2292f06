package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAttack72_CopyNullStringAmplifiesPastBound (high; rule 1: one
// analyst's statement holds proxy memory far past the bound every other
// analyst relies on; no race, no DP query, no budget): COPY ( … ) TO STDOUT
// builds every output line of the result (copy.go execCopy: out.copyData,
// all lines before sendCopyOut writes any) and charges the analyst
// 2 × rowsBytes(rows) — the rows and "their lines" — for it. But a line is
// not bounded by its row: every NULL cell is written as the COPY's NULL
// string (copyLine: b.WriteString(cp.Null)), which the analyst chooses, up
// to the message bound (1 MiB), while rowBytes counts a NULL cell as 40
// bytes. pgsql/copy.go checks the NULL string for CR, LF and the delimiter
// only, never its length.
//
// Here, under an 8 MiB per-analyst bound, one catalog COPY of 2,000 NULLs
// with a 20,000-byte NULL string (a 20 KB statement) is answered: the
// account is charged about 0.3 MiB while the proxy builds and holds 40 MB of
// lines; a client that does not read keeps them held (the shadow
// connection is given back before the lines are sent, so no write deadline
// ends it). With the defaults, shadowRows lets through up to 64 MiB of rows
// (about 1.6 million NULL cells at 40 bytes each), and a NULL string of
// 100 KB makes one statement's lines 160 GB: the proxy ends, and every
// analyst's session with it.
//
// The fix: count the lines as they are built (len(cp.Null) per NULL cell,
// the escapes), reserving them with checkMemory/growResult before building
// (54000 past the bound), or bound the NULL string's length (PostgreSQL
// itself has no such limit, so counting is the faithful fix); and a DP
// answer's COPY room (materialize copies = 2) should include the NULL
// string's length per cell too.
func TestAttack72_CopyNullStringAmplifiesPastBound(t *testing.T) {
	const budget = 8 << 20
	const rows, nullLen = 2000, 20000
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) { c.MaxMemoryPerAnalyst = budget }})
	nc := ts.rawConn(t)
	before := heapAlloc()
	q := fmt.Sprintf("COPY (SELECT NULL::int AS v FROM generate_series(1, %d)) TO STDOUT WITH (NULL '%s')", rows, strings.Repeat("x", nullLen))
	sendMsgs(t, nc, &pgproto3.Query{String: q})
	// Do not read: the proxy builds the lines, writes until the socket's
	// buffers are full and then holds the rest.
	held, charged := heldWhileUnread(before, budget, func() int64 { return ts.srv.memoryOf("alice") })
	reply := readCopyReply(t, nc)
	t.Logf("COPY of %d NULLs with a %d-byte NULL string: reply %s; account %.2f MiB, heap held while the client did not read %.1f MiB (bound %d MiB)",
		rows, nullLen, reply.summary, float64(charged)/(1<<20), float64(held)/(1<<20), budget>>20)
	if reply.copyBytes > budget || held > 2*budget {
		t.Errorf("one COPY under a %d MiB per-analyst bound was answered with %.1f MiB of lines (%.1f MiB of heap held while the client did not read), while the analyst's account was charged %.2f MiB: copyLine writes the analyst's NULL string per NULL cell, counted as 40 bytes by rowBytes; want 54000 before the lines are built",
			budget>>20, float64(reply.copyBytes)/(1<<20), float64(held)/(1<<20), float64(charged)/(1<<20))
	}
}

// heldWhileUnread samples, for up to 30 s while the client reads nothing,
// the heap grown since before and the analyst's account, until the heap
// has grown past four times budget.
func heldWhileUnread(before, budget int64, account func() int64) (held, charged int64) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		held, charged = heapAlloc()-before, account()
		if held > 4*budget {
			break
		}
	}
	return held, charged
}

type copyReply struct {
	summary   string
	copyBytes int64
}

// readCopyReply reads up to ReadyForQuery, counting CopyData bytes.
func readCopyReply(t *testing.T, nc interface {
	Read([]byte) (int, error)
	SetReadDeadline(time.Time) error
}) copyReply {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	defer nc.SetReadDeadline(time.Time{})
	var out copyReply
	var types []string
	hdr := make([]byte, 5)
	buf := make([]byte, 64<<10)
	readFull := func(b []byte) {
		for n := 0; n < len(b); {
			k, err := nc.Read(b[n:])
			if err != nil {
				t.Fatalf("read: %v (so far %v)", err, types)
			}
			n += k
		}
	}
	for {
		readFull(hdr)
		typ := hdr[0]
		n := int(uint32(hdr[1])<<24|uint32(hdr[2])<<16|uint32(hdr[3])<<8|uint32(hdr[4])) - 4
		body := make([]byte, 0)
		if typ == 'E' {
			body = make([]byte, n)
			readFull(body)
		} else {
			for left := n; left > 0; {
				k := min(left, len(buf))
				readFull(buf[:k])
				left -= k
			}
		}
		if typ == 'd' {
			out.copyBytes += int64(n)
		} else {
			s := string(typ)
			if typ == 'E' {
				s += "(" + errorFields(body) + ")"
			}
			types = append(types, s)
		}
		if typ == 'Z' {
			out.summary = strings.Join(types, " ")
			return out
		}
	}
}

// errorFields is an ErrorResponse body's SQLSTATE and message.
func errorFields(body []byte) string {
	var code, msg string
	for _, f := range strings.Split(string(body), "\x00") {
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case 'C':
			code = f[1:]
		case 'M':
			msg = f[1:]
		}
	}
	return code + " " + msg
}

// TestCopy_DPNullStringInRoomBeforeCharge: a COPY's NULL string is at
// most pgsql.MaxCopyNull bytes (each line is built as it is sent, the
// NULL string once per NULL cell): a COPY of a DP query with a 700 KB one
// is refused with 54000 before anything runs or is charged; the same COPY
// with NULL 'x' is answered and charged once.
func TestCopy_DPNullStringInRoomBeforeCharge(t *testing.T) {
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = 8 << 20 })
	pc := r.connect(t)
	n0 := len(r.charges(t))
	q := "COPY (SELECT department, COUNT(*) FROM visits GROUP BY department) TO STDOUT WITH (NULL '%s')"
	_, err := execAll(t, pc, fmt.Sprintf(q, strings.Repeat("x", 700_000)))
	if sqlstate(err) != "54000" || len(r.charges(t)) != n0 {
		t.Fatalf("COPY with a 700 KB NULL string under an 8 MiB bound: %v, %d charges; want 54000 and none", err, len(r.charges(t))-n0)
	}
	if _, err := execAll(t, pc, fmt.Sprintf(q, "x")); err != nil {
		t.Fatalf("the same COPY with NULL 'x': %v", err)
	}
	if got := len(r.charges(t)) - n0; got != 1 {
		t.Errorf("%d charges, want 1", got)
	}
}
