package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Private group keys in joins: why they are refused in elastic joins is in
// dpplan/join.go (and checked by dpplan.VerifyJoin).

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
