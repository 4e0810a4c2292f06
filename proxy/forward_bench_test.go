package proxy

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// BenchmarkForward measures one forwarded catalog statement (SELECT 1,
// routed to the shadow catalog) through the proxy, one client, in the
// simple and the extended protocol: the proxy's per-statement cost on top
// of PostgreSQL's. cpu-ns/op is the process's CPU per statement (client
// and proxy): minus the direct run's, the proxy's own CPU per statement,
// which sets its throughput on a loaded machine. `make bench` compares
// throughput with PgBouncer.
func BenchmarkForward(b *testing.B) {
	dsn := shadowDB(b)
	ts := startServer(b, serverOpts{shadowDSN: dsn, mutate: func(c *Config) { c.Logger = zap.NewNop() }})
	ctx := context.Background()
	for _, target := range []struct{ name, dsn string }{
		{"proxy", ts.dsn("alice", "alice", "hospital")},
		{"direct", dsn},
	} {
		pc, err := pgconn.Connect(ctx, target.dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(target.name+"/simple", func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if _, err := pc.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		b.Run(target.name+"/extended", func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if r := pc.ExecParams(ctx, "SELECT 1", nil, nil, nil, nil).Read(); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		pc.Close(ctx)
	}
}

// cpuTime is the CPU time (user + system) this process has used: the
// benchmark's client and, through the proxy, the proxy itself (PostgreSQL
// runs in its own processes). The proxy's own CPU per statement is the
// difference between the proxy and direct runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
