// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Literal checks that keep the emitted SQL total (issue 14): a literal
// PostgreSQL cannot read as the type it is compared with raises an error
// when the emitted query is planned, after the budget was charged. These
// checks refuse such literals before the charge; the totality fuzzer
// (totality_fuzz_test.go) found both.

// float8Literal reports whether PostgreSQL reads the decimal number v as
// a float8. A number compared with a float column is cast to float8 when
// the query is planned; float8in raises 22003 when strtod overflows (±Inf)
// or underflows to zero (1e-400), and accepts subnormal results. Go's
// ParseFloat rounds the same way (IEEE round to nearest): it returns
// ErrRange on overflow and 0 on underflow.
func float8Literal(v string) bool {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return false
	}
	if f == 0 {
		mantissa, _, _ := strings.Cut(strings.ToLower(v), "e")
		return strings.Trim(mantissa, "+-0.") == ""
	}
	return true
}

// unitLit types a literal compared with a unit column whose type the
// policy does not declare. PostgreSQL would type an untyped constant from
// the column, so 'abc' against a bigint column, or 5 against a text one,
// fails when the query is planned, after the charge. Only integers are
// admitted, emitted as the untyped string constant of their canonical
// form, which every integer, numeric and text column reads.
func (b *builder) unitLit(e ast.ExprNode, l literal, ci colInfo) (string, error) {
	v := strings.TrimSpace(l.val)
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, 64)
	if l.kind != litNumber && l.kind != litString || l.typ != "" && !l.typ.Numeric() && l.typ != policy.TypeText || err != nil {
		return "", b.errAt(e, "42804", "cannot compare unit column %s with this literal: the policy does not declare the column's type", ci.name).
			WithHint("compare %s with an integer, e.g. %s = 42, or ask the data steward to declare its type in the policy (columns: %s: {type: text})", ci.name, ci.name, ci.name)
	}
	return pgemit.QuoteString(strconv.FormatInt(n, 10)), nil
}
