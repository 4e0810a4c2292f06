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
//     join uses the largest max_rows_per_unit of the joined tables;
//   - two protected tables joined on a key (JoinKey, elastic): one unit
//     changes at most E = 2·(C_A·m_B + C_B·m_A)·Π m_T joined rows, recomputed
//     here from the policy and the plan's join columns.
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
	if j.Shape == dpplan.JoinPublic {
		return table.MaxRowsPerUnit, nil
	}
	bad := pgerr.New(pgerr.InternalError, "internal error: join does not match the policy")
	tables := make([]*policy.Table, len(j.Tables))
	for k, jt := range j.Tables {
		t, ok := ds.Table(jt.Name)
		if !ok || t.Public != jt.Public {
			return 0, bad
		}
		tables[k] = t
	}
	switch j.Shape {
	case dpplan.JoinUnit:
		rows := 0
		for _, t := range tables {
			if !t.Public {
				rows = max(rows, t.MaxRowsPerUnit)
			}
		}
		return rows, nil
	case dpplan.JoinKey:
		if len(j.KeyColumn) != len(tables) || len(j.RowsPerValue) != len(tables) {
			return 0, bad
		}
		var prot []int
		for k, t := range tables {
			if !t.Public {
				prot = append(prot, k)
			}
		}
		if len(prot) != 2 {
			return 0, bad
		}
		// m_T from the policy's declaration of the plan's join column.
		m := make([]int, len(tables))
		for k, t := range tables {
			c := t.Columns[j.KeyColumn[k]]
			if c == nil || c.MaxRowsPerValue < 1 || c.MaxRowsPerValue != j.RowsPerValue[k] {
				return 0, bad
			}
			m[k] = c.MaxRowsPerValue
		}
		a, b := prot[0], prot[1]
		e := 2 * (tables[a].MaxRowsPerUnit*m[b] + tables[b].MaxRowsPerUnit*m[a])
		for k, t := range tables {
			if t.Public {
				e *= m[k]
			}
		}
		if e != j.Changed {
			return 0, bad
		}
		return e, nil
	}
	return 0, bad
}

// checkL1 verifies a measure's direct L1 bound (dpplan/join_l1.go): it is
// proven only for elastic joins, where it must be at least L∞ (which rests
// on E, see rowsPerUnit). Other plans must not state one.
func checkL1(plan *dpplan.Plan, ms dpplan.Measure) error {
	if ms.L1 == 0 {
		return nil
	}
	if ms.Kind == dpplan.MeasureRemoved && ms.L1 == ms.LInf {
		// The bias estimate clips each unit's removed rows over all
		// groups to L1 = LInf (rewrite/bias.go).
		return nil
	}
	if plan.Join == nil || plan.Join.Shape != dpplan.JoinKey || !(ms.L1 >= ms.LInf) {
		return pgerr.New(pgerr.InternalError, "internal error: plan states an unproven L1 bound")
	}
	return nil
}
