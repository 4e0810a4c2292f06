package release

import (
	"context"
	"fmt"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// BenchmarkPartitionSelection_Candidates measures the proxy's CPU per
// candidate group of partition selection (dpplan.CandidateCost): 100,000
// groups of a private key, three units each (none passes the threshold),
// through Run with the production noise (crypto/rand). Reported as
// ns/candidate.
func BenchmarkPartitionSelection_Candidates(b *testing.B) {
	t := &testing.T{}
	ds := loadPolicy(t)
	plan := mustRewrite(t, ds, "SELECT diagnosis, COUNT(*), AVG(cost) FROM visits GROUP BY diagnosis")
	const n = 100_000
	rows := make([][]*string, n)
	for i := range rows {
		// key, COUNT(*), AVG's sum and count, distinct units
		rows[i] = []*string{s(fmt.Sprintf("code-%07d", i)), s("3"), s("1234.5"), s("3"), s("3")}
	}
	up := &fakeUpstream{rows: rows}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := newTestReleaser(t, &memLedger{limit: 1000}, uint64(i+1))
		r.testOnlyRand = nil
		res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6,
			Mechanism: policy.MechanismLaplace, Upstream: up})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Rows) != 0 {
			b.Fatalf("%d groups of three units released", len(res.Rows))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/candidate")
}
