package rewrite

import (
	"context"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
)

type noQuery struct{}

func (noQuery) Query(context.Context, string, ...any) ([][]*string, error) { return nil, nil }

// TestGolden_ReleaseVerifies: every plan of the goldens, and each with
// automatic bounds and clipping, passes the release's checks of the
// planner's output (release/verify.go, pgemit.CheckInputs and the
// cross-checks of the calibration): a false refusal there would turn an
// accepted query into an internal error.
func TestGolden_ReleaseVerifies(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, gc := range loadGolden(t) {
		for _, opts := range []Options{{}, {AutoBounds: true, AutoClip: true}} {
			p, err := RewriteWith(gc.ds, gc.query, opts)
			if err != nil {
				continue
			}
			for _, mech := range []string{policy.MechanismLaplace, policy.MechanismGaussian} {
				err := release.Check(release.Request{Analyst: "alice", Dataset: gc.ds, Plan: p, Epsilon: 1, Delta: 1e-6,
					Mechanism: mech, Upstream: noQuery{}})
				if pe, ok := pgerr.As(err); ok && pe.Code == pgerr.InternalError {
					t.Errorf("%s (%+v, %s): %v", gc.name, opts, mech, err)
				}
				checked++
			}
		}
	}
	if checked < 200 {
		t.Errorf("only %d plans checked", checked)
	}
}
