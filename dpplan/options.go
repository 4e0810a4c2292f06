package dpplan

import "time"

// Options are the session settings that change a plan (SET dp.…).
type Options struct {
	// SampleBlocks, when > 0, is SET dp.sample_blocks = k: the number of
	// sample-and-aggregate blocks (else k is chosen from a noisy unit count).
	SampleBlocks int
	// MaxRowsPerUnit and MaxGroupsPerUnit, when > 0, are SET
	// dp.max_rows_per_unit / dp.max_groups_per_unit: contribution bounds
	// tighter than the policy's for this session's queries (dpplan/bounds.go,
	// "Bounds per query"); looser ones are refused.
	MaxRowsPerUnit, MaxGroupsPerUnit int
	// NoBias is SET dp.bias = off: no bias estimate of contribution
	// bounding (rewrite/bias.go), and its share of ε goes to the measures.
	NoBias bool
	// AutoBounds is SET dp.contribution = auto (or the policy's default):
	// the plan carries candidate plans with fewer rows per unit, one of
	// which release chooses by DP (rewrite/autobounds.go). Ignored when the session
	// sets dp.max_rows_per_unit.
	AutoBounds bool
	// OneWeight: MaxRowsPerUnit and MaxGroupsPerUnit are 1 because
	// dp.contribution = auto bounds averages and deviations alone so
	// (rewrite/autobounds.go), not because the session set them: the plan
	// says so (Plan.OneWeight), and so does a plan made again with
	// clamping bounds chosen by DP (rewrite.Replan).
	OneWeight bool
	// AutoClip is SET dp.clipping = auto (or the policy's default): the
	// plan carries a histogram of its summed columns from which release
	// chooses tighter clamping bounds by DP, and a way to plan the
	// statement again with them (rewrite/autoclip.go, release/autoclip.go).
	AutoClip bool
	// TimeZone is the session's TimeZone when it is not UTC ("" for
	// UTC), and Location its rules as PostgreSQL reads them, or nil when
	// dpproxy cannot reproduce them (numeric offsets): timestamptz
	// literals compared with date columns are folded in it (rewrite/datefold.go).
	TimeZone string
	Location *time.Location
	// Now is the statement's start: now(), current_date and the other
	// relative dates of the statement are folded to constants at it
	// (rewrite/reldate.go). Zero: the planner reads the clock once per
	// statement. Plans that read it are not kept by the proxy's plan cache.
	Now time.Time
}
