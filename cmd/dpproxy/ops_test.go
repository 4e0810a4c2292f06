package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/admin"
	"github.com/dpproxy/dpproxy/internal/audit"
	"github.com/dpproxy/dpproxy/proxy"
)

// The per-statement hook on the forwarding path: metrics only (the admin
// endpoint on, no audit log) must not allocate; with the audit log each
// statement costs a fingerprint and a JSON line.
func TestOpsObserver_MetricsOnlyAllocatesNothing(t *testing.T) {
	o := &ops{metrics: admin.NewMetrics([]string{"hospital"})}
	obs := o.observer()
	ev := proxy.StatementEvent{Analyst: "alice", Dataset: "hospital", Route: "catalog", Duration: time.Millisecond}
	if n := testing.AllocsPerRun(1000, func() { obs.Statement(ev) }); n != 0 {
		t.Errorf("a catalog statement allocates %v times with metrics on, want 0", n)
	}
	if (&ops{}).observer() != nil {
		t.Error("with neither metrics nor audit the proxy must get no observer")
	}
}

func BenchmarkOpsObserver(b *testing.B) {
	ev := proxy.StatementEvent{Analyst: "alice", Dataset: "hospital", Route: "catalog", Duration: time.Millisecond}
	b.Run("metrics", func(b *testing.B) {
		obs := (&ops{metrics: admin.NewMetrics([]string{"hospital"})}).observer()
		b.ReportAllocs()
		for b.Loop() {
			obs.Statement(ev)
		}
	})
	b.Run("metrics+audit", func(b *testing.B) {
		l, err := audit.Open(audit.Config{Path: filepath.Join(b.TempDir(), "audit.log")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		obs := (&ops{metrics: admin.NewMetrics([]string{"hospital"}), audit: l}).observer()
		b.ReportAllocs()
		for b.Loop() {
			obs.Statement(ev)
		}
	})
}
