package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/dpproxy/dpproxy/policy"
)

// DistinctValues is the answer to a SELECT DISTINCT of a column whose
// values the policy declares public (public_values): the declared list is
// public, so the proxy answers from the policy without reading data or
// spending budget. Like a DP GROUP BY on the column, it returns exactly the
// declared keys, whatever the data holds.
type DistinctValues struct {
	Table  string // lower-case table name
	Column string // lower-case column name
	Name   string // the result column's name (the alias, or the column)
	// Names are the result columns' names when the column is selected
	// more than once (knex's select distinct "a", "a"): Name first.
	Names  []string
	PGType string // the result type, as for a key column of a plan
	Values []string
}

// PublicDistinct recognises
//
//	SELECT DISTINCT col [[AS] alias] FROM [schema.]table [[AS] alias]
//	  [GROUP BY col | alias | 1]
//	  [ORDER BY col | alias | 1 [ASC | DESC] [NULLS FIRST | LAST]] [LIMIT n]
//
// or the same without DISTINCT and with the GROUP BY (the filter
// drop-downs of BI tools: SELECT department FROM visits GROUP BY
// department ORDER BY department)
// (col optionally qualified by the table, its alias or schema.table) on a
// visible column with public values of a protected table of ds, and returns its
// answer: the declared values, sorted when ORDER BY asks (numbers by value,
// booleans false first, text and dates by bytes, i.e. as COLLATE "C"),
// cut to LIMIT. It returns nil for any other statement.
func PublicDistinct(ds *policy.Dataset, stmt string) *DistinctValues {
	if ds == nil || CheckText(stmt) != nil {
		return nil
	}
	toks, err := pgsql.Lex(stmt)
	if err != nil {
		return nil
	}
	p := &distinctParser{toks: toks}
	if !p.kw("select") {
		return nil
	}
	distinct := p.kw("distinct")
	colRef := p.name()
	if colRef == nil || len(colRef) > 3 {
		return nil
	}
	outAlias := p.alias("from")
	// The same column again (knex repeats it): more result columns.
	type extra struct {
		ref   []string
		alias string
	}
	var extras []extra
	for {
		t, ok := p.peek()
		if !ok || !t.IsPunct(",") {
			break
		}
		p.i++
		ref := p.name()
		if ref == nil || len(ref) > 3 {
			return nil
		}
		extras = append(extras, extra{ref, p.alias("from")})
	}
	if !p.kw("from") {
		return nil
	}
	tblRef := p.name()
	if tblRef == nil || len(tblRef) > 2 {
		return nil
	}
	tb, ok := ds.Table(tblRef[len(tblRef)-1])
	// A public table's rows are in the shadow catalog (internal/shadow,
	// mirror.go): its real distinct values answer, not the declared ones.
	if !ok || tb.Name != tblRef[len(tblRef)-1] || tb.Public {
		return nil
	}
	schema := tb.Schema
	if schema == "" {
		schema = "public"
	}
	if len(tblRef) == 2 && tblRef[0] != schema {
		return nil
	}
	tblAlias := p.alias("group", "order", "limit", "fetch")
	col, ok := tb.Column(colRef[len(colRef)-1])
	if !ok || col.Hidden || col.Name != colRef[len(colRef)-1] || len(col.PublicValues) == 0 {
		return nil
	}
	// resolves reports whether a column reference names the column.
	resolves := func(ref []string) bool {
		if ref[len(ref)-1] != col.Name {
			return false
		}
		switch len(ref) {
		case 1:
			return true
		case 2:
			if tblAlias != "" {
				return ref[0] == tblAlias
			}
			return ref[0] == tb.Name
		case 3:
			return tblAlias == "" && ref[0] == schema && ref[1] == tb.Name
		}
		return false
	}
	if !resolves(colRef) {
		return nil
	}
	name := col.Name
	if outAlias != "" {
		name = outAlias
	}
	names := []string{name}
	for _, e := range extras {
		if !resolves(e.ref) {
			return nil // another column: not a list of public values
		}
		n := col.Name
		if e.alias != "" {
			n = e.alias
		}
		names = append(names, n)
	}
	values := append([]string(nil), col.PublicValues...)
	// byOutput reads the one key of GROUP BY or ORDER BY: 1, the column
	// or its output alias.
	byOutput := func() bool {
		if t, ok := p.peek(); ok && t.Kind == pgsql.TokNumber {
			p.i++
			return t.Val == "1"
		}
		ref := p.name()
		return ref != nil && (resolves(ref) || len(ref) == 1 && outAlias != "" && ref[0] == outAlias)
	}
	grouped := false
	if p.kw("group") {
		if !p.kw("by") || !byOutput() {
			return nil
		}
		grouped = true
	}
	if !distinct && !grouped {
		return nil
	}
	if p.kw("order") {
		if !p.kw("by") || !byOutput() {
			return nil
		}
		desc := false
		if p.kw("desc") {
			desc = true
		} else {
			p.kw("asc")
		}
		if p.kw("nulls") && !p.kw("first") && !p.kw("last") {
			return nil
		}
		sortValues(values, col.Type, desc)
	}
	if p.kw("limit") {
		t, ok := p.peek()
		if !ok || pgsql.IntLiteral(t) == "" {
			return nil
		}
		p.i++
		n, err := strconv.Atoi(pgsql.IntLiteral(t))
		if err != nil {
			return nil
		}
		if n < len(values) {
			values = values[:n]
		}
	}
	if p.i != len(toks) {
		return nil
	}
	return &DistinctValues{
		Table: tb.Name, Column: col.Name, Name: name, Names: names,
		PGType: keyPGType(Key{Column: col.Name, Type: col.Type, Domain: col.PublicValues}),
		Values: values,
	}
}

// distinctParser walks the tokens of PublicDistinct's statement form.
type distinctParser struct {
	toks []pgsql.Token
	i    int
}

func (p *distinctParser) peek() (pgsql.Token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return pgsql.Token{}, false
}

// kw consumes the unquoted keyword w if it comes next.
func (p *distinctParser) kw(w string) bool {
	if t, ok := p.peek(); ok && t.Is(w) {
		p.i++
		return true
	}
	return false
}

// name consumes a dotted name (ident {. ident}) and returns its parts
// (unquoted parts folded to lower case, quoted ones exact), or nil.
func (p *distinctParser) name() []string {
	var parts []string
	for {
		t, ok := p.peek()
		if !ok || t.Kind != pgsql.TokIdent {
			return nil
		}
		parts = append(parts, t.Val)
		p.i++
		if t, ok := p.peek(); !ok || !t.IsPunct(".") {
			return parts
		}
		p.i++
	}
}

// alias consumes "AS ident" or a bare identifier that is not one of the
// given keywords, and returns it ("" if none).
func (p *distinctParser) alias(stop ...string) string {
	if p.kw("as") {
		if t, ok := p.peek(); ok && t.Kind == pgsql.TokIdent {
			p.i++
			return t.Val
		}
		p.i = len(p.toks) + 1 // malformed: make the statement fail to match
		return ""
	}
	t, ok := p.peek()
	if !ok || t.Kind != pgsql.TokIdent {
		return ""
	}
	for _, s := range stop {
		if t.Is(s) {
			return ""
		}
	}
	p.i++
	return t.Val
}

// sortValues sorts public values as PostgreSQL orders the column's type
// (text and dates by bytes, as COLLATE "C"; YYYY-MM-DD dates sort so).
func sortValues(vs []string, typ policy.Type, desc bool) {
	less := func(a, b string) int { return strings.Compare(a, b) }
	switch typ {
	case policy.TypeInt, policy.TypeNumeric, policy.TypeFloat:
		less = func(a, b string) int {
			x, errA := strconv.ParseFloat(a, 64)
			y, errB := strconv.ParseFloat(b, 64)
			if errA != nil || errB != nil || x == y {
				return strings.Compare(a, b)
			}
			if x < y {
				return -1
			}
			return 1
		}
	case policy.TypeBool:
		rank := func(v string) int {
			if strings.EqualFold(v, "true") {
				return 1
			}
			return 0
		}
		less = func(a, b string) int { return rank(a) - rank(b) }
	}
	slices.SortStableFunc(vs, func(a, b string) int {
		if desc {
			return less(b, a)
		}
		return less(a, b)
	})
}

// distinctHint is the hint of a SELECT DISTINCT the planner cannot answer.
const distinctHint = "SELECT DISTINCT lists the values of columns whose values the policy makes public, at no cost; for another column, count per value with GROUP BY (a column without public values needs SET dp.delta = 1e-7 or so: its groups are chosen by DP)"
