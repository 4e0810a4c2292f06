package integration

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/noise"
)

// TestGaussian_EndToEnd selects the Gaussian mechanism for a session and
// checks the released count against the truth (one row per patient, so
// contribution bounding removes nothing), the NOTICE's δ, and the ledger.
func TestGaussian_EndToEnd(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, noticesSoFar := connectWithNotices(t, ctx, analystDSN("alice"))
	if _, err := c.Exec(ctx, "SET dp.mechanism = gaussian; SET dp.epsilon = 0.5; SET dp.delta = 1e-7"); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := c.QueryRow(ctx, "SELECT COUNT(*) FROM patients WHERE region = 'east'").Scan(&got); err != nil {
		t.Fatal(err)
	}
	var truth int64
	up := connect(t, ctx, env.upstreamDSN)
	if err := up.QueryRow(ctx, "SELECT count(*) FROM patients WHERE region = 'east'").Scan(&truth); err != nil {
		t.Fatal(err)
	}
	// The same mechanism the proxy builds (one measure: ε = 0.5, δ = 1e-7,
	// L2 = 1, integer); its exact quantile at 1 − 1e-9 bounds the error
	// except with probability 1e-9.
	m, err := noise.NewGaussian(noise.Params{Epsilon: 0.5, Delta: 1e-7, Sensitivity: 1, Integer: true, Cells: 1})
	if err != nil {
		t.Fatal(err)
	}
	if k := m.HalfWidth(1 - 1e-9); math.Abs(float64(got-truth)) > k {
		t.Fatalf("gaussian count = %d, truth %d: further than %v", got, truth, k)
	}
	notices := noticesSoFar()
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "dp: epsilon 0.5, delta 1e-07 spent (pure)") {
		t.Fatalf("notices = %q", notices)
	}
	var events string
	l := connect(t, ctx, ledgerDSN())
	if err := l.QueryRow(ctx, "SELECT events::text FROM dpproxy_ledger.charge WHERE analyst = 'alice' ORDER BY id DESC LIMIT 1").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(events, "gaussian") {
		t.Fatalf("ledger events = %s, want a gaussian release", events)
	}
}
