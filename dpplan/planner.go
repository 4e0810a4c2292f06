// Not in the privacy-critical set (docs/ARCHITECTURE.md): the bounds the
// planner (rewrite) writes into a plan's measures, which release re-derives
// before any charge and refuses when the plan claims less (release.mechanisms:
// every L∞ from the policy; checkMeasureRange: every range against
// ValueInterval; integerValued: every integer claim; collect: a non-integer
// value of an integer measure is an incident), and the text that names plan
// parts in EXPLAIN, goldens, fingerprints and the refusal of a row value. A
// bug here makes a plan refused or an answer wrong, never a release larger
// than its charge.

package dpplan

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// MeasureBounds fills the clamping bounds and the L∞ bound of a measure.
// col is the measure's column (nil for COUNT(*) or an undeclared unit
// column).
func MeasureBounds(t *policy.Table, m Measure, col *policy.Column) Measure {
	rows := float64(t.MaxRowsPerUnit)
	switch m.Kind {
	case MeasureCount:
		// Each unit keeps at most max_rows_per_unit rows per group, each
		// counting 1.
		m.Integer = true
		m.LInf = rows
	case MeasureSum:
		// Each of at most max_rows_per_unit rows adds a value clamped to
		// [lower, upper], so |sum| ≤ rows·max(|lower|, |upper|).
		m.Lower, m.Upper = col.LowerNum, col.UpperNum
		m.Integer = col.Type == policy.TypeInt
		m.LInf = rows * math.Max(math.Abs(m.Lower), math.Abs(m.Upper))
	case MeasureUnits:
		// COUNT(DISTINCT unit_column): a unit is one value of the unit
		// column, so it adds at most 1 to each group however many rows
		// it has (rows with a NULL unit are excluded, see above).
		m.Integer = true
		m.LInf = 1
	case MeasureSumSq:
		// Each of at most max_rows_per_unit rows adds x² with x clamped to
		// [lower, upper], so 0 ≤ x² ≤ max(lower², upper²) and the unit's
		// per-group sum of squares lies in [0, rows·max(lower², upper²)].
		m.Lower, m.Upper = col.LowerNum, col.UpperNum
		m.Integer = col.Type == policy.TypeInt
		m.LInf = rows * math.Max(m.Lower*m.Lower, m.Upper*m.Upper)
	case MeasureQuantile:
		// Each unit adds or removes at most max_rows_per_unit clamped
		// values of the group, so every rank-based quantity of the group
		// (counts per bucket, the rank of any value, n) moves by at most
		// that much (quantile.go).
		m.LInf = rows
	}
	return m
}

// ScaledMeasures marks the measures whose per-unit values the SQL may
// weight (bounds.go, "Two levels of bounding") as not integer: sums and
// sums of squares always (a unit with more than L∞ rows in a group adds
// its sum times L∞/n), counts and distinct units when the plan scales
// groups. The noise is then added on a fine grid instead of the integers
// (noise.Params.Integer).
func ScaledMeasures(p *Plan) {
	scale := GroupBounding(p) == GroupsScale
	for i := range p.Measures {
		m := &p.Measures[i]
		switch m.Kind {
		case MeasureSum, MeasureSumSq:
			m.Whole = m.Integer
			m.Integer = false
		case MeasureCount, MeasureUnits:
			if scale {
				m.Integer = false
			}
		}
	}
}

// ExprBounds fills the bounds of a measure over an expression or a
// normalized sum from the exact interval iv of its per-row values
// (sensitivity/interval.go): Lower, Upper are iv rounded outwards to
// float64, and LInf is at least both the exact bound and the float formula
// release re-checks it against.
func ExprBounds(t *policy.Table, m Measure, iv sensitivity.Interval) Measure {
	rows := t.MaxRowsPerUnit
	if m.Kind == MeasureCount {
		m.Integer = true
		m.LInf = sensitivity.CountLInf(rows)
		return m
	}
	if iv.Empty() {
		iv = sensitivity.Point(new(big.Rat), true)
	}
	m.Lower, m.Upper = sensitivity.RatDown(iv.Lo), sensitivity.RatUp(iv.Hi)
	centre := new(big.Rat)
	if m.Centre != "" {
		centre.SetString(m.Centre)
	}
	// Per-row values of the measure: x − centre, or (x − centre)².
	shifted := sensitivity.Sub(iv, sensitivity.Point(centre, centre.IsInt()))
	m.Integer = shifted.Int
	switch {
	case m.Kind == MeasureSum && m.Centre != "":
		m.LInf = math.Max(sensitivity.CentredSumLInf(rows, m.Lower, m.Upper, centre), sensitivity.SumLInfInterval(rows, shifted))
	case m.Kind == MeasureSum:
		m.LInf = math.Max(sensitivity.SumLInf(rows, m.Lower, m.Upper), sensitivity.SumLInfInterval(rows, shifted))
	case m.Kind == MeasureSumSq && m.Centre != "":
		sq := sensitivity.Mul(shifted, shifted)
		m.LInf = math.Max(sensitivity.CentredSumSqLInf(rows, m.Lower, m.Upper, centre), sensitivity.SumLInfInterval(rows, sq))
	case m.Kind == MeasureSumSq:
		sq := sensitivity.Mul(shifted, shifted)
		m.LInf = math.Max(sensitivity.SumSqLInf(rows, m.Lower, m.Upper), sensitivity.SumLInfInterval(rows, sq))
	}
	return m
}

// NewAutoClip returns the auto clipping of a plan: its columns, the
// histogram's SQL, and the statement and options it was planned from.
func NewAutoClip(cols []ClipColumn, sql, stmt string, opts Options) *AutoClip {
	opts.AutoClip = false
	return &AutoClip{Columns: cols, SQL: sql, stmt: stmt, opts: opts}
}

// Statement returns what the plan was planned from: the statement and the
// session's options (without AutoClip).
func (a *AutoClip) Statement() (string, Options) { return a.stmt, a.opts }

// Label names the statistic in EXPLAIN: f(y, x).
func (s SampleCall) Label() string { return s.Fn + "(" + s.Y + ", " + s.X + ")" }

func (k MeasureKind) String() string {
	switch k {
	case MeasureCount:
		return "count"
	case MeasureSum:
		return "sum"
	case MeasureUnits:
		return "units"
	case MeasureSumSq:
		return "sumsq"
	case MeasureSampleAgg:
		return "sampleagg"
	case MeasureQuantile:
		return "quantile"
	case MeasureRemoved:
		return "removed"
	}
	return "unknown"
}

// String writes v as a key that tells values apart: the same tree gives
// the same text, and the text names every column, bound, constant,
// operator and condition (it is not SQL: pgemit writes that).
func (v *Value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *Value) write(b *strings.Builder) {
	switch v.Op {
	case ValCol:
		fmt.Fprintf(b, "%s[%s,%s]", v.Col, v.Lo, v.Hi)
		return
	case ValConst:
		b.WriteString(v.Num)
		if v.Int {
			b.WriteString("i")
		}
		return
	case ValNull:
		b.WriteString("null")
		return
	}
	b.WriteString(v.Op)
	b.WriteString("(")
	for i, a := range v.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		if i < len(v.When) {
			fmt.Fprintf(b, "when %#v then ", v.When[i])
		} else if v.Op == ValCase {
			b.WriteString("else ")
		}
		a.write(b)
	}
	b.WriteString(")")
}

// String describes a join for EXPLAIN and goldens.
func (j *Join) String() string {
	var parts []string
	for _, t := range j.Tables {
		s := t.Name
		if t.Public {
			s += " (public)"
		}
		if t.Left {
			s = "left " + s
		}
		parts = append(parts, s)
	}
	s := fmt.Sprintf("%s join of %s", j.Shape, strings.Join(parts, ", "))
	if j.Shape == JoinUnit && j.Fanout > 0 {
		s += fmt.Sprintf("; later protected tables cut to %v rows per unit before the join: a row of %s joins at most %d rows", nonZero(j.RowsPerUnit), firstProtected(j), j.Fanout)
	}
	return s
}

// nonZero returns the non-zero elements of xs (the protected tables' cuts).
func nonZero(xs []int) []int {
	var out []int
	for _, x := range xs {
		if x != 0 {
			out = append(out, x)
		}
	}
	return out
}

// firstProtected names the first protected table of a join.
func firstProtected(j *Join) string {
	for _, t := range j.Tables {
		if !t.Public {
			return t.Name
		}
	}
	return ""
}

// The text of a refused row value (ValueInterval, value.go).

func (e *ValueError) Error() string {
	switch e.Kind {
	case ErrConstDigits:
		return fmt.Sprintf("constant %s has more than %d significant digits", e.Node.Num, MaxConstDigits)
	case ErrConstRange:
		return fmt.Sprintf("constant %s is out of range inside an aggregate", e.Node.Num)
	case ErrMagnitude:
		return fmt.Sprintf("an intermediate value of this expression can exceed %g in magnitude", MaxMagnitude)
	case ErrIntDivision:
		return "integer division inside an aggregate is not supported"
	case ErrDivisorNearZero:
		return "the divisor can be arbitrarily close to 0, so the quotient has no bound"
	case ErrDivDepth:
		return fmt.Sprintf("more than %d nested divisions inside an aggregate are not supported", MaxDivDepth)
	}
	return "malformed expression"
}

// Error makes a ValueErrorKind an error (constRat's).
func (k ValueErrorKind) Error() string { return (&ValueError{Node: &Value{}, Kind: k}).Error() }
