package release

import (
	"context"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestRun_DerivedKeys checks that GROUP BY width_bucket and date_trunc
// release exactly their public domains (every bucket and month, including
// those absent from the data, and nothing else), in domain order.
func TestRun_DerivedKeys(t *testing.T) {
	ds := loadPolicy(t)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"SELECT width_bucket(age, 0, 100, 10), COUNT(*) FROM visits GROUP BY 1",
			[]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}},
		{"SELECT date_trunc('year', visit_date), COUNT(*) FROM visits GROUP BY 1",
			[]string{"2020-01-01 00:00:00+00", "2021-01-01 00:00:00+00", "2022-01-01 00:00:00+00", "2023-01-01 00:00:00+00", "2024-01-01 00:00:00+00"}}, // timestamptz, as PostgreSQL types date_trunc of a date
	} {
		plan, err := rewrite.RewriteWith(ds, tc.query, rewrite.Options{NoBias: true})
		if err != nil {
			t.Fatal(err)
		}
		// The upstream returns one in-domain group and one that is not in
		// the domain (which must not be released).
		up := &fakeUpstream{rows: [][]*string{{s(tc.want[1]), s("10")}, {s("99"), s("10")}}}
		r := newTestReleaser(t, &memLedger{limit: 10}, 5)
		res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) != len(tc.want) {
			t.Fatalf("%s: %d rows, want %d", tc.query, len(res.Rows), len(tc.want))
		}
		for i, row := range res.Rows {
			if *row[0] != tc.want[i] {
				t.Fatalf("%s: row %d key %s, want %s", tc.query, i, *row[0], tc.want[i])
			}
			if _, err := strconv.ParseInt(*row[1], 10, 64); err != nil {
				t.Fatalf("%s: count %s is not an integer", tc.query, *row[1])
			}
		}
	}
}
