// Privacy-critical: needs DP review.

package release

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Joins in release: the planner's bounds are cross-checked against what the
// policy implies for the join's shape (dpplan/join.go), so that a plan
// claiming less than the policy allows is refused rather than under-noised.
//
//   - no join, or a protected table joined to public tables (JoinPublic):
//     one unit changes at most max_rows_per_unit rows of the (joined)
//     relation per group, that of the protected table;
//   - protected tables joined on the unit (JoinUnit): bounding after the
//     join uses the largest max_rows_per_unit of the joined tables.
//
// rowsPerUnit returns that number: every per-group bound of the plan (LInf
// of counts, sums and quantiles; a quantile's Rows) must rest on it.
func rowsPerUnit(ds *policy.Dataset, plan *dpplan.Plan, table *policy.Table) (int, error) {
	j := plan.Join
	if j == nil {
		// Bounds per query (dpplan/bounds.go): an ungrouped query may
		// give one group the unit's whole allowance L0·L∞ (its L1 is the
		// policy's L0·L∞); a grouped one at most L∞ per group; a session
		// may tighten either, and L0 never exceeds the policy's.
		if plan.MaxGroupsPerUnit < 1 || plan.MaxGroupsPerUnit > table.MaxGroupsPerUnit {
			return 0, pgerr.New(pgerr.InternalError, "internal error: the plan's groups per unit exceed the policy")
		}
		allow := table.MaxRowsPerUnit
		if len(plan.Keys) == 0 {
			allow *= table.MaxGroupsPerUnit
		}
		switch {
		case plan.RowsPerUnit == 0:
			return table.MaxRowsPerUnit, nil
		case plan.RowsPerUnit < 0 || plan.RowsPerUnit > allow:
			return 0, pgerr.New(pgerr.InternalError, "internal error: the plan's rows per unit exceed the policy")
		}
		return plan.RowsPerUnit, nil
	}
	switch j.Shape {
	case dpplan.JoinPublic:
		return table.MaxRowsPerUnit, nil
	case dpplan.JoinUnit:
		rows := 0
		for _, jt := range j.Tables {
			t, ok := ds.Table(jt.Name)
			if !ok || t.Public != jt.Public {
				return 0, pgerr.New(pgerr.InternalError, "internal error: join does not match the policy")
			}
			if !t.Public {
				rows = max(rows, t.MaxRowsPerUnit)
			}
		}
		return rows, nil
	}
	return 0, pgerr.New(pgerr.InternalError, "internal error: join does not match the policy")
}

// checkL1 verifies a measure's direct L1 bound: only the bias estimate
// states one, L1 = LInf (it clips each unit's removed rows over all
// groups, rewrite/bias.go).
func checkL1(ms dpplan.Measure) error {
	if ms.L1 == 0 || ms.Kind == dpplan.MeasureRemoved && ms.L1 == ms.LInf {
		return nil
	}
	return pgerr.New(pgerr.InternalError, "internal error: plan states an unproven L1 bound")
}
