package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// joinPrivateKey checks a private key (a column without public values) in
// a join: refused for the unit column of
// any protected table of the join (every group would hold one unit, as for
// the primary's unit column).
func (b *builder) joinPrivateKey(at ast.Node, ci colInfo) error {
	st := b.join
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
