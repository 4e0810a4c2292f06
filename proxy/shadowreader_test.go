package proxy

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestShadowReader: under pgproto3's frontend, small messages and a large
// DataRow pass; an ErrorResponse or NoticeResponse over maxShadowError is
// refused before its body is read (errShadowErrorTooLong), however the
// bytes arrive (whole, one byte at a time, in halves), and every read
// after it fails.
func TestShadowReader(t *testing.T) {
	big := bytes.Repeat([]byte("x"), maxShadowError+1)
	row := (&pgproto3.DataRow{Values: [][]byte{big}})
	ready := &pgproto3.ReadyForQuery{TxStatus: 'I'}
	enc := func(msgs ...pgproto3.BackendMessage) []byte {
		var b []byte
		for _, m := range msgs {
			var err error
			if b, err = m.Encode(b); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	bigErr := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "22P02", Message: string(big)}
	smallErr := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "22P02", Message: "short"}
	for _, tc := range []struct {
		name    string
		stream  []byte
		okFirst int // messages received before the refusal (-1: none refused)
	}{
		{"a large row and a short error pass", enc(row, smallErr, ready), -1},
		{"a long error is refused", enc(ready, bigErr, ready), 1},
		{"a long notice is refused", enc(&pgproto3.NoticeResponse{Severity: "NOTICE", Message: string(big)}, ready), 0},
	} {
		for _, how := range []struct {
			name string
			r    func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"bytes", iotest.OneByteReader}, {"halves", iotest.HalfReader}} {
			sr := &shadowReader{r: how.r(bytes.NewReader(tc.stream))}
			f := pgproto3.NewFrontend(sr, io.Discard)
			got := 0
			var err error
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			for {
				var m pgproto3.BackendMessage
				if m, err = f.Receive(); err != nil {
					break
				}
				got++
				if _, ok := m.(*pgproto3.ReadyForQuery); ok && tc.okFirst < 0 && got == 3 {
					break
				}
			}
			if tc.okFirst < 0 {
				if err != nil || got != 3 {
					t.Errorf("%s, %s: %d messages, %v; want all 3", tc.name, how.name, got, err)
				}
				continue
			}
			if !errors.Is(err, errShadowErrorTooLong) || got != tc.okFirst {
				t.Errorf("%s, %s: %d messages then %v; want %d then the refusal", tc.name, how.name, got, err, tc.okFirst)
			}
			// Refused at its header: no buffer of the body's size (pgproto3
			// allocates one before it reads a body).
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > maxShadowError/2 {
				t.Errorf("%s, %s: %d bytes allocated receiving it: the body's buffer was made", tc.name, how.name, d)
			}
			if n, err := sr.Read(make([]byte, 8)); n != 0 || !errors.Is(err, errShadowErrorTooLong) {
				t.Errorf("%s, %s: a read after the refusal gave %d, %v", tc.name, how.name, n, err)
			}
		}
	}
}
