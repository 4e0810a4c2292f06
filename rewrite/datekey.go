// It builds SQL fragments of the plan that the emitter sends upstream
// (pgemit/doc.go).

package rewrite

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Date fields and epoch buckets as GROUP BY keys (issue 17): the shapes
// BI tools generate over a date column, with domains that are fixed
// (day of week, day of year, ISO week, day of month) or derived from the
// policy's date bounds (epoch seconds and buckets of them), never from
// the data.
//
// The TiDB parser has no EPOCH, DOW, ISODOW or DOY units, so the
// normalizer writes EXTRACT(field FROM col) for those fields (and for WEEK
// and DAY) as the call "extract"('field', col): PostgreSQL 14+ defines
// EXTRACT as exactly that function (pg_catalog.extract(text, date),
// returning numeric), so the marker means what the analyst wrote.
// date_part('field', col) is the same with a float8 result.
//
// Epoch buckets are Grafana's macros over a date column:
//
//	$__timeGroup(visit_date, '1d')      floor(extract(epoch from visit_date)/86400)*86400
//	$__timeGroupAlias(visit_date, '1d') the same AS "time"
//	$__timeEpoch(visit_date)            extract(epoch from visit_date) as "time"
//
// and $__unixEpochGroup(col, '1d') over an integer column holding epoch
// seconds (or any bounded integer: floor((age)/10)*10):
//
//	floor((col)/86400)*86400
//
// The width W must be a positive integer constant of at most
// maxBucketWidth (written as Grafana writes it: 86400, 2.592e+06). Each
// key value is computed here exactly as PostgreSQL computes it (numeric
// division and floor, or float8 for date_part and integer columns), and
// the emitted SQL computes it on the column only for dates (values) within
// the policy bounds, so it is total: no infinity, no overflow, a constant
// non-zero divisor. A domain with more than maxDerivedGroups values is
// refused (54000) with a hint to widen the bucket.

// dateFields are the EXTRACT/date_part fields with a fixed domain (low,
// high) on any date.
var dateFields = map[string][2]int{
	"quarter": {1, 4}, "month": {1, 12}, "day": {1, 31}, "dow": {0, 6}, "isodow": {1, 7},
	"doy": {1, 366}, "week": {1, 53},
}

// maxBucketWidth bounds an epoch bucket width (about 31 years). With
// |epoch| ≤ 2.6e11 (the year 9999) the exact quotient epoch/W is either an
// integer or at least 1/W from one, while PostgreSQL rounds the numeric
// quotient at 16 significant digits (error ≤ |quotient|·1e-16 < 1/W because
// |epoch| < 1e16): its floor is the exact floor.
const maxBucketWidth = 1_000_000_000

const secondsPerDay = 86400

// epochKeyHint lists the epoch shapes.
const epochKeyHint = "GROUP BY extract(epoch from date_col), floor(extract(epoch from date_col)/W)*W (Grafana's $__timeGroup) with an integer W of seconds, floor((int_col)/W)*W, or EXTRACT(DOW|ISODOW|DOY|WEEK|DAY|MONTH|QUARTER|YEAR FROM date_col)"

// fieldKey plans EXTRACT(field FROM col) ("extract", numeric) or
// date_part('field', col) (float8) written as a call with a string first
// argument.
func (b *builder) fieldKey(fc *ast.FuncCallExpr, fn string) (Key, *policy.Column, error) {
	if len(fc.Args) != 2 {
		return Key{}, nil, b.errAt(fc, "42883", "function %s with %d arguments does not exist", fn, len(fc.Args)).
			WithHint("write %s('dow', date_col)", fn)
	}
	l, ok := b.lit(fc.Args[0])
	field := strings.ToLower(strings.TrimSpace(l.val))
	if !ok || l.kind != litString {
		return Key{}, nil, b.errAt(fc.Args[0], pgerr.FeatureNotSupported, "the field of %s must be a string constant", fn).WithHint("%s", epochKeyHint)
	}
	ci, err := b.keyColumn(fc.Args[1])
	if err != nil {
		return Key{}, nil, err
	}
	lo, hi, err := b.dateBounds(fc.Args[1], ci)
	if err != nil {
		return Key{}, nil, err
	}
	typ := "numeric"
	if fn == "date_part" {
		typ = "float8"
	}
	if field == "epoch" {
		return b.epochKey(fc, ci, lo, hi, nil, "", typ)
	}
	r, ok := dateFields[field]
	if field == "year" {
		r, ok = [2]int{lo.Year(), hi.Year()}, true
	}
	if !ok {
		return Key{}, nil, b.errAt(fc.Args[0], pgerr.FeatureNotSupported, "%s field %q is not supported as a group key", fn, field).WithHint("%s", epochKeyHint)
	}
	dom := make([]string, 0, r[1]-r[0]+1)
	for v := r[0]; v <= r[1]; v++ {
		dom = append(dom, strconv.Itoa(v))
	}
	args := []string{field}
	if typ == "float8" {
		// date_part(text, date) casts the date to timestamp, which
		// raises 22008 beyond 294276 AD: only dates within the policy
		// bounds reach it (the others are not counted, as for date_trunc).
		args = append(args, typ, lo.Format("2006-01-02"), hi.Format("2006-01-02"))
	}
	return Key{Column: ci.name, Type: policy.TypeInt, Domain: dom, Func: "extract", Args: args}, ci.col, nil
}

// epochCall reports whether e is extract(epoch from col) or
// date_part('epoch', col), and its result type.
func (b *builder) epochCall(e ast.ExprNode) (*ast.FuncCallExpr, string, bool) {
	fc, ok := unparen(e).(*ast.FuncCallExpr)
	if !ok || len(fc.Args) != 2 {
		return nil, "", false
	}
	fn := strings.ToLower(fc.FnName.O)
	if fn != "extract" && fn != "date_part" {
		return nil, "", false
	}
	l, ok := b.lit(fc.Args[0])
	if !ok || l.kind != litString || !strings.EqualFold(strings.TrimSpace(l.val), "epoch") {
		return nil, "", false
	}
	if fn == "date_part" {
		return fc, "float8", true
	}
	return fc, "numeric", true
}

// bucketKey recognises floor(X / W) * W, with X an epoch call over a date
// column or an integer column, as a key; ok is false for other shapes.
func (b *builder) bucketKey(e ast.ExprNode) (Key, *policy.Column, bool, error) {
	d := b.memoKey(e, keyBucket, func() derivedKey {
		k, col, ok, err := b.planBucketKey(e)
		return derivedKey{k, col, ok, err}
	})
	return d.k, d.col, d.ok, d.err
}

// planBucketKey plans floor(X/W)*W and integer arithmetic over EXTRACT
// (bucketKey plans each node once).
func (b *builder) planBucketKey(e ast.ExprNode) (k Key, col *policy.Column, ok bool, err error) {
	mul, isBin := unparen(e).(*ast.BinaryOperationExpr)
	if isBin && arithOps[mul.Op] != "" {
		return b.arithKey(e) // arithkey.go
	}
	if !isBin || mul.Op != opcode.Mul {
		return Key{}, nil, false, nil
	}
	fl, isCall := unparen(mul.L).(*ast.FuncCallExpr)
	if !isCall || !strings.EqualFold(fl.FnName.O, "floor") || len(fl.Args) != 1 {
		return Key{}, nil, false, nil
	}
	div, isBin := unparen(fl.Args[0]).(*ast.BinaryOperationExpr)
	if !isBin || div.Op != opcode.Div {
		return Key{}, nil, false, nil
	}
	w1, ok1 := b.lit(div.R)
	w2, ok2 := b.lit(mul.R)
	if !ok1 || !ok2 || w1.kind != litNumber || w2.kind != litNumber || w1.typ != "" || w2.typ != "" {
		return Key{}, nil, true, b.errAt(mul, pgerr.FeatureNotSupported, "bucket widths must be numeric constants").WithHint("%s", epochKeyHint)
	}
	w, werr := bucketWidth(w1.val)
	if werr == "" && numericScale(w1.val) > 20 {
		werr = "the bucket width has too many decimal places"
	}
	if werr != "" || w1.val != w2.val {
		if werr == "" {
			werr = "the width must be the same constant on both sides, as in floor(x/86400)*86400"
		}
		return Key{}, nil, true, b.errAt(div.R, pgerr.FeatureNotSupported, "%s", werr).WithHint("%s", epochKeyHint)
	}
	// The width is re-encoded: its integer value, with as many zero
	// decimals as written (they set the scale of PostgreSQL's numeric
	// result, hence the text of the key).
	wText := w.String()
	if sc := numericScale(w1.val); sc > 0 {
		wText += "." + strings.Repeat("0", sc)
	}
	if fc, typ, isEpoch := b.epochCall(div.L); isEpoch {
		ci, err := b.keyColumn(fc.Args[1])
		if err != nil {
			return Key{}, nil, true, err
		}
		lo, hi, err := b.dateBounds(fc.Args[1], ci)
		if err != nil {
			return Key{}, nil, true, err
		}
		k, col, err := b.epochKey(mul, ci, lo, hi, w, wText, typ)
		return k, col, true, err
	}
	ci, err := b.keyColumn(div.L)
	if err != nil {
		return Key{}, nil, true, err
	}
	if !intRE.MatchString(w1.val) {
		// 1e1 or 10.0 would make PostgreSQL divide in numeric.
		return Key{}, nil, true, b.errAt(div.R, pgerr.FeatureNotSupported, "write the width of floor((%s)/W)*W as a plain integer", ci.name).WithHint("%s", epochKeyHint)
	}
	k, col, err = b.intBucketKey(mul, ci, w, wText)
	return k, col, true, err
}

// bucketWidth reads a width constant: a positive integer (in value) of at
// most maxBucketWidth.
func bucketWidth(v string) (*big.Int, string) {
	r, ok := new(big.Rat).SetString(v)
	if !ok || !decimalRE.MatchString(v) || !r.IsInt() || r.Sign() <= 0 || r.Num().Cmp(big.NewInt(maxBucketWidth)) > 0 {
		return nil, "the bucket width must be a positive integer of seconds up to " + strconv.Itoa(maxBucketWidth)
	}
	return new(big.Int).Set(r.Num()), ""
}

// numericScale is the display scale PostgreSQL gives a numeric constant:
// the digits after the point less the exponent, at least 0.
func numericScale(v string) int {
	mant, exp, _ := strings.Cut(strings.ToLower(v), "e")
	s := 0
	if _, frac, ok := strings.Cut(mant, "."); ok {
		s = len(frac)
	}
	if exp != "" {
		e, _ := strconv.Atoi(exp)
		s -= e
	}
	return max(s, 0)
}

// epochKey plans extract(epoch from col) (w nil) or its bucket of width w
// over a date column with bounds [lo, hi]. Args: width text ("" for the
// plain epoch), result type ("numeric" or "float8"), first and last day.
func (b *builder) epochKey(at ast.Node, ci colInfo, lo, hi time.Time, w *big.Int, wText, typ string) (Key, *policy.Column, error) {
	first, last := lo.Unix()/secondsPerDay, hi.Unix()/secondsPerDay
	var dom []string
	add := func(v string) error {
		if len(dom) > 0 && dom[len(dom)-1] == v {
			return nil
		}
		if len(dom) == maxDerivedGroups {
			return b.errAt(at, "54000", "this epoch bucket over %s would release more than %d groups", ci.name, maxDerivedGroups).
				WithHint("use a wider bucket (the policy bounds of %s are %s to %s), or date_trunc('month', %s)", ci.name, ci.col.Lower, ci.col.Upper, ci.name)
		}
		dom = append(dom, v)
		return nil
	}
	if w != nil && w.Int64() >= secondsPerDay {
		// Every bucket from the first day's to the last day's holds a
		// midnight: step through the buckets.
		wi := w.Int64()
		for v := floorDiv(first*secondsPerDay, wi) * wi; v <= last*secondsPerDay; v += wi {
			if err := add(epochText(v, wi, wText, typ)); err != nil {
				return Key{}, nil, err
			}
		}
	} else {
		// One value per day.
		for d := first; d <= last; d++ {
			var text string
			if w == nil {
				text = strconv.FormatInt(d*secondsPerDay, 10)
			} else {
				text = epochText(d*secondsPerDay, w.Int64(), wText, typ)
			}
			if err := add(text); err != nil {
				return Key{}, nil, err
			}
		}
	}
	return Key{Column: ci.name, Type: policy.TypeNumeric, Domain: dom, Func: "epoch",
		Args: []string{wText, typ, lo.Format("2006-01-02"), hi.Format("2006-01-02")}}, ci.col, nil
}

// epochText is PostgreSQL's text of floor(e / W) * W for an epoch e (a
// multiple of 86400) and the constant W written as wText: over numeric,
// exact (see maxBucketWidth) with the display scale of W; over float8,
// the same IEEE operations PostgreSQL performs, printed shortest (exact
// integers below 1e15).
func epochText(e, w int64, wText, typ string) string {
	if typ == "float8" {
		f := math.Floor(float64(e)/float64(w)) * float64(w)
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	v := strconv.FormatInt(floorDiv(e, w)*w, 10)
	if s := numericScale(wText); s > 0 {
		v += "." + strings.Repeat("0", s)
	}
	return v
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// intBucketKey plans floor((col)/W)*W over an integer column with
// bounds: PostgreSQL divides integers truncating toward zero, floors the
// result as float8 and multiplies in float8, so the values are
// trunc(x/W)·W for x in the bounds.
func (b *builder) intBucketKey(at ast.Node, ci colInfo, w *big.Int, wText string) (Key, *policy.Column, error) {
	if ci.col.Type != policy.TypeInt || !ci.col.HasBounds {
		return Key{}, nil, b.errAt(at, pgerr.FeatureNotSupported, "floor(col/W)*W needs an integer column with policy bounds; %s is %s", ci.name, ci.col.Type).
			WithHint("%s", epochKeyHint)
	}
	lo, err1 := strconv.ParseInt(ci.col.Lower, 10, 64)
	hi, err2 := strconv.ParseInt(ci.col.Upper, 10, 64)
	if err1 != nil || err2 != nil || lo < -1e15 || hi > 1e15 {
		return Key{}, nil, b.errAt(at, pgerr.FeatureNotSupported, "the policy bounds of %s are not usable for buckets", ci.name).WithHint("%s", epochKeyHint)
	}
	wi := w.Int64()
	qlo, qhi := lo/wi, hi/wi // truncation, as PostgreSQL's integer division
	if qhi-qlo+1 > maxDerivedGroups {
		return Key{}, nil, b.errAt(at, "54000", "floor((%s)/%s)*%s would release more than %d groups", ci.name, wText, wText, maxDerivedGroups).
			WithHint("use a wider bucket (the policy bounds of %s are %s to %s)", ci.name, ci.col.Lower, ci.col.Upper)
	}
	var dom []string
	for q := qlo; q <= qhi; q++ {
		dom = append(dom, strconv.FormatFloat(float64(q)*float64(wi), 'f', -1, 64))
	}
	return Key{Column: ci.name, Type: policy.TypeFloat, Domain: dom, Func: "int_bucket",
		Args: []string{wText, ci.col.Lower, ci.col.Upper}}, ci.col, nil
}

// dateKeyPGType is the result type of the keys above ("" for others).
func dateKeyPGType(k Key) string {
	switch k.Func {
	case "extract":
		if len(k.Args) == 4 {
			return "float8"
		}
		return "numeric"
	case "epoch":
		return k.Args[1]
	case "int_bucket":
		return "float8"
	case "arith":
		return k.Args[0] // arithkey.go
	case "date_trunc":
		if len(k.Args) > 1 {
			return k.Args[1] // of a date column AT TIME ZONE (attz.go)
		}
	}
	return ""
}
