package rewrite

import (
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// Domains narrowed by public predicates (issue 16).
//
// A key with a public domain releases every value of the domain: with
// `GROUP BY date_trunc('month', visit_date)` over a policy range of 60
// months and `WHERE visit_date >= '2024-01-01'`, the 48 months before 2024
// were released as pure noise (their rows are all excluded by the WHERE).
// narrowKeys drops the domain values that the query's own WHERE excludes:
// from every top-level AND conjunct that compares a key's column with a
// literal (=, <>, <, <=, >, >=, BETWEEN, IN, NOT IN), the values of the
// domain that no row passing the WHERE can have are removed.
//
// Privacy: the narrowed domain is a function of the policy and the query's
// constants only, never of the data, so releasing exactly its values is
// as public as releasing the policy's domain (PRIVACY.md: "group keys
// computed from columns have domains derived from the policy's bounds and
// the query's constants"). A removed value's group could only have held
// rows that the WHERE excludes, so the SQL's answer for the remaining
// groups is unchanged. A conjunct that would empty a domain leaves it as
// it was (an empty answer would need special cases downstream, and is no
// more private).

// colRange is what the WHERE implies about one column: a date range, a set
// of allowed values (canonical text), or nothing.
type colRange struct {
	lo, hi   time.Time // zero when open
	values   []string  // nil: any; from = or IN
	excluded []string  // from <> and NOT IN
}

var dateLitRE = regexp.MustCompile(`^'(\d{4}-\d{2}-\d{2})'::date$`)

// conjuncts returns the top-level AND conjuncts of p.
func conjuncts(p dpplan.Pred) []dpplan.Pred {
	if b, ok := p.(dpplan.PredBool); ok && b.Op == "AND" {
		return append(conjuncts(b.L), conjuncts(b.R)...)
	}
	if p == nil {
		return nil
	}
	return []dpplan.Pred{p}
}

// litDate reads a date literal as the planner emits it.
func litDate(lit string) (time.Time, bool) {
	m := dateLitRE.FindStringSubmatch(lit)
	if m == nil {
		return time.Time{}, false
	}
	d, err := time.Parse("2006-01-02", m[1])
	return d, err == nil
}

// litValue reads a text, integer or date literal as the planner emits it
// ('x'::text, (42), 'YYYY-MM-DD'::date), in the canonical text of a
// domain value.
func litValue(lit string, t policy.Type) (string, bool) {
	switch t {
	case policy.TypeText:
		s, ok := strings.CutSuffix(lit, "::text")
		if !ok || !strings.HasPrefix(s, "'") || !strings.HasSuffix(s, "'") || strings.HasPrefix(s, "E'") {
			return "", false
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), true
	case policy.TypeInt:
		r, ok := new(big.Rat).SetString(strings.Trim(lit, "()"))
		if !ok || !r.IsInt() {
			return "", false
		}
		return r.Num().String(), true
	case policy.TypeDate:
		d, ok := litDate(lit)
		return d.Format("2006-01-02"), ok
	}
	return "", false
}

// rangeOf is what the conjuncts imply about column col (quoted) of type t.
func rangeOf(cs []dpplan.Pred, col string, t policy.Type) colRange {
	var r colRange
	narrowLo := func(d time.Time) {
		if r.lo.IsZero() || d.After(r.lo) {
			r.lo = d
		}
	}
	narrowHi := func(d time.Time) {
		if r.hi.IsZero() || d.Before(r.hi) {
			r.hi = d
		}
	}
	allow := func(vals []string) {
		if r.values == nil {
			r.values = vals
			return
		}
		r.values = slices.DeleteFunc(r.values, func(v string) bool { return !slices.Contains(vals, v) })
	}
	for _, c := range cs {
		switch p := c.(type) {
		case dpplan.PredCmp:
			if p.Col != col {
				continue
			}
			if t == policy.TypeDate {
				d, ok := litDate(p.Lit)
				if !ok {
					continue
				}
				switch p.Op {
				case "=":
					narrowLo(d)
					narrowHi(d)
				case ">=":
					narrowLo(d)
				case ">":
					narrowLo(d.AddDate(0, 0, 1))
				case "<=":
					narrowHi(d)
				case "<":
					narrowHi(d.AddDate(0, 0, -1))
				}
				continue
			}
			if v, ok := litValue(p.Lit, t); ok {
				switch p.Op {
				case "=":
					allow([]string{v})
				case "<>":
					// SQLAlchemy's !=, knex's whereNot: no row of v's
					// group passes.
					r.excluded = append(r.excluded, v)
				}
			}
		case dpplan.PredBetween:
			if p.Col != col || p.Not || t != policy.TypeDate {
				continue
			}
			lo, ok1 := litDate(p.Lo)
			hi, ok2 := litDate(p.Hi)
			if ok1 && ok2 {
				narrowLo(lo)
				narrowHi(hi)
			}
		case dpplan.PredIn:
			if p.Col != col {
				continue
			}
			var vals []string
			for _, l := range p.Lits {
				v, ok := litValue(l, t)
				if !ok {
					vals = nil
					break
				}
				vals = append(vals, v)
			}
			switch {
			case vals == nil:
			case p.Not:
				r.excluded = append(r.excluded, vals...)
			default:
				allow(vals)
			}
		}
	}
	return r
}

// narrowKeys narrows the domains of the public keys by the WHERE (see
// above). Keys of joins and private keys are left alone.
func (b *builder) narrowKeys() {
	cs := conjuncts(b.where)
	if len(cs) == 0 || b.join != nil {
		return
	}
	for i, k := range b.keys {
		if k.Private || len(k.Domain) == 0 {
			continue
		}
		col := pgemit.QuoteIdent(k.Column)
		var keep func(v string) bool
		switch k.Func {
		case "":
			r := rangeOf(cs, col, k.Type)
			switch {
			case r.values != nil:
				keep = func(v string) bool { return slices.Contains(r.values, v) && !slices.Contains(r.excluded, v) }
			case k.Type == policy.TypeDate && (!r.lo.IsZero() || !r.hi.IsZero()):
				keep = func(v string) bool {
					d, err := time.Parse("2006-01-02", dateHead(v))
					return err == nil && (r.lo.IsZero() || !d.Before(r.lo)) && (r.hi.IsZero() || !d.After(r.hi)) &&
						!slices.Contains(r.excluded, d.Format("2006-01-02"))
				}
			case len(r.excluded) > 0:
				keep = func(v string) bool {
					if k.Type == policy.TypeDate {
						v = dateHead(v)
					}
					return !slices.Contains(r.excluded, v)
				}
			}
		case "epoch":
			// A bucket [v, v+W) of epoch seconds is kept when it holds
			// a midnight of a day in [lo, hi] (datekey.go).
			r := rangeOf(cs, col, policy.TypeDate)
			if r.lo.IsZero() && r.hi.IsZero() {
				continue
			}
			w := 1.0
			if k.Args[0] != "" {
				w, _ = strconv.ParseFloat(k.Args[0], 64)
			}
			keep = func(v string) bool {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return true
				}
				return (r.hi.IsZero() || x <= float64(r.hi.Unix())) && (r.lo.IsZero() || x+w > float64(r.lo.Unix()))
			}
		case "date_trunc", "extract":
			if k.Func == "extract" && k.Args[0] != "year" {
				continue // quarters and months of every year: not a period
			}
			r := rangeOf(cs, col, policy.TypeDate)
			if r.lo.IsZero() && r.hi.IsZero() {
				continue
			}
			// A group is kept when its period overlaps [lo, hi].
			keep = func(v string) bool {
				var start, end time.Time
				if k.Func == "extract" {
					y, err := time.Parse("2006", v)
					if err != nil {
						return true
					}
					start, end = y, y.AddDate(1, 0, -1)
				} else {
					d, err := time.Parse("2006-01-02", dateHead(v)) // a date, or a timestamp at midnight (attz.go)
					if err != nil {
						return true
					}
					start = d
					end = pgemit.PeriodNext(d, k.Args[0]).AddDate(0, 0, -1)
				}
				return (r.hi.IsZero() || !start.After(r.hi)) && (r.lo.IsZero() || !end.Before(r.lo))
			}
		}
		if keep == nil {
			continue
		}
		var dom []string
		for _, v := range k.Domain {
			if keep(v) {
				dom = append(dom, v)
			}
		}
		if len(dom) > 0 && len(dom) < len(k.Domain) {
			b.keys[i].Domain = dom
		}
	}
}

// dateHead is the date of a key value: a date, or a timestamp at
// midnight ("2024-01-01 00:00:00").
func dateHead(v string) string {
	if len(v) > 10 && v[10] == ' ' {
		return v[:10]
	}
	return v
}
