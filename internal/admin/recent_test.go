package admin

import (
	"testing"
	"time"
)

// TestRecent_OneAnalystCannotPushOthersOff (attack round 86's note: the
// dashboard's recent DP statements were the last 200 of everyone, so one
// analyst's free statements — refused or cached — pushed every other
// analyst's off the list). Each analyst keeps their newest
// recentPerAnalyst; the list is the newest of those, newest first.
func TestRecent_OneAnalystCannotPushOthersOff(t *testing.T) {
	m := NewMetrics([]string{"hospital"})
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	m.RecordDP(RecentStatement{At: t0, Analyst: "bob", Dataset: "hospital", Fingerprint: "bob1"})
	for i := range 5000 {
		m.RecordDP(RecentStatement{At: t0.Add(time.Duration(i+1) * time.Millisecond), Analyst: "alice", Dataset: "hospital", SQLState: "42501"})
	}
	got := m.Recent(30)
	if len(got) != recentPerAnalyst+1 {
		t.Fatalf("%d statements listed, want alice's newest %d and bob's", len(got), recentPerAnalyst)
	}
	for i := 1; i < len(got); i++ {
		if got[i].At.After(got[i-1].At) {
			t.Fatalf("not newest first at %d: %v after %v", i, got[i].At, got[i-1].At)
		}
	}
	if last := got[len(got)-1]; last.Analyst != "bob" || last.Fingerprint != "bob1" {
		t.Errorf("bob's statement is gone after 5,000 of alice's: the last listed is %+v", last)
	}
	if first := got[0]; first.Analyst != "alice" || !first.At.Equal(t0.Add(5000*time.Millisecond)) {
		t.Errorf("the newest listed is %+v, want alice's last", first)
	}
	if n := len(m.Recent(3)); n != 3 {
		t.Errorf("Recent(3) listed %d", n)
	}
}

// TestOutcome_Words: a DP-route statement that succeeded without a charge
// (EXPLAIN, public values) does not read as a charged answer.
func TestOutcome_Words(t *testing.T) {
	for want, rs := range map[string]RecentStatement{
		"answered":                {CostEpsilon: 0.5},
		"answered from the cache": {Cached: true},
		"answered without a charge (EXPLAIN or public values)": {},
		"refused: budget exhausted":                            {SQLState: "53400"},
		"failed after its charge":                              {SQLState: "XX000", CostEpsilon: 0.1},
	} {
		if got := outcome(rs); got != want {
			t.Errorf("outcome(%+v) = %q, want %q", rs, got, want)
		}
	}
}
