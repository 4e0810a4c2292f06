// Privacy-critical: needs DP review.

package release

import (
	"reflect"
	"slices"
	"strconv"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// # The planner is not trusted with privacy
//
// The planner (package rewrite) turns the analyst's text into a plan and
// emits its SQL. Before a plan is calibrated, verifyPlan checks that
// every query the release will run upstream is exactly what the emitter
// (package pgemit) writes for the plan as it stands, from emitter inputs
// that agree with the policy:
//
//   - the table the SQL reads is the policy's protected table (name,
//     schema, unit column); its contribution bounds are the plan's rows
//     per unit and at most the policy's groups per unit (joins: see
//     below); every bound's text is the number the bounds are computed
//     from;
//   - every piece of plan data the emitter pastes into the SQL as it
//     stands is a constant, a quoted column of that table or a word of a
//     closed set (pgemit.CheckInputs): no condition, key or value can read
//     other rows (a subquery, a function reading a table);
//   - Plan.SQL, the histogram of automatic clipping (AutoClip.SQL), the
//     profile of automatic bounds (AutoBounds.CombinedSQL) and every
//     candidate plan are re-emitted and must be byte-equal.
//
// mechanisms (release.go) then computes every sensitivity from the plan's
// fields and the policy and cross-checks the planner's (L∞ from the
// bounds, a sum's range against its expression's interval or its column's
// bounds in that table, L0 and rows per unit against the policy). So a
// planner bug can make a release answer another query than the analyst
// asked, or refuse one, but not release more than the charge
// (verify_attack_test.go): the privacy argument is this package, dpplan,
// pgemit, sensitivity, noise and accountant. Joins are no exception: the
// joined relation's table (its unit, its limits, its columns' names and
// types) is recomputed from the policy and the plan's join by
// dpplan.VerifyJoin, which also checks the facts the join shapes' argument
// rests on (dpplan/join.go). The work bound is checked apart (verifyWork).
func verifyPlan(ds *policy.Dataset, plan *dpplan.Plan) error {
	if plan == nil {
		return pgerr.New(pgerr.InternalError, "internal error: no plan")
	}
	bad := func(what string) error {
		return pgerr.New(pgerr.InternalError, "internal error: the plan's %s does not verify", what)
	}
	t, where := dpplan.SourceOf(plan)
	pt, ok := ds.Table(plan.Table)
	switch {
	case t == nil:
		return bad("emitter input")
	case plan.Join != nil:
		if err := verifyJoined(ds, plan, t); err != nil {
			return err
		}
	case !ok || pt.Public || t.Name != pt.Name || t.Schema != pt.Schema || t.UnitColumn != pt.UnitColumn || t.UnitPGType != pt.UnitPGType:
		return bad("table")
	case t.MaxGroupsPerUnit < 1 || t.MaxGroupsPerUnit > pt.MaxGroupsPerUnit:
		return bad("groups per unit")
	case t.MaxRowsPerUnit != plan.RowsPerUnit:
		return bad("rows per unit")
	}
	if plan.MaxGroupsPerUnit < 1 || plan.MaxGroupsPerUnit > t.MaxGroupsPerUnit {
		return bad("groups per unit")
	}
	if err := checkMinUnits(ds, plan); err != nil { // minunits.go
		return err
	}
	for _, c := range t.Columns {
		if !c.HasBounds || !c.Type.Numeric() {
			continue
		}
		lo, err1 := strconv.ParseFloat(c.Lower, 64)
		hi, err2 := strconv.ParseFloat(c.Upper, 64)
		if err1 != nil || err2 != nil || lo != c.LowerNum || hi != c.UpperNum {
			return bad("column bounds")
		}
	}
	if sa := plan.SampleAgg; sa != nil {
		// Each statistic's measure has the output range its SQL clips
		// block answers to (sensitivity u − l: saMechanisms).
		for i, c := range sa.Calls {
			if i >= len(plan.Measures) || plan.Measures[i].Kind != dpplan.MeasureSampleAgg ||
				plan.Measures[i].Lower != c.Lower || plan.Measures[i].Upper != c.Upper {
				return bad("sample-and-aggregate statistics")
			}
		}
	}
	if err := pgemit.CheckInputs(t, plan, where); err != nil {
		return bad("SQL fragments")
	}
	if (plan.Auto != nil || plan.Clip != nil) && plan.HasQuantile() {
		// The calibration emits a quantile method's SQL for the plan
		// itself only; the planner never builds these together.
		return bad("automatic bounds of quantiles")
	}
	if plan.Auto != nil && !dpplan.WeightsOnly(plan) {
		// Automatic contribution bounds are argued for plans bounded by
		// weights alone (rewrite/autobounds.go): no joins, no private
		// keys, no sample-and-aggregate (TestAttack47_*).
		return bad("automatic contribution bounds of this shape")
	}
	want := ""
	if plan.SampleAgg != nil {
		want = pgemit.SampleAggSQL(t, plan, where)
	} else {
		want = pgemit.SQL(t, plan, where)
	}
	if plan.SQL != want {
		return bad("SQL")
	}
	if c := plan.Clip; c != nil && c.SQL != pgemit.ClipSQL(t, plan, where, c.Columns) {
		return bad("clipping histogram")
	}
	if a := plan.Auto; a != nil {
		if a.CombinedSQL != pgemit.ProfileSQL(t, plan, where, a.Candidates) {
			return bad("contribution profile")
		}
		for _, p := range a.Plans {
			if err := verifyPlan(ds, p); err != nil {
				return err
			}
			if !sameShape(plan, p) {
				// What release builds from the plan (the unit count of
				// min_units_per_cell, the events' mechanism names) is
				// applied to whichever candidate is chosen
				// (TestAttack59_*), so a candidate differs from the plan
				// only in its rows per unit and what follows from them.
				return bad("automatic bounds candidate")
			}
		}
	}
	return nil
}

// sameShape reports whether candidate c of plan p's automatic bounds has
// p's shape: its table, groups per unit, minimum of units, keys, join,
// sample-and-aggregate, and measures of the same kinds over the same
// columns.
func sameShape(p, c *dpplan.Plan) bool {
	if c.Table != p.Table || c.MaxGroupsPerUnit != p.MaxGroupsPerUnit || c.MinUnits != p.MinUnits ||
		(c.Join == nil) != (p.Join == nil) || (c.SampleAgg == nil) != (p.SampleAgg == nil) ||
		!reflect.DeepEqual(c.Keys, p.Keys) || len(c.Measures) != len(p.Measures) {
		return false
	}
	for i, m := range p.Measures {
		cm := c.Measures[i]
		if cm.Kind != m.Kind || cm.Column != m.Column || (cm.Quantile == nil) != (m.Quantile == nil) {
			return false
		}
	}
	return true
}

// verifyJoined checks a join plan's joined relation t against the one the
// policy implies for its join (dpplan.VerifyJoin): the same table, unit
// and limits, and the same columns with the same types and public values.
// Column bounds may differ (automatic clipping plans with the bounds it
// chose); verifyPlan checks they are the numbers the SQL and the
// sensitivities use.
func verifyJoined(ds *policy.Dataset, plan *dpplan.Plan, t *policy.Table) error {
	bad := pgerr.New(pgerr.InternalError, "internal error: the plan's join does not verify")
	want, err := dpplan.VerifyJoin(ds, plan)
	if err != nil || t.Name != want.Name || t.Schema != want.Schema || t.UnitColumn != want.UnitColumn || t.UnitPGType != want.UnitPGType ||
		t.MaxRowsPerUnit != want.MaxRowsPerUnit || t.MaxGroupsPerUnit != want.MaxGroupsPerUnit ||
		len(t.Columns) != len(want.Columns) {
		return bad
	}
	for n, c := range t.Columns {
		w := want.Columns[n]
		if w == nil || c.Type != w.Type || c.Hidden != w.Hidden || c.HasBounds != w.HasBounds ||
			c.MaxRowsPerValue != w.MaxRowsPerValue || !slices.Equal(c.PublicValues, w.PublicValues) {
			return bad
		}
	}
	return nil
}

// verifyWork checks the plan's work bound, from which the proxy fixed the
// answer's time slot before the charge (pipeline.TimeSlot): RowOps at least
// the work of the conditions and values the plan holds, as the emitted SQL
// evaluates them (dpplan.RowOpsOf), and Work exactly WorkOf's. A CASE key's
// conditions are SQL text in the plan, so their share of RowOps is the
// planner's alone (docs/ARCHITECTURE.md). Only the plan asked for: the
// candidates of automatic bounds and a clipped plan are charged under its
// slot.
func verifyWork(ds *policy.Dataset, plan *dpplan.Plan) error {
	_, where := dpplan.SourceOf(plan)
	w := dpplan.WorkOf(ds, plan)
	if plan.RowOps < dpplan.RowOpsOf(plan, where) || plan.Work.Rows != w.Rows || plan.Work.Scans != w.Scans ||
		plan.Work.Candidates != w.Candidates || !slices.Equal(plan.Work.Undeclared, w.Undeclared) {
		return pgerr.New(pgerr.InternalError, "internal error: the plan's work bound does not verify")
	}
	return nil
}
