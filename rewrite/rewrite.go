package rewrite

import (
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Rewrite validates one DP statement against the policy and plans it. Every
// error is a *pgerr.Error with a SQLSTATE and a hint.
//
// The statement is lexed by our PostgreSQL lexer, normalized (normalize.go)
// into text the TiDB parser reads with the same structure, parsed, and then
// checked and planned by this package (build.go, pred.go); Plan.SQL comes
// from our emitter (pgemit/bounds_sql.go) over the plan, never from analyst text.
func Rewrite(ds *policy.Dataset, stmt string) (*Plan, error) {
	if ds == nil {
		return nil, pgerr.New(pgerr.InternalError, "rewrite: no policy")
	}
	return plan(ds, stmt, Options{})
}

// Options are the session settings that change a plan (SET dp.…).
type Options struct {
	// OutputRange, when HasOutputRange, is SET dp.output_range = 'lo,hi':
	// the range sample-and-aggregate clips block answers to (sampleagg.go).
	OutputLower, OutputUpper float64
	HasOutputRange           bool
	// SampleBlocks, when > 0, is SET dp.sample_blocks = k: the number of
	// sample-and-aggregate blocks (else k is chosen from a noisy unit count).
	SampleBlocks int
	// QuantileMethod is SET dp.quantile_method when it changes the plan's
	// shape: QuantileSample answers quantiles by sample-and-aggregate
	// (quantile_expr.go). The other methods are applied after planning
	// (WithQuantiles) and leave it "".
	QuantileMethod string
	// MaxRowsPerUnit and MaxGroupsPerUnit, when > 0, are SET
	// dp.max_rows_per_unit / dp.max_groups_per_unit: contribution bounds
	// tighter than the policy's for this session's queries (dpplan/bounds.go,
	// "Bounds per query"); looser ones are refused.
	MaxRowsPerUnit, MaxGroupsPerUnit int
	// NoBias is SET dp.bias = off: no bias estimate of contribution
	// bounding (bias.go), and its share of ε goes to the measures.
	NoBias bool
	// AutoBounds is SET dp.contribution = auto (or the policy's default):
	// the plan carries candidate plans with fewer rows per unit, one of
	// which release chooses by DP (autobounds.go). Ignored when the session
	// sets dp.max_rows_per_unit.
	AutoBounds bool
	// AutoClip is SET dp.clipping = auto (or the policy's default): the
	// plan carries a histogram of its summed columns from which release
	// chooses tighter clamping bounds by DP, and a way to plan the
	// statement again with them (autoclip.go).
	AutoClip bool
	// TimeZone is the session's TimeZone when it is not UTC ("" for
	// UTC), and Location its rules as PostgreSQL reads them, or nil when
	// dpproxy cannot reproduce them (numeric offsets): timestamptz
	// literals compared with date columns are folded in it (datefold.go).
	TimeZone string
	Location *time.Location
}

// RewriteWith is Rewrite with session options.
func RewriteWith(ds *policy.Dataset, stmt string, opts Options) (*Plan, error) {
	if ds == nil {
		return nil, pgerr.New(pgerr.InternalError, "rewrite: no policy")
	}
	return plan(ds, stmt, opts)
}
