package proxy

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// countingReader records how many bytes were read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestFramer_Next(t *testing.T) {
	stream := cat(rawMsg('Q', "SELECT 1\x00"), rawMsg('S', ""), rawMsg('d', string(bytes.Repeat([]byte("x"), 3*frameBufSize))), rawMsg('H', ""))
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"whole", func() io.Reader { return bytes.NewReader(stream) }},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) }},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFramer(tc.r(), 1<<20)
			var got []byte
			for {
				typ, m, err := f.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("next() error %v", err)
				}
				if typ != m[0] {
					t.Fatalf("next() type %q, message starts with %q", typ, m[0])
				}
				got = append(got, m...)
			}
			if !bytes.Equal(got, stream) {
				t.Fatalf("messages joined = %d bytes, want the %d bytes sent", len(got), len(stream))
			}
		})
	}
}

func TestFramer_Errors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []byte
		max   int
		check func(error) bool
	}{
		{"length below 4", rawLen('Q', 3, ""), 100, func(err error) bool { return errors.Is(err, errFrameLength) }},
		{"negative length", rawLen('Q', -1, ""), 100, func(err error) bool { return errors.Is(err, errFrameLength) }},
		{"over max", rawMsg('Q', "0123456789"), 9, func(err error) bool {
			var e *frameTooLargeError
			return errors.As(err, &e) && e.size == 10 && e.max == 9
		}},
		{"EOF in the header", []byte{'Q', 0, 0}, 100, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"EOF in the body", rawLen('Q', 10, "ab"), 100, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"EOF between messages", nil, 100, func(err error) bool { return err == io.EOF }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := newFramer(bytes.NewReader(tc.in), tc.max).next()
			if !tc.check(err) {
				t.Errorf("next() error = %v", err)
			}
		})
	}
}

// TestFramer_ExactReadsNothingPast: an exact framer (start-up packets)
// reads no byte of what follows the packet, and a refused length reads
// nothing of the body.
func TestFramer_ExactReadsNothingPast(t *testing.T) {
	packet := startupCode(sslRequestCode)
	cr := &countingReader{r: bytes.NewReader(cat(packet, []byte("pipelined plaintext")))}
	code, body, err := readStartupPacket(cr, 10000)
	if err != nil || code != sslRequestCode || len(body) != 0 {
		t.Fatalf("readStartupPacket = %d, %q, %v; want the SSLRequest", code, body, err)
	}
	if cr.n != len(packet) {
		t.Errorf("read %d bytes, want exactly the packet's %d", cr.n, len(packet))
	}
	cr = &countingReader{r: bytes.NewReader(cat([]byte{0, 0, 0x4e, 0x20}, make([]byte, 20000)))}
	if _, _, err := readStartupPacket(cr, 10000); !isProtocolViolation(err) {
		t.Errorf("oversized packet: error %v, want 08P01", err)
	}
	if cr.n != 4 {
		t.Errorf("oversized packet: read %d bytes, want only its length", cr.n)
	}
}

func isProtocolViolation(err error) bool {
	e, ok := pgerr.As(err)
	return ok && e.Code == pgerr.ProtocolViolation
}

// TestFramer_LargeMessageBufferDropped: after a message larger than four
// buffers, the framer goes back to a small buffer (an idle session holds
// no large one).
func TestFramer_LargeMessageBufferDropped(t *testing.T) {
	stream := cat(rawMsg('d', string(make([]byte, 10*frameBufSize))), rawMsg('S', ""))
	f := newFramer(iotest.OneByteReader(bytes.NewReader(stream)), 1<<20)
	for range 2 {
		if _, _, err := f.next(); err != nil {
			t.Fatal(err)
		}
	}
	if cap(f.buf) > frameBufSize {
		t.Errorf("buffer of %d bytes kept, want %d", cap(f.buf), frameBufSize)
	}
}

// FuzzFramer: the framer never panics, never hands out a message over its
// limit, and hands out exactly the bytes it read, in order.
func FuzzFramer(f *testing.F) {
	f.Add(cat(rawMsg('Q', "SELECT 1\x00"), rawMsg('S', "")), uint16(100))
	f.Add(rawLen('Q', -5, "x"), uint16(10))
	f.Fuzz(func(t *testing.T, b []byte, max uint16) {
		fr := newFramer(iotest.HalfReader(bytes.NewReader(b)), int(max))
		var got []byte
		for {
			_, m, err := fr.next()
			if err != nil {
				break
			}
			if len(m)-frameHeaderLen > int(max) {
				t.Fatalf("message of %d bytes over the limit %d", len(m), max)
			}
			got = append(got, m...)
		}
		if !bytes.HasPrefix(b, got) {
			t.Fatal("messages are not the stream's bytes in order")
		}
	})
}

// TestFramer_Whole checks whole: true exactly when next would return a
// message without reading (the loop then sets no new idle deadline), so a
// partly buffered message is always read under a fresh one.
func TestFramer_Whole(t *testing.T) {
	batch := cat(rawMsg('P', "\x00SELECT 1\x00\x00\x00"), rawMsg('S', ""))
	for cut := 0; cut <= len(batch); cut++ {
		cr := &countingReader{r: bytes.NewReader(batch[:cut])}
		f := newFramer(cr, 1<<20)
		f.buf = append(f.buf, batch[:cut]...)
		cr.r = bytes.NewReader(nil)
		for f.buffered() > 0 {
			whole := f.whole()
			_, _, err := f.next()
			if whole && err != nil {
				t.Fatalf("cut %d: whole, but next failed: %v", cut, err)
			}
			if !whole && err == nil {
				t.Fatalf("cut %d: not whole, but next returned a message from the buffer", cut)
			}
			if err != nil {
				break
			}
		}
		if cr.n != 0 {
			t.Fatalf("cut %d: read %d bytes from an empty reader", cut, cr.n)
		}
	}
	if f := newFramer(bytes.NewReader(nil), 1<<20); f.whole() {
		t.Fatal("an empty buffer is not a whole message")
	}
}
