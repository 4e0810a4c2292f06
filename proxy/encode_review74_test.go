package proxy

import (
	"encoding/binary"
	"testing"
	"time"
	_ "time/tzdata" // the zone below on any machine
)

// TestReview74_TimestamptzBinaryDependsOnProxyLocalZone (medium; rule 3 and
// correctness of released keys: a binary timestamptz the proxy sends is a
// different instant from the text PostgreSQL wrote, depending on the
// proxy process's own TZ).
//
// parseISO (proxy/encode.go:230-246, commit 482ceb5) parses a timestamp's
// text with its year replaced by 2000 and then rebuilds it with
// time.Date(y, …, t.Location()). For a numeric offset such as "-05",
// time.Parse returns time.Local as the location whenever Local had that
// offset at the parsed instant — in year 2000 — and time.Date then reads
// the wall clock in Local's rules of year y, not at the printed offset.
// With the proxy running under TZ=America/New_York, a session whose
// TimeZone is e.g. America/Bogota (always -05) gets
// "2010-03-20 12:00:00-05" (17:00 UTC) encoded as 16:00 UTC (New York
// was already on EDT on 20 March 2010, not on 20 March 2000), and every
// -05 value before 1883 moves by New York's local mean time (3 min 58 s).
// Before the commit, time.Parse with the real year gave the right instant
// whatever Local was.
//
// Suggested fix: keep the parsed offset, not the location: take
// _, off := t.Zone() and build time.Date(y, …, time.UTC).Add(-off) (or
// time.FixedZone("", off)), so the wall clock is read at the printed
// offset only.
func TestReview74_TimestamptzBinaryDependsOnProxyLocalZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatalf("America/New_York: %v", err) // time/tzdata is linked in
	}
	saved := time.Local
	time.Local = ny
	t.Cleanup(func() { time.Local = saved })
	pgEpoch2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		text string
		utc  time.Time // the instant PostgreSQL means
	}{
		{"2010-03-20 12:00:00-05", time.Date(2010, 3, 20, 17, 0, 0, 0, time.UTC)},
		{"1850-01-01 00:00:00-05", time.Date(1850, 1, 1, 5, 0, 0, 0, time.UTC)},
	} {
		b, err := encodeBinary(oidTimestamptz, c.text)
		if err != nil {
			t.Fatalf("encodeBinary(%q): %v", c.text, err)
		}
		got := int64(binary.BigEndian.Uint64(b))
		want := (c.utc.Unix()-pgEpoch2000.Unix())*1_000_000 + int64(c.utc.Nanosecond()/1000)
		if got != want {
			t.Errorf("timestamptz %q with the proxy's TZ=America/New_York is sent as %s UTC, want %s UTC (off by %v)",
				c.text, pgEpoch2000.Add(time.Duration(got)*time.Microsecond).Format(time.DateTime),
				c.utc.Format(time.DateTime), time.Duration(got-want)*time.Microsecond)
		}
	}
}
