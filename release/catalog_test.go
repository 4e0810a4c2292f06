package release

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// staleUpstream answers as internal/upstream.Pool does once the policy's
// column types changed: the first query is withheld with the error of
// pgerr.ErrCatalogChanged, and from then on Stale says so.
type staleUpstream struct {
	fakeUpstream
	stale bool
}

func catalogChangedError() error {
	return pgerr.New(pgerr.ObjectNotInPrerequisiteState, "the data database's tables changed since dpproxy started").
		WithHint("restart dpproxy").Wrap(pgerr.ErrCatalogChanged)
}

func (u *staleUpstream) Query(ctx context.Context, sql string, args ...any) ([][]*string, error) {
	u.fakeUpstream.Query(ctx, sql, args...)
	u.stale = true
	return nil, catalogChangedError()
}

func (u *staleUpstream) Stale() error {
	if u.stale {
		return catalogChangedError()
	}
	return nil
}

// TestRun_CatalogChanged: a query withheld because the column types
// changed since start-up keeps its charge but is not an incident (the
// error is a fact of pg_catalog, not of a row) and tells the analyst so;
// every later query is refused before its charge, without the upstream.
func TestRun_CatalogChanged(t *testing.T) {
	ds := loadPolicy(t)
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 3)
	up := &staleUpstream{}
	req := Request{Analyst: "alice", Dataset: ds, Plan: groupedPlan(ds), Epsilon: 0.1, Mechanism: policy.MechanismLaplace, Upstream: up, NoCache: true}
	_, err := r.Run(context.Background(), req)
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.ObjectNotInPrerequisiteState || !errors.Is(err, pgerr.ErrCatalogChanged) || errors.Is(err, ErrIncident) || pe.Detail == "" {
		t.Fatalf("Run() = %v, want 55000 with a detail, not an incident", err)
	}
	if len(led.incidents) != 0 || led.suspended {
		t.Fatalf("recorded as an incident: %+v", led.incidents)
	}
	if math.Abs(led.spent-0.1) > 1e-12 || len(led.released) != 0 {
		t.Fatalf("spent %v, %d released; want the charge to stand with no answer", led.spent, len(led.released))
	}
	calls := len(up.calls)
	req.Epsilon = 0.2
	if _, err := r.Run(context.Background(), req); !errors.Is(err, pgerr.ErrCatalogChanged) {
		t.Fatalf("the next query: %v, want ErrCatalogChanged", err)
	}
	if len(up.calls) != calls || math.Abs(led.spent-0.1) > 1e-12 || len(led.reserved) != 1 {
		t.Fatalf("the next query reached the upstream (%d calls) or was charged (spent %v, %d charges)", len(up.calls)-calls, led.spent, len(led.reserved))
	}
}
