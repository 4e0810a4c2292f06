package linerate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TestLimiter: an owner writes its burst, then nothing (at a rate too slow
// to refill during the test); those left out are counted once, on the next
// line written; another owner is unaffected; a nil Limiter allows all.
func TestLimiter(t *testing.T) {
	l := New(1e-9, 3)
	for i := range 3 {
		if !l.Allow("alice") {
			t.Fatalf("line %d of the burst refused", i)
		}
	}
	for range 5 {
		if l.Allow("alice") {
			t.Fatal("a line past the burst allowed")
		}
	}
	if !l.Allow("bob") {
		t.Fatal("bob's first line refused after alice's burst")
	}
	if n := l.Dropped("alice"); n != 5 {
		t.Fatalf("Dropped = %d, want 5", n)
	}
	if n := l.Dropped("alice"); n != 0 {
		t.Fatalf("Dropped after reporting = %d, want 0", n)
	}
	var nl *Limiter
	if !nl.Allow("x") || nl.Dropped("x") != 0 {
		t.Fatal("a nil Limiter limits")
	}
}

// TestCore: through a logger, an owner's Info and Warn lines stop after
// the burst, Debug and Error lines pass, and the first line written after
// some were left out says how many.
func TestCore(t *testing.T) {
	var buf bytes.Buffer
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = ""
	base := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&buf), zapcore.DebugLevel)
	l := New(1e-9, 2)
	log := zap.New(l.Core(base, "alice")).With(zap.String("analyst", "alice"))
	for range 10 {
		log.Info("refused")
	}
	log.Warn("refused")
	log.Debug("debug line")
	log.Error("error line")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 2 Info, the Debug and the Error:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[2], `"lines_not_logged":9`) || !strings.Contains(lines[2], "debug line") {
		t.Errorf("the line after 9 left out does not count them: %s", lines[2])
	}
	if strings.Contains(lines[3], NotLoggedKey) {
		t.Errorf("the count was reported twice: %s", lines[3])
	}
}

// TestNewBounded: a limiter of client networks keeps at most maxOwners of
// them; the next one makes it forget them all (so a network past its
// burst starts afresh, which bounds the lines by the networks a flood
// comes from rather than the limiter's memory by them).
func TestNewBounded(t *testing.T) {
	l := NewBounded(1e-9, 1, 3)
	if !l.Allow("10.0.0.1") || l.Allow("10.0.0.1") {
		t.Fatal("the first network's burst of 1 not kept")
	}
	l.Allow("10.0.0.2")
	l.Allow("10.0.0.3")
	if l.Allow("10.0.0.1") {
		t.Fatal("a network forgotten before the limiter held more than maxOwners")
	}
	if n := len(l.owners); n != 3 {
		t.Fatalf("%d owners kept, want 3", n)
	}
	l.Allow("10.0.0.4")
	if n := len(l.owners); n != 1 {
		t.Fatalf("%d owners kept after the fourth, want 1", n)
	}
	if !l.Allow("10.0.0.1") {
		t.Fatal("a forgotten network did not start afresh")
	}
}

// TestWithTotal: NewBounded's owners are anyone's networks, and one who
// holds many (an IPv6 /48 is 65,536 /64s) had a fresh bucket in each, and
// every bucket fresh again past maxOwners: 10,000 networks of one line
// each wrote 10,000 lines. WithTotal bounds all owners' lines together,
// counts those it leaves out on their owner, and keeps each owner's own
// bucket.
func TestWithTotal(t *testing.T) {
	l := NewBounded(1e-9, 2, 100).WithTotal(1e-9, 50)
	written := 0
	for i := range 10000 {
		if l.Allow(fmt.Sprintf("10.%d.%d.1", i/256, i%256)) {
			written++
		}
	}
	if written != 50 {
		t.Errorf("%d lines of 10,000 networks written, want the total's burst of 50", written)
	}
	if d := l.Dropped("10.39.15.1"); d != 1 { // the last network's line was left out and counted
		t.Errorf("a line the total left out counted %d on its network, want 1", d)
	}
	// One network alone still stops at its own burst.
	m := NewBounded(1e-9, 2, 100).WithTotal(1e-9, 50)
	n := 0
	for range 10 {
		if m.Allow("10.0.0.1") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("one network wrote %d lines, want its burst of 2", n)
	}
}
