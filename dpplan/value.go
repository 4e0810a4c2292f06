// Privacy-critical: needs DP review.

package dpplan

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/sensitivity"
)

// # Row values: the typed expression inside an aggregate
//
// SUM(cost * 1.1), AVG(CASE WHEN age >= 65 THEN cost ELSE 0 END),
// COUNT(NULLIF(age, 0)), percentile_cont(0.5) WITHIN GROUP (ORDER BY
// cost / GREATEST(age, 1)) … aggregate a per-row value. The planner
// translates the analyst's expression into a Value tree; this file bounds
// it (ValueInterval) and package pgemit writes it as SQL (pgemit.ValueSQL),
// so the interval a measure's sensitivity is computed from and the SQL
// that enforces it are two functions of the same data, neither of which
// sees the parser.
//
// Soundness rests on two facts:
//
//  1. every column leaf is clamped to [Lo, Hi] by the emitted SQL before it
//     enters the expression (NULL stays NULL), so each leaf lies in the
//     interval assumed here, whatever the data;
//  2. each operation's interval contains every value the operation yields
//     on values of its operands' intervals (sensitivity/interval.go: the
//     inclusion property of interval arithmetic), and + − × of numeric
//     values are exact in PostgreSQL. The one rounding operation, division,
//     is emitted as a clamp of x / NULLIF(y, 0) to the decimal interval
//     sensitivity.Div returns, so a rounded quotient cannot leave it either,
//     and a zero divisor gives NULL, never an error.
//
// By induction over the tree, ValueInterval contains the value of the
// emitted SQL on every row. CASE conditions are WHERE conditions (Pred):
// they read raw columns, which is harmless, since they only choose which
// bounded branch a row takes.
//
// Bounded work and no overflow (issue 14): the final interval alone does
// not stop an intermediate value from overflowing numeric, e.g.
// (age + 1) * 1e999 * 1e-999, which would raise 22003 only on rows where
// age is not NULL, after the charge; nor a chain of long constants from
// costing seconds per row on the rows a CASE selects. So ValueInterval also
// refuses constants with more than MaxConstDigits significant digits or a
// magnitude outside [MinConstMagnitude, MaxConstMagnitude] (0 allowed),
// any operation whose interval leaves ±MaxMagnitude, integer division
// (PostgreSQL truncates it), a divisor that can be arbitrarily close to 0
// (the quotient has no bound) and more than MaxDivDepth nested divisions
// (the clamp writes its operand's SQL three times). ValueOps counts the
// per-row operations, which the planner caps per query.

// Value is a node of a per-row value. Immutable once built.
type Value struct {
	// Op is one of the Val* constants.
	Op string
	// Col (ValCol) is the column's lower-case name; Lo and Hi are its
	// clamping bounds as exact decimals; Int marks an integer column.
	Col    string `json:",omitempty"`
	Lo, Hi string `json:",omitempty"`
	// Scale (ValCol, not Int) is the column's declared numeric scale
	// when the catalog gave one (numeric(p, s), s > 0), else 0: the
	// column is read with at most ReadDecimals decimals.
	Scale int `json:",omitempty"`
	// Num (ValConst) is the constant as a decimal number (digits, an
	// optional point and exponent); Int marks an integer-typed constant.
	Num string `json:",omitempty"`
	Int bool   `json:",omitempty"`
	// Args are the operands: one for ValNeg and ValAbs, two for the
	// arithmetic operators and ValNullIf, one or more for ValCoalesce,
	// ValLeast and ValGreatest; for ValCase the THEN values, one per When,
	// followed by the ELSE value when there is one.
	Args []*Value `json:",omitempty"`
	// When (ValCase) are the conditions, in order.
	When []Pred `json:",omitempty"`
}

// Value operators.
const (
	ValCol      = "col"
	ValConst    = "const"
	ValNull     = "null"
	ValNeg      = "neg"
	ValAdd      = "+"
	ValSub      = "-"
	ValMul      = "*"
	ValDiv      = "/"
	ValCase     = "case"
	ValCoalesce = "coalesce"
	ValLeast    = "least"
	ValGreatest = "greatest"
	ValAbs      = "abs"
	ValNullIf   = "nullif"
)

// Limits of a row value (see the file comment).
const (
	MaxConstDigits    = 30
	MaxConstMagnitude = 1e30
	MinConstMagnitude = 1e-30
	MaxMagnitude      = 1e100
	MaxDivDepth       = 3
)

// MaxNumericBytes bounds the stored bytes of a non-integer column's value
// that a measure reads (pgemit: a longer one is NULL to the measure, and
// one with more than MaxConstDigits decimals is rounded there). A numeric
// column without a declared scale holds up to 131,072 digits before the
// point and 16,383 after (about 74 KB), read whole, from its TOAST
// table, at every use of the column (TestAttack102_LongNumericRead). 64
// bytes hold 30 base-10000 digits (120 decimal digits); the test reads the
// size from the value's header (pg_column_size), without detoasting it.
const MaxNumericBytes = 64

// ReadDecimals is how many decimals a non-integer column leaf is read
// with (pgemit rounds it there): its declared scale when below
// MaxConstDigits, else MaxConstDigits. The emitted SQL enforces it, so
// the digit count of digits.go holds whatever the column holds later (a
// numeric(10, 2) column has at most 2 decimals).
func (v *Value) ReadDecimals() int {
	if v.Scale > 0 && v.Scale < MaxConstDigits {
		return v.Scale
	}
	return MaxConstDigits
}

// ValueErrorKind says why a row value is refused.
type ValueErrorKind int

// Reasons for refusing a row value.
const (
	ErrConstDigits     ValueErrorKind = iota // a constant has too many digits
	ErrConstRange                            // a constant is too large or too small
	ErrMagnitude                             // an intermediate value can exceed MaxMagnitude
	ErrIntDivision                           // integer / integer (PostgreSQL truncates)
	ErrDivisorNearZero                       // the divisor can be arbitrarily close to 0
	ErrDivDepth                              // more than MaxDivDepth nested divisions
	ErrBadValue                              // a malformed node (a planner bug)
)

// ValueError is a refused node of a row value.
type ValueError struct {
	Node *Value
	Kind ValueErrorKind
}

// ValueInterval returns the interval of v's non-NULL values on every row,
// or the first node (in evaluation order: operands before their operator)
// that breaks a limit of the file comment.
func ValueInterval(v *Value) (sensitivity.Interval, error) {
	iv, _, err := valueInterval(v)
	return iv, err
}

// The bounds above as exact rationals, made once.
var (
	maxConstRat     = exactRat(MaxConstMagnitude)
	minConstRat     = exactRat(MinConstMagnitude)
	maxMagnitudeRat = exactRat(MaxMagnitude)
)

// exactRat is the decimal a float64 constant is written as (1e-30 exactly,
// not the nearest binary fraction).
func exactRat(f float64) *big.Rat {
	r, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return r
}

// valueInterval also returns the nesting depth of divisions.
func valueInterval(v *Value) (sensitivity.Interval, int, error) {
	n, err := valueNode(v)
	return n.iv, n.depth, err
}

// node is what valueNode knows of a row value: its interval, the nesting
// depth of its divisions, a bound on PostgreSQL's display scale of its
// numeric result (digits after the point) and its per-row work
// (ValueOps).
type node struct {
	iv    sensitivity.Interval
	depth int
	scale int
	ops   int
}

// valueNode computes v's node, or the first node that breaks a limit of
// the file comment.
func valueNode(v *Value) (node, error) {
	bad := func(k ValueErrorKind) (node, error) {
		return node{}, &ValueError{Node: v, Kind: k}
	}
	switch v.Op {
	case ValNull:
		return node{iv: sensitivity.Null()}, nil
	case ValConst:
		c, err := constRat(v.Num)
		if err != nil {
			return bad(err.(ValueErrorKind))
		}
		return node{iv: sensitivity.Point(c, v.Int), scale: textScale(v.Num)}, nil
	case ValCol:
		lo, ok1 := new(big.Rat).SetString(v.Lo)
		hi, ok2 := new(big.Rat).SetString(v.Hi)
		if !ok1 || !ok2 || lo.Cmp(hi) > 0 {
			return bad(ErrBadValue)
		}
		// Read with at most ReadDecimals decimals (pgemit
		// columnNumeric) and clamped to the bounds as written.
		scale := max(textScale(v.Lo), textScale(v.Hi))
		if !v.Int {
			scale = max(scale, v.ReadDecimals())
		}
		return node{iv: sensitivity.Range(lo, hi, v.Int, true), scale: scale, ops: 1}, nil
	}
	var args []node
	depth, scale, ops := 0, 0, 0
	for _, a := range v.Args {
		n, err := valueNode(a)
		if err != nil {
			return node{}, err
		}
		args = append(args, n)
		depth, scale, ops = max(depth, n.depth), max(scale, n.scale), ops+n.ops
	}
	ivs := make([]sensitivity.Interval, len(args))
	for i, a := range args {
		ivs[i] = a.iv
	}
	arity := map[string][2]int{ValNeg: {1, 1}, ValAbs: {1, 1}, ValAdd: {2, 2}, ValSub: {2, 2}, ValMul: {2, 2}, ValDiv: {2, 2},
		ValNullIf: {2, 2}, ValCoalesce: {1, 100}, ValLeast: {1, 100}, ValGreatest: {1, 100},
		ValCase: {len(v.When), len(v.When) + 1}}[v.Op]
	if arity[1] == 0 || len(ivs) < arity[0] || len(ivs) > arity[1] || v.Op == ValCase && len(v.When) == 0 {
		return bad(ErrBadValue)
	}
	// The work of an operator: linear in its operands' digits for + −,
	// comparisons and the rest, their product for ×, the quotient's digits
	// times the divisor's for / (opLinear, opMul, opDiv).
	lin := 0
	for _, a := range args {
		lin = max(lin, opLinear(a.iv, a.scale))
	}
	var r sensitivity.Interval
	switch v.Op {
	case ValNeg:
		r = sensitivity.Neg(ivs[0])
		ops += lin
	case ValAdd:
		r = sensitivity.Add(ivs[0], ivs[1])
		ops += lin
	case ValSub:
		r = sensitivity.Sub(ivs[0], ivs[1])
		ops += lin
	case ValMul:
		r = sensitivity.Mul(ivs[0], ivs[1])
		scale = min(args[0].scale+args[1].scale, maxNumericScale)
		ops += opMul(args[0], args[1])
	case ValDiv:
		if ivs[0].Int && ivs[1].Int {
			return bad(ErrIntDivision)
		}
		q, err := sensitivity.Div(ivs[0], ivs[1])
		if err != nil {
			return bad(ErrDivisorNearZero)
		}
		if q.Empty() {
			// Always NULL: emitted as a NULL constant, no division.
			return node{iv: q, depth: depth}, nil
		}
		if depth++; depth > MaxDivDepth {
			return bad(ErrDivDepth)
		}
		r = q
		quot := divScale(args[0], args[1])
		scale = max(quot, ratScale(q.Lo), ratScale(q.Hi))
		// pgemit writes x / NULLIF(y, 0) twice (its IS NULL test and
		// its clamp): both operands and the quotient are computed twice
		// a row, and a nested division's four times; the clamp compares
		// the quotient twice.
		ops = 2*(ops+opDiv(args[0], args[1], q, quot)) + 2*opLinear(q, scale)
	case ValCase:
		if len(ivs) == len(v.When) {
			ivs = append(ivs, sensitivity.Null()) // no ELSE: NULL
		}
		r = sensitivity.Union(ivs...)
		ops++ // the CASE
		for _, c := range v.When {
			ops += PredWork(c)
		}
	case ValCoalesce:
		r = sensitivity.Coalesce(ivs...)
		ops += len(args) * lin
	case ValLeast:
		r = sensitivity.Least(ivs...)
		ops += len(args) * lin
	case ValGreatest:
		r = sensitivity.Greatest(ivs...)
		ops += len(args) * lin
	case ValAbs:
		r = sensitivity.Abs(ivs[0])
		ops += lin
	case ValNullIf:
		// NULLIF(a, b): a, or NULL when a = b.
		r = ivs[0]
		r.MayBeNull = true
		ops += 2 * lin
	}
	if !r.Empty() {
		for _, x := range []*big.Rat{r.Lo, r.Hi} {
			if new(big.Rat).Abs(x).Cmp(maxMagnitudeRat) > 0 {
				return bad(ErrMagnitude)
			}
		}
	}
	return node{iv: r, depth: depth, scale: scale, ops: ops}, nil
}

// constRat reads a constant and checks its digits and magnitude; the error
// is a ValueErrorKind.
func constRat(num string) (*big.Rat, error) {
	if i := strings.IndexAny(num, "eE"); i >= 0 && len(strings.TrimLeft(num[i+1:], "+-")) > 3 {
		return nil, ErrConstRange // refused before big.Rat writes out 10^exponent
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok || num == "" {
		return nil, ErrBadValue
	}
	mant := strings.TrimLeft(strings.ToLower(num), "+-")
	if i := strings.IndexByte(mant, 'e'); i >= 0 {
		mant = mant[:i]
	}
	mant = strings.Trim(strings.Replace(mant, ".", "", 1), "0")
	if len(mant) > MaxConstDigits {
		return nil, ErrConstDigits
	}
	if v.Sign() == 0 {
		return v, nil
	}
	a := new(big.Rat).Abs(v)
	if a.Cmp(maxConstRat) > 0 || a.Cmp(minConstRat) < 0 {
		return nil, ErrConstRange
	}
	return v, nil
}

// CheckConst is nil when num is a constant a plan may hold: at most
// MaxConstDigits significant digits and 0 or a magnitude in
// [MinConstMagnitude, MaxConstMagnitude]; else ErrConstDigits,
// ErrConstRange or ErrBadValue. The planner holds every numeric constant
// of a query to it: inside aggregates, over them, and in key functions.
func CheckConst(num string) error {
	_, err := constRat(num)
	return err
}

// ValueOps is the per-row work of v in units of one operation (1/16 of a
// row's work, work.go): see "Per-row work" in digits.go. The planner caps
// the sum over a query's aggregates, and the work bound counts each
// measure's evaluations of it (MeasureValueOps). It is 1<<30 for a value
// ValueInterval refuses.
func ValueOps(v *Value) int {
	n, err := valueNode(v)
	if err != nil {
		return 1 << 30
	}
	return n.ops
}
