// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// decimalRE is a plain decimal number: the only constants re-emitted in a
// key expression.
var decimalRE = regexp.MustCompile(`^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`)

// maxDerivedGroups bounds the domain of a derived key (width_bucket's
// count + 2 buckets, the months or years of date_trunc).
const maxDerivedGroups = 10000

// maxDerivedValues bounds the values of all the derived keys' domains a
// statement makes the planner build, repeats included (attack round 50:
// GROUP BY 1,1,1,… over a 10,000-bucket width_bucket built its domain
// for every item, 8 s and 6 GB at 64 KiB of text). Ten keys of the
// largest domain; an answer has at most 60,000 cells anyway
// (release/bounded.go).
const maxDerivedValues = 10 * maxDerivedGroups

// derivedKey is a planned derived key, kept by its expression node
// (builder.derived).
type derivedKey struct {
	k   Key
	col *policy.Column
	ok  bool
	err error
}

// derivedID names a derived key's planning: its node, and how it was
// planned.
type derivedID struct {
	node ast.ExprNode
	kind keyKind
}

// keyKind is the planner of a derived key.
type keyKind uint8

const (
	keyCall   keyKind = iota // exprKey
	keyBucket                // bucketKey
	keyCase                  // caseKey
)

// memoKey returns the key plan makes of node, planning it once per node
// (a select-list key named again by position or alias in GROUP BY and
// ORDER BY is the same node), and refuses the statement when the domains
// built reach maxDerivedValues.
func (b *builder) memoKey(node ast.ExprNode, kind keyKind, plan func() derivedKey) derivedKey {
	id := derivedID{node, kind}
	if d, ok := b.derived[id]; ok {
		return d
	}
	d := plan()
	if d.err == nil && d.ok {
		b.derivedValues += len(d.k.Domain)
		if b.derivedValues > maxDerivedValues {
			d.err = b.errAt(node, pgerr.ProgramLimitExceeded, "the statement's derived group keys have more than %d values together", maxDerivedValues).
				WithHint("group by fewer or coarser keys, and name a select-list key again by its position (GROUP BY 1) rather than by writing it out")
		}
	}
	if b.derived == nil {
		b.derived = map[derivedID]derivedKey{}
	}
	b.derived[id] = d
	return d
}

// exprKey is planExprKey, once per expression node (memoKey).
func (b *builder) exprKey(fc *ast.FuncCallExpr) (Key, *policy.Column, error) {
	d := b.memoKey(fc, keyCall, func() derivedKey {
		k, col, err := b.planExprKey(fc)
		return derivedKey{k, col, true, err}
	})
	return d.k, d.col, d.err
}

// keyExprHint lists the supported GROUP BY expressions.
const keyExprHint = "GROUP BY a column with public values, width_bucket(col, low, high, count) with constant bounds, date_trunc('day'|'week'|'month'|'quarter'|'year', date_col), EXTRACT(YEAR|QUARTER|MONTH|DAY|DOW|ISODOW|DOY|WEEK|EPOCH FROM date_col) or floor(extract(epoch from date_col)/W)*W over a date column with policy bounds, or floor((int_col)/W)*W"

// planExprKey plans a GROUP BY expression whose key domain is public: it is
// derived from the query's constants (width_bucket) or from the policy's
// bounds (date_trunc), never from the data.
//
//   - width_bucket(col, low, high, count) over a numeric column: PostgreSQL
//     returns 0 below low, count+1 at or above high, and 1…count between
//     (reversed when low > high), so the domain is 0…count+1. It is
//     emitted over numeric (col::numeric), which is exact; PostgreSQL's
//     float8 variant, chosen for float columns, can differ at bucket edges.
//   - date_trunc('month'|'year', col) over a date column with bounds: the
//     domain is every month (year) from the truncated lower bound to the
//     upper bound. Dates outside the policy bounds fall outside the domain
//     and are not counted. The key is released with PostgreSQL's type and
//     text (trunckey.go): a timestamptz at midnight of the session's time
//     zone, or a timestamp, date or text as the query casts it.
//   - EXTRACT(YEAR FROM col) over a date column with bounds: the years from
//     the lower to the upper bound, released as numeric like PostgreSQL.
func (b *builder) planExprKey(fc *ast.FuncCallExpr) (Key, *policy.Column, error) {
	name := strings.ToLower(fc.FnName.O)
	switch name {
	case "width_bucket":
		if len(fc.Args) != 4 {
			return Key{}, nil, b.errAt(fc, "42883", "function width_bucket with %d arguments does not exist", len(fc.Args)).
				WithHint("write width_bucket(col, low, high, count)")
		}
		ci, err := b.keyColumn(fc.Args[0])
		if err != nil {
			return Key{}, nil, err
		}
		if !ci.col.Type.Numeric() {
			return Key{}, nil, b.errAt(fc.Args[0], pgerr.FeatureNotSupported, "width_bucket needs a numeric column; %s is %s", ci.name, ci.col.Type).
				WithHint("%s", keyExprHint)
		}
		var nums [3]*big.Rat
		var texts [3]string
		for i := 0; i < 3; i++ {
			l, ok := b.lit(fc.Args[i+1])
			var r *big.Rat
			if ok && l.kind == litNumber && (l.typ == "" || l.typ.Numeric()) && decimalRE.MatchString(l.val) {
				if err := b.constErr(fc.Args[i+1], l.val); err != nil {
					return Key{}, nil, err
				}
				r, ok = new(big.Rat).SetString(l.val)
			} else {
				ok = false
			}
			if !ok {
				return Key{}, nil, b.errAt(fc.Args[i+1], pgerr.FeatureNotSupported, "width_bucket bounds and count must be numeric constants").
					WithHint("write width_bucket(col, low, high, count), e.g. width_bucket(age, 0, 100, 10)")
			}
			nums[i], texts[i] = r, strings.Clone(l.val)
		}
		if !nums[2].IsInt() || nums[2].Sign() <= 0 || nums[2].Cmp(big.NewRat(maxDerivedGroups-2, 1)) > 0 {
			return Key{}, nil, b.errAt(fc.Args[3], "2201G", "width_bucket count must be an integer from 1 to %d", maxDerivedGroups-2).
				WithHint("write the number of buckets as an integer from 1 to %d, e.g. width_bucket(age, 0, 100, 10)", maxDerivedGroups-2)
		}
		if nums[0].Cmp(nums[1]) == 0 {
			return Key{}, nil, b.errAt(fc.Args[1], "2201G", "lower bound cannot equal upper bound").WithHint("give width_bucket a non-empty range")
		}
		n := int(nums[2].Num().Int64())
		dom := make([]string, n+2)
		for i := range dom {
			dom[i] = strconv.Itoa(i)
		}
		return Key{Column: ci.name, Type: policy.TypeInt, Domain: dom, Func: name,
			Args: []string{texts[0], texts[1], nums[2].Num().String()}}, ci.col, nil
	case "date_trunc":
		if len(fc.Args) != 2 {
			return Key{}, nil, b.errAt(fc, "42883", "function date_trunc with %d arguments does not exist", len(fc.Args)).
				WithHint("write date_trunc('month', date_col)")
		}
		l, ok := b.lit(fc.Args[0])
		unit := strings.ToLower(l.val)
		if !ok || l.kind != litString || !truncUnits[unit] {
			return Key{}, nil, b.errAt(fc.Args[0], pgerr.FeatureNotSupported, "date_trunc is supported with 'day', 'week', 'month', 'quarter' or 'year'").
				WithHint("%s", keyExprHint)
		}
		ci, err := b.keyColumn(fc.Args[1])
		if err != nil {
			return Key{}, nil, err
		}
		if ci.col.Type != policy.TypeDate || !ci.col.HasBounds {
			return Key{}, nil, b.errAt(fc.Args[1], pgerr.FeatureNotSupported, "date_trunc needs a date column with lower and upper bounds in the policy; %s has none", ci.name).
				WithHint("%s", keyExprHint)
		}
		lo, err1 := time.Parse("2006-01-02", ci.col.Lower)
		hi, err2 := time.Parse("2006-01-02", ci.col.Upper)
		if err1 != nil || err2 != nil {
			return Key{}, nil, b.errAt(fc.Args[1], pgerr.FeatureNotSupported, "date_trunc needs date bounds written as YYYY-MM-DD in the policy").
				WithHint("ask the data steward to declare lower and upper for %s", ci.name)
		}
		var dates []time.Time
		for d := periodStart(lo, unit); !d.After(hi); d = pgemit.PeriodNext(d, unit) {
			if len(dates) == maxDerivedGroups {
				return Key{}, nil, b.errAt(fc, pgerr.FeatureNotSupported, "date_trunc('%s', %s) would release more than %d groups", unit, ci.name, maxDerivedGroups).
					WithHint("truncate to a coarser unit")
			}
			dates = append(dates, d)
		}
		return b.truncKey(fc, ci, unit, dates)
	case "date_part":
		return b.fieldKey(fc, name) // datekey.go
	case intCastMarker:
		return Key{}, nil, b.errAt(fc, pgerr.FeatureNotSupported, "GROUP BY an integer cast of a column is not supported").
			WithHint("GROUP BY width_bucket(col, low, high, count) or floor((int_col)/W)*W for buckets; an integer cast of a column is supported in WHERE comparisons")
	case atZoneMarker:
		return Key{}, nil, b.errAt(fc, pgerr.FeatureNotSupported, "GROUP BY a date column AT TIME ZONE is supported inside date_trunc, EXTRACT or date_part").
			WithHint("GROUP BY date_trunc('day', date_col::timestamptz AT TIME ZONE 'zone') with the session's TimeZone as the zone")
	case "extract":
		if len(fc.Args) == 0 {
			return Key{}, nil, b.errAt(fc, "42883", "function extract() does not exist").WithHint("%s", keyExprHint)
		}
		if _, ok := fc.Args[0].(*ast.TimeUnitExpr); !ok {
			return b.fieldKey(fc, name) // the normalizer's "extract"('field', col)
		}
		u, ok := fc.Args[0].(*ast.TimeUnitExpr)
		if !ok || len(fc.Args) != 2 || u.Unit != ast.TimeUnitYear && u.Unit != ast.TimeUnitQuarter && u.Unit != ast.TimeUnitMonth {
			return Key{}, nil, b.errAt(fc, pgerr.FeatureNotSupported, "EXTRACT is supported for YEAR, QUARTER and MONTH").WithHint("%s", keyExprHint)
		}
		if u.Unit != ast.TimeUnitYear {
			// The field's values are fixed (1–4, 1–12): a public domain
			// whatever the bounds, over a date column with bounds.
			ci, err := b.keyColumn(fc.Args[1])
			if err != nil {
				return Key{}, nil, err
			}
			if _, _, err := b.dateBounds(fc.Args[1], ci); err != nil {
				return Key{}, nil, err
			}
			field, n := "quarter", 4
			if u.Unit == ast.TimeUnitMonth {
				field, n = "month", 12
			}
			dom := make([]string, n)
			for i := range dom {
				dom[i] = strconv.Itoa(i + 1)
			}
			return Key{Column: ci.name, Type: policy.TypeInt, Domain: dom, Func: name, Args: []string{field}}, ci.col, nil
		}
		ci, err := b.keyColumn(fc.Args[1])
		if err != nil {
			return Key{}, nil, err
		}
		lo, hi, err := b.dateBounds(fc.Args[1], ci)
		if err != nil {
			return Key{}, nil, err
		}
		var dom []string
		for y := lo.Year(); y <= hi.Year(); y++ {
			dom = append(dom, strconv.Itoa(y))
		}
		return Key{Column: ci.name, Type: policy.TypeInt, Domain: dom, Func: name, Args: []string{"year"}}, ci.col, nil
	}
	return Key{}, nil, b.errAt(fc, pgerr.FeatureNotSupported, "GROUP BY %s(…) is not supported", name).WithHint("%s", keyExprHint)
}

// dateBounds are the policy bounds of a date column used by a key
// expression.
func (b *builder) dateBounds(at ast.Node, ci colInfo) (time.Time, time.Time, error) {
	if ci.col.Type != policy.TypeDate || !ci.col.HasBounds {
		return time.Time{}, time.Time{}, b.errAt(at, pgerr.FeatureNotSupported, "%s is not a date column with lower and upper bounds in the policy", ci.name).
			WithHint("%s", keyExprHint)
	}
	lo, err1 := time.Parse("2006-01-02", ci.col.Lower)
	hi, err2 := time.Parse("2006-01-02", ci.col.Upper)
	if err1 != nil || err2 != nil || hi.Year()-lo.Year() >= maxDerivedGroups {
		return time.Time{}, time.Time{}, b.errAt(at, pgerr.FeatureNotSupported, "the policy bounds of %s are not usable YYYY-MM-DD dates", ci.name).
			WithHint("ask the data steward to declare lower and upper for %s", ci.name)
	}
	return lo, hi, nil
}

// keyColumn resolves the column argument of a key expression: a visible,
// declared column other than the unit column.
func (b *builder) keyColumn(e ast.ExprNode) (colInfo, error) {
	if p, ok := e.(*ast.ParenthesesExpr); ok {
		e = p.Expr
	}
	if fc, ok := atZoneCall(e); ok {
		// d::timestamptz AT TIME ZONE the session's zone is d at
		// midnight (attz.go): the same fields, epochs and periods.
		return b.atZoneColumn(fc)
	}
	c, ok := e.(*ast.ColumnNameExpr)
	if !ok {
		return colInfo{}, b.errAt(e, pgerr.FeatureNotSupported, "the first argument must be a column").WithHint("%s", keyExprHint)
	}
	ci, err := b.column(c)
	if err != nil {
		return colInfo{}, err
	}
	if ci.unit || ci.col == nil {
		return colInfo{}, b.errAt(c, pgerr.FeatureNotSupported, "grouping by the unit column %s is not supported", ci.name).WithHint("%s", keyExprHint)
	}
	return ci, nil
}

// sameKey reports whether two keys are the same grouping.
func sameKey(a, b Key) bool {
	if a.Column != b.Column || a.Func != b.Func || len(a.Args) != len(b.Args) {
		return false
	}
	for i := range a.Args {
		if a.Args[i] != b.Args[i] {
			return false
		}
	}
	return true
}

// truncUnits are the date_trunc units of date keys.
var truncUnits = map[string]bool{"day": true, "week": true, "month": true, "quarter": true, "year": true}

// periodStart is date_trunc(unit, t) for a date (weeks start on Monday,
// as ISO and PostgreSQL count them).
func periodStart(t time.Time, unit string) time.Time {
	switch unit {
	case "year":
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	case "quarter":
		return time.Date(t.Year(), (t.Month()-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC)
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	case "week":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
