package proxy

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// countingWriter records the size of each write; it fails after failAt
// writes when failAt > 0.
type countingWriter struct {
	writes []int
	total  bytes.Buffer
	failAt int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.failAt > 0 && len(w.writes) >= w.failAt {
		return 0, errors.New("write failed")
	}
	w.writes = append(w.writes, len(b))
	w.total.Write(b)
	return len(b), nil
}

// TestClientOut: what a session sends between two flushes is written in
// pieces of about outFlushBytes, never held whole; the bytes and their
// order are those of the messages; a failed write is kept and returned by
// Flush, and nothing more is written after it.
func TestClientOut(t *testing.T) {
	w := &countingWriter{}
	o := newClientOut(w)
	row := &pgproto3.DataRow{Values: [][]byte{bytes.Repeat([]byte("x"), 1000)}}
	var want []byte
	for range 1000 { // about 1 MB, no Flush
		o.Send(row)
		want, _ = row.Encode(want)
		if len(o.buf) > outFlushBytes+2000 {
			t.Fatalf("buffer holds %d bytes", len(o.buf))
		}
	}
	big := bytes.Repeat([]byte("D"), 3*outFlushBytes) // a raw piece written as it is
	o.sendRaw(big)
	want = append(want, big...)
	o.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	want, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(want)
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.total.Bytes(), want) {
		t.Fatalf("wrote %d bytes, want the %d bytes of the messages in order", w.total.Len(), len(want))
	}
	if len(w.writes) < 10 {
		t.Errorf("1 MB written in %d writes: held whole", len(w.writes))
	}
	if cap(o.buf) > outKeepBytes {
		t.Errorf("buffer of %d bytes kept after a flush", cap(o.buf))
	}

	f := &countingWriter{failAt: 1}
	o = newClientOut(f)
	for range 200 {
		o.Send(row)
	}
	if o.failed() == nil || o.Flush() == nil {
		t.Fatal("a failed write was not kept")
	}
	if len(f.writes) != 1 || len(o.buf) > outFlushBytes+2000 {
		t.Errorf("after a failed write: %d writes, %d bytes buffered", len(f.writes), len(o.buf))
	}
}

// TestClientOut_Deadline: while a deadline is held (the session holds a
// shadow connection) a write to a client that does not read fails at it
// and the error is kept; with none set nothing touches the socket's
// deadline.
func TestClientOut_Deadline(t *testing.T) {
	a, b := net.Pipe() // b never reads
	defer a.Close()
	defer b.Close()
	o := newClientOut(a)
	o.holdUntil(time.Now().Add(50 * time.Millisecond))
	o.sendRaw(bytes.Repeat([]byte("D"), 2*outFlushBytes))
	var ne net.Error
	if err := o.failed(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("write to a client that does not read, under a deadline: %v, want a timeout", err)
	}
	if o.Flush() == nil {
		t.Error("the failed write was not kept")
	}
}
