package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// TestAttack51_ResetPlaceholderGrowsSettings (attack round 51, severity
// high: proxy memory without bound from one session of one analyst,
// outside max_memory_per_analyst_mb, before and without any charge).
//
// A session's settings are bounded (attack rounds 35 and 36): at most
// maxCustomSettings = 1,000 placeholder settings ("x.k") and
// maxSettingsBytes = 64 KiB of names and values, checked by
// checkSettingsRoom (proxy/settings.go:397) from set (settings.go:358,
// :364). But RESET of a placeholder the session does not have stores it
// through put without that check (session.reset, settings.go:457-460:
// `s.put(name, "", false)`; before commit 48fa93e it was
// `s.settings[name] = ""`, equally unchecked). The name is the analyst's
// text: pgsql's settingName (pgsql/session.go:332) keeps an identifier of
// any length (PostgreSQL would truncate it to 63 bytes), so
//
//	RESET x1.kkkk…(60,000 bytes); RESET x2.kkkk…; …
//
// adds ~60 KB to the session's settings per statement, about 1 MiB per
// Query message (MaxMessage), for as long as the session lives, and
// nothing counts it: memoryHeld (proxy/memory.go:32) counts prepared
// statements, portals, results, cursors and savepoints, not settings.
// Each of an analyst's max_connections_per_analyst sessions can do it, so
// one analyst fills the proxy's heap and every analyst's session ends with
// the process. It also makes every later transaction that changes a
// setting clone the whole map twice (changingSettings, session.go:159:
// txBegin and txCommit), so a `SET dp.epsilon = …` copies it each time.
//
// The test RESETs 2,000 placeholders of 1,000-byte names in one session
// (session.reset, as execSession runs it) and wants the session's
// settings kept within their bounds (or RESET refused with 54000); the
// wire test does the same through a client and measures the proxy's
// heap.
//
// Suggested fix: RESET of an unknown placeholder should go through
// checkSettingsRoom like SET (or not store anything: a placeholder that
// was never set reads as "" anyway), and setting names should be
// truncated or refused beyond NAMEDATALEN-1 = 63 bytes per part as
// PostgreSQL does; counting the settings (and txBegin/txCommit) in
// memoryHeld would make any remaining growth visible to the analyst's
// bound.
func TestAttack51_ResetPlaceholderGrowsSettings(t *testing.T) {
	s := newTestSession(t)
	name := strings.Repeat("k", 1000)
	refused := 0
	for i := 0; i < 2000; i++ {
		if err := s.reset(fmt.Sprintf("x%d.%s", i, name)); err != nil {
			if code(err) != "54000" {
				t.Fatalf("RESET %d: %v", i, err)
			}
			refused++
		}
		s.endQuery(false)
	}
	custom := 0
	for n := range s.settings {
		if _, known := settingDefs[n]; !known {
			custom++
		}
	}
	t.Logf("2,000 RESETs of placeholders (%d refused): the session holds %d placeholder settings, %d bytes of settings", refused, custom, settingsBytes(s.settings))
	if custom > maxCustomSettings || settingsBytes(s.settings) > maxSettingsBytes {
		t.Errorf("after RESET of 2,000 unknown placeholders the session holds %d placeholder settings and %d bytes of settings (bounds %d and %d): RESET stores a placeholder without checkSettingsRoom",
			custom, settingsBytes(s.settings), maxCustomSettings, maxSettingsBytes)
	}
}

// TestAttack51_ResetPlaceholderGrowsSettingsWire: the same through a
// client: 1,500 RESETs of 60 KB names in 100 Query messages of ~900 KB.
// The proxy's heap grows by ~90 MiB for this one session (the bound is
// 64 KiB of settings); nothing is charged or refused.
func TestAttack51_ResetPlaceholderGrowsSettingsWire(t *testing.T) {
	ts := startServer(t, serverOpts{})
	pc := ts.connect(t)
	name := strings.Repeat("k", 60000)
	before := heapAlloc()
	for i := 0; i < 100; i++ {
		var b strings.Builder
		for j := 0; j < 15; j++ {
			fmt.Fprintf(&b, "RESET x%d_%d.%s;", i, j, name)
		}
		if _, err := execAll(t, pc, b.String()); err != nil {
			t.Logf("refused at message %d: %v", i, err)
			break
		}
	}
	held := heapAlloc() - before
	_, err := execAll(t, pc, "SET dp.epsilon = 0.2")
	t.Logf("proxy heap grew by %d MiB; SET dp.epsilon afterwards: %v", held>>20, err)
	if held > 8<<20 {
		t.Errorf("one session's RESET placeholders hold %d MiB of the proxy's memory (settings bound %d KiB), outside max_memory_per_analyst_mb", held>>20, maxSettingsBytes>>10)
	}
}
