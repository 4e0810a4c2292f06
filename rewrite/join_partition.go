// Privacy-critical: needs DP review.

package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Private group keys (partition selection, partition.go) in joins.
//
// Partition selection rests on two facts about the SQL's per-group count n
// of distinct units after contribution bounding (dpplan/bounds.go, Wilson et al.
// 2020 §3):
//
//	(a) adding or removing one unit u changes n by at most 1 in each group,
//	    in at most L0 groups, and changes no other unit's (unit, group)
//	    rows;
//	(b) a group that exists only because of u (it has no rows without u)
//	    has n = 1, so the threshold, calibrated for n = 1, keeps it with
//	    probability at most δ_p.
//
// # JoinPublic and JoinUnit: allowed
//
// In both shapes every joined row contains rows of exactly one unit, the
// primary table's unit (join.go: public tables hold no units; in a unit
// join all protected rows of a joined row share the unit). So the joined
// rows of u are exactly those containing a row of u, removing u removes
// them and changes no other joined row, and dpplan/bounds.go bounds the joined
// relation per unit exactly as it bounds one table: (a) and (b) hold
// unchanged. The key may be a column of any joined table, also of a public
// one: which values of a public column appear depends on which protected
// rows join them, which is why such a column needs partition selection too
// (unless it has public_values).
//
// # JoinKey (elastic): refused
//
// A joined row (a, b) holds two units, a's and b's. Whichever unit the
// count n counts, a unit u can put rows into a group through other units'
// rows: u's row b joins up to m_A rows a of up to m_A other units, so a
// group that exists only because of u can have n up to C_B·m_A (counting
// A's units), and (b) fails: the threshold for n = 1 would release it with
// probability far above δ_p. Counting joined rows instead gives a
// sensitivity of E per group, and a threshold calibrated for "a group of
// up to E rows created by one unit" would drop nearly every group; and no
// per-unit bound after the join is possible without breaking the elastic
// argument (which needs every joined row kept). The shape is refused with
// a hint to join on the unit or group by a column with public values.

// joinPrivateKey checks a private key (a column without public values) in
// a join: refused for elastic joins (see above) and for the unit column of
// any protected table of the join (every group would hold one unit, as for
// the primary's unit column).
func (b *builder) joinPrivateKey(at ast.Node, ci colInfo) error {
	st := b.join
	if st.plan.Shape == JoinKey {
		return b.errAt(at, pgerr.FeatureNotSupported, "GROUP BY %s is not supported in a join on %s: the column has no public values, and in a join of protected tables on a key other than the unit one %s can add rows to a group through other %[3]ss' rows, so DP partition selection cannot bound its influence", ci.name, st.plan.KeyColumn[st.primary], b.privacyUnit()).
			WithHint("GROUP BY a column with public_values in the policy (%s), or join the protected tables on the unit column %s (then grouping by a column without public values uses DP partition selection)",
				strings.Join(b.publicKeys(), ", "), st.tables[st.primary].UnitColumn)
	}
	for k, t := range st.tables {
		if t.Public {
			continue
		}
		if st.names[[2]string{strconv.Itoa(k), t.UnitColumn}] == ci.name {
			return b.errAt(at, pgerr.FeatureNotSupported, "GROUP BY the unit column %s is not supported: every group would hold one %s", ci.name, b.privacyUnit()).
				WithHint("GROUP BY a column with public_values in the policy (%s) or another column; %s", strings.Join(b.publicKeys(), ", "), privateKeyHint)
		}
	}
	return nil
}
