package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLog_JSONLinesToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Config{Path: path, MaxSizeMB: 1, MaxBackups: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Statement(Statement{Analyst: "alice", Dataset: "hospital", Route: "dp", Fingerprint: "f1", SQLState: "00000", Duration: time.Millisecond,
		DP: true, CostEpsilon: 0.1, Charge: "c1"})
	l.Statement(Statement{Analyst: "alice", Dataset: "hospital", Route: "dp", Fingerprint: "f2", SQLState: "53400"})
	l.Charge("alice", "hospital", "c1", 7, 0.1, 0, 2.9, 1e-6)
	l.Refusal("alice", "hospital", "c2", "53400", "budget_exhausted", 5, 0)
	l.Incident("bob", "hospital", "c3", "upstream", "22012", 8, true)
	l.BudgetChange("grant", "alice", "hospital", "root@host", 1, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
			t.Errorf("time %v: %v", m["time"], err)
		}
		if m["dataset"] != "hospital" || m["outcome"] == nil {
			t.Errorf("line without dataset or outcome: %v", m)
		}
		events = append(events, m["event"].(string)+"/"+m["outcome"].(string))
	}
	want := "statement/answered statement/refused charge/charged refusal/budget_exhausted incident/incident budget_change/grant"
	if got := strings.Join(events, " "); got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode = %v, want 0600", st.Mode().Perm())
	}
}

func TestOpen_Errors(t *testing.T) {
	if l, err := Open(Config{}, nil); l != nil || err != nil {
		t.Errorf("Open with no path = %v, %v; want nil, nil (off)", l, err)
	}
	var nilLog *Log
	nilLog.Statement(Statement{}) // a nil log writes nothing and does not panic
	_, err := Open(Config{Path: "/nonexistent-dir/audit.log"}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open in a missing directory = %v", err)
	}
	var buf bytes.Buffer
	l, err := Open(Config{Path: "stderr"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	l.BudgetChange("reset", "alice", "hospital", "me", 2, 0)
	if !strings.Contains(buf.String(), `"event":"budget_change"`) {
		t.Errorf("stderr sink got %q", buf.String())
	}
}
