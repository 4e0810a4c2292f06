package release

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// streamingUpstream is fakeUpstream that also hands its rows one at a
// time (RowStreamer), in the order it holds them, and counts them.
type streamingUpstream struct {
	fakeUpstream
	streamed int
}

func (u *streamingUpstream) QueryEach(ctx context.Context, sql string, each func([]*string) error, args ...any) error {
	rows, err := u.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	for _, r := range rows {
		u.streamed++
		if err := each(r); err != nil {
			return err
		}
	}
	return nil
}

// TestRunSampleAgg_PrivateKeyStreamed: with an upstream that streams, a
// private-key sample-and-aggregate answer is read one group at a time
// (groupReader) and is the answer of TestRunSampleAgg_PrivateKey: the
// 40,000-unit group released near its corr, the one-unit group not
// (kept with probability ≤ δ_p ≈ 2.5e-7), rows sorted by key. Rows of a
// group that are not contiguous (the SQL orders them by key) or a level
// twice are an internal error after the charge.
func TestRunSampleAgg_PrivateKeyStreamed(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT diagnosis, corr(cost, age) FROM visits GROUP BY diagnosis")
	if err != nil {
		t.Fatal(err)
	}
	asthma, flu, rare := saGroupRows(plan, []string{"asthma"}, 0.1, 20000), saGroupRows(plan, []string{"flu"}, 0.4, 40000), saGroupRows(plan, []string{"rare"}, -0.9, 1)
	run := func(rows [][]*string) (*Result, *streamingUpstream, error) {
		up := &streamingUpstream{fakeUpstream: fakeUpstream{rows: rows}}
		req := Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1, Delta: 1e-6, Mechanism: policy.MechanismLaplace, Upstream: up}
		res, err := newTestReleaser(t, &memLedger{limit: 20}, 13).Run(context.Background(), req)
		return res, up, err
	}
	res, up, err := run(append(append(append([][]*string{}, asthma...), flu...), rare...))
	if err != nil {
		t.Fatal(err)
	}
	if up.streamed != len(asthma)+len(flu)+len(rare) {
		t.Errorf("%d rows streamed, want all %d", up.streamed, len(asthma)+len(flu)+len(rare))
	}
	if len(res.Rows) != 2 || *res.Rows[0][0] != "asthma" || *res.Rows[1][0] != "flu" {
		t.Fatalf("rows = %v, want asthma and flu (sorted) and not the one-unit group", res.Rows)
	}
	// Noise on flu: 4·2/(1024·0.9) < 0.009; P(|Z| > 0.2) < e^{-22}.
	if v, _ := strconv.ParseFloat(*res.Rows[1][1], 64); v < 0.2 || v > 0.6 {
		t.Errorf("flu: corr = %v, want 0.4 within 0.2", v)
	}
	// The SQL's order is by key; whatever the key order, the released
	// rows are sorted as the other path sorts them.
	if res, _, err = run(append(append(append([][]*string{}, flu...), rare...), asthma...)); err != nil || len(res.Rows) != 2 || *res.Rows[0][0] != "asthma" {
		t.Fatalf("flu, rare, asthma streamed: %v %v", res, err)
	}
	// Not contiguous, or a level twice: an internal error, after the
	// charge (the analyst sees the incident's fixed error).
	split := append(append(append([][]*string{}, flu[:1]...), asthma...), flu[1:]...)
	twice := append(append([][]*string{}, flu...), flu[0])
	for name, rows := range map[string][][]*string{"split": split, "twice": twice} {
		if _, _, err := run(rows); err == nil || !strings.Contains(err.Error(), "failed after its privacy charge") {
			t.Errorf("%s: %v, want the incident of an internal error", name, err)
		}
	}
}
