package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/pgsql"
)

// TestAttack36_SetLocalGrowsCommittedSettings (medium): round 35 bounds a
// session's settings at 64 KiB (checkSettingsRoom), but it measures only
// s.settings. Inside a transaction block a plain SET also writes
// s.txCommit (the settings COMMIT keeps), and SET LOCAL writes s.settings
// alone; so `SET x.kN = <60 KB>; SET LOCAL x.kN = ”` leaves s.settings
// small and adds 60 KB to s.txCommit each time. Up to the 1,000
// placeholder names, one transaction's committed settings reach about
// 60 MiB, and COMMIT makes that map the session's settings: a thousand
// times the bound, held for the session's life by each of an analyst's
// max_connections_per_analyst sessions (every later SET of any setting,
// dp.epsilon included, then fails with 54000, and RESET ALL silently
// keeps them). The fix: check the room in txCommit too (or the larger of
// the two maps) when a SET writes it.
func TestAttack36_SetLocalGrowsCommittedSettings(t *testing.T) {
	s := newTestSession(t)
	s.begin("")
	val := strings.Repeat("v", 60000)
	var refused error
	n := 0
	for ; n < 300 && refused == nil; n++ {
		name := fmt.Sprintf("x.k%d", n)
		if _, refused = s.setStmt(&pgsql.SessionStmt{Kind: pgsql.SessionSet, Name: name, Value: val}, name); refused != nil {
			break
		}
		setStmt(t, s, name, "", true)
	}
	if tag, _ := s.commit(); tag != "COMMIT" {
		t.Fatalf("COMMIT: %s", tag)
	}
	t.Logf("%d SET/SET LOCAL pairs accepted (refused: %v); settings after COMMIT: %d bytes", n, refused, settingsBytes(s.settings))
	if got := settingsBytes(s.settings); got > maxSettingsBytes {
		t.Errorf("after COMMIT the session's settings hold %d bytes (bound %d): SET LOCAL after SET let the committed settings (txCommit) grow past the bound", got, maxSettingsBytes)
	}
}

// TestAttack36_SetLocalGrowsCommittedSettingsWire: the same through a
// client; the session then holds tens of MiB of the proxy's heap.
func TestAttack36_SetLocalGrowsCommittedSettingsWire(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	val := strings.Repeat("v", 60000)
	before := heapAlloc()
	if _, err := execAll(t, pc, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if _, err := execAll(t, pc, fmt.Sprintf("SET x.k%d = '%s'; SET LOCAL x.k%d = ''", i, val, i)); err != nil {
			t.Logf("refused at %d: %v", i, err)
			break
		}
	}
	if _, err := execAll(t, pc, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	held := heapAlloc() - before
	_, err := execAll(t, pc, "SET dp.epsilon = 0.2")
	t.Logf("proxy heap grew by %d MiB; SET dp.epsilon afterwards: %v", held>>20, err)
	if held > 8<<20 {
		t.Errorf("one session's committed settings hold %d MiB of the proxy's memory (bound %d KiB)", held>>20, maxSettingsBytes>>10)
	}
}
