package rewrite

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/policy"
)

// The query generator of the totality fuzzer (TestEmittedSQL_TotalityFuzz,
// totality_fuzz_test.go): random analyst queries over one policy,
// deterministic from the *rand.Rand it is given, drawn from the grammar the
// planner accepts (doc.go, the goldens and testdata/corpus.sql) — every
// aggregate, expressions inside aggregates, FILTER, WHERE predicates,
// every kind of GROUP BY key, HAVING, ORDER BY, LIMIT, joins, the
// sample-and-aggregate functions and their session options — with literals
// from an adversarial pool. It also writes near misses (functions,
// operators and casts the planner does not admit, literals of the wrong
// type) at a low rate: those must be refused before any SQL runs, and if
// one day they are admitted the fuzzer exercises them at once.

// queryGen generates the queries of one policy. Not safe for concurrent
// use.
type queryGen struct {
	rng  *rand.Rand
	ds   *policy.Dataset
	from []genTable
	cols []genCol // the visible columns of the FROM tables
	join bool
	lc   bool // write keywords in lower case
	// loose queries also hold near misses (constructs and literals the
	// planner refuses); the others keep to the accepted grammar, so that
	// most generated queries are accepted and run.
	loose bool
	opts  Options
}

// genTable is a table of the FROM clause.
type genTable struct {
	t     *policy.Table
	alias string // the name columns are qualified with ("" when bare)
}

// genCol is a column the query can name.
type genCol struct {
	ref  string         // how the query names it
	name string         // its policy name
	c    *policy.Column // nil for an undeclared unit column
	unit bool
}

// typ is the column's policy type; an undeclared unit column is bigint in
// the test tables (auditTable).
func (c genCol) typ() policy.Type {
	if c.c == nil {
		return policy.TypeInt
	}
	return c.c.Type
}

func (c genCol) bounded() bool {
	return c.c != nil && !c.unit && c.c.Type.Numeric() && c.c.HasBounds
}

func newQueryGen(rng *rand.Rand, ds *policy.Dataset) *queryGen {
	return &queryGen{rng: rng, ds: ds, lc: rng.IntN(8) == 0, loose: rng.IntN(4) == 0}
}

func (g *queryGen) chance(p float64) bool { return g.rng.Float64() < p }

// near reports, in loose queries only, with probability p, that a near
// miss is to be written.
func (g *queryGen) near(p float64) bool { return g.loose && g.chance(p) }

// pool draws from good, or in loose queries sometimes from bad.
func (g *queryGen) pool(good, bad []string) string {
	if len(bad) > 0 && g.near(0.3) {
		return bad[g.rng.IntN(len(bad))]
	}
	return good[g.rng.IntN(len(good))]
}

func (g *queryGen) oneOf(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

// kw writes a keyword in the query's case.
func (g *queryGen) kw(s string) string {
	if g.lc {
		return strings.ToLower(s)
	}
	return s
}

// weighted returns an index drawn with the given weights.
func (g *queryGen) weighted(w ...int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	n := g.rng.IntN(total)
	for i, x := range w {
		if n < x {
			return i
		}
		n -= x
	}
	return len(w) - 1
}

// colsWhere returns the columns that satisfy ok.
func (g *queryGen) colsWhere(ok func(genCol) bool) []genCol {
	var out []genCol
	for _, c := range g.cols {
		if ok(c) {
			out = append(out, c)
		}
	}
	return out
}

func (g *queryGen) pickCol(cs []genCol) (genCol, bool) {
	if len(cs) == 0 {
		return genCol{}, false
	}
	return cs[g.rng.IntN(len(cs))], true
}

// query returns one analyst query and the session options it runs with.
func (g *queryGen) query() (string, Options) {
	from := g.fromClause()
	saMode := g.chance(0.12)
	type item struct {
		text  string
		key   int // index into keys, or -1
		alias string
	}
	var items []item
	var keys []string
	var groupBy []string
	nKeys := g.weighted(35, 40, 20, 5)
	for i := 0; i < nKeys; i++ {
		k, ok := g.key()
		if !ok {
			break
		}
		keys = append(keys, k)
		if g.chance(0.85) {
			it := item{text: k, key: len(keys) - 1}
			if g.chance(0.25) {
				it.alias = fmt.Sprintf("k%d", i)
			}
			items = append(items, it)
		} else {
			groupBy = append(groupBy, k)
		}
	}
	nAggs := 1 + g.weighted(50, 35, 15)
	for i := 0; i < nAggs; i++ {
		var a string
		if saMode {
			a = g.sampleAggCall()
		} else {
			a = g.aggregateOutput()
		}
		it := item{text: a, key: -1}
		if g.chance(0.2) {
			it.alias = fmt.Sprintf("a%d", i)
		}
		items = append(items, it)
	}
	if g.chance(0.15) {
		g.rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	}
	var sel []string
	for pos, it := range items {
		s := it.text
		if it.alias != "" {
			s += " " + g.kw("AS") + " " + it.alias
		}
		sel = append(sel, s)
		if it.key >= 0 {
			// GROUP BY the expression, its position or its alias.
			switch {
			case it.alias != "" && g.chance(0.4):
				groupBy = append(groupBy, it.alias)
			case g.chance(0.3):
				groupBy = append(groupBy, strconv.Itoa(pos+1))
			default:
				groupBy = append(groupBy, it.text)
			}
		}
	}
	g.rng.Shuffle(len(groupBy), func(i, j int) { groupBy[i], groupBy[j] = groupBy[j], groupBy[i] })
	q := g.kw("SELECT") + " " + strings.Join(sel, ", ") + " " + g.kw("FROM") + " " + from
	if g.chance(0.02) {
		q += " " + g.kw("WHERE") + " " + g.bigPred()
	} else if g.chance(0.7) {
		q += " " + g.kw("WHERE") + " " + g.pred(3)
	}
	if len(groupBy) > 0 {
		q += " " + g.kw("GROUP BY") + " " + strings.Join(groupBy, ", ")
	}
	if !saMode && g.chance(0.15) {
		q += " " + g.kw("HAVING") + " " + g.havingCond(2)
	}
	if g.chance(0.25) {
		var order []string
		for n := 1 + g.rng.IntN(2); n > 0; n-- {
			pos := g.rng.IntN(len(items))
			o := strconv.Itoa(pos + 1)
			switch {
			case items[pos].alias != "" && g.chance(0.5):
				o = items[pos].alias
			case g.chance(0.3) && (items[pos].key >= 0 || g.loose):
				o = items[pos].text
			}
			order = append(order, o+g.oneOf("", " "+g.kw("DESC"), " "+g.kw("ASC")))
		}
		q += " " + g.kw("ORDER BY") + " " + strings.Join(order, ", ")
	}
	if g.chance(0.2) {
		n := g.pool([]string{"0", "1", "3", "100", "9223372036854775807", "ALL", "NULL"}, []string{"9223372036854775808", "-1", "'2'", "1.5"})
		switch g.rng.IntN(3) {
		case 0:
			q += " " + g.kw("LIMIT") + " " + n
		case 1:
			q += " " + g.kw("LIMIT") + " " + n + " " + g.kw("OFFSET") + " " + g.pool([]string{"0", "1", "5", "NULL"}, []string{"-1"})
		default:
			q += " " + g.kw("OFFSET") + " " + g.oneOf("0", "2") + " " + g.kw("ROWS")
		}
	}
	if saMode {
		g.saOptions()
	}
	return q, g.opts
}

// fromClause picks the FROM tables: mostly one protected table, else a
// join of a shape the policy allows (protected tables on the unit, a
// protected and a public table, two protected tables on a key with
// declared multiplicities).
func (g *queryGen) fromClause() string {
	var prot, pub []*policy.Table
	for _, name := range g.ds.TableOrder {
		t := g.ds.Tables[name]
		switch {
		case t.Public && len(t.ColumnOrder) > 0:
			pub = append(pub, t)
		case !t.Public:
			prot = append(prot, t)
		}
	}
	a := prot[g.rng.IntN(len(prot))]
	switch g.weighted(70, 10, 10, 10) {
	case 1:
		if len(prot) >= 2 {
			b := g.other(prot, a)
			left := g.joinWord()
			g.join = true
			on := g.ta(a, "a").alias + "." + a.UnitColumn + " = " + g.ta(b, "b").alias + "." + b.UnitColumn
			s := g.tableRef(g.from[0]) + " " + left + " " + g.tableRef(g.from[1])
			if a.UnitColumn == b.UnitColumn && g.chance(0.3) {
				s += " " + g.kw("USING") + " (" + a.UnitColumn + ")"
			} else {
				s += " " + g.kw("ON") + " " + on
			}
			if len(pub) > 0 && g.chance(0.3) {
				s += g.publicJoin(pub, a, g.from[0].alias)
			}
			g.addCols()
			return s
		}
	case 2:
		if len(pub) > 0 {
			g.join = true
			g.ta(a, "p")
			s := g.tableRef(g.from[0]) + g.publicJoin(pub, a, g.from[0].alias)
			g.addCols()
			return s
		}
	case 3:
		if a, ak, b, bk, ok := g.keyJoin(prot); ok {
			g.join = true
			g.ta(a, "a")
			g.ta(b, "b")
			s := g.tableRef(g.from[0]) + " " + g.kw("JOIN") + " " + g.tableRef(g.from[1]) + " " + g.kw("ON") + " a." + ak + " = b." + bk
			if g.chance(0.5) {
				// With the unit equality: a unit join; without, refused.
				s += " " + g.kw("AND") + " a." + a.UnitColumn + " = b." + b.UnitColumn
			}
			if len(pub) > 0 && g.chance(0.3) {
				s += g.publicJoin(pub, a, "a")
			}
			g.addCols()
			return s
		}
	}
	// One table, with or without an alias.
	gt := genTable{t: a}
	if g.chance(0.3) {
		gt.alias = "t0"
	}
	g.from = append(g.from, gt)
	g.addCols()
	ref := a.Name
	if g.chance(0.05) {
		ref = `"` + a.Name + `"`
	} else if g.chance(0.05) {
		ref = strings.ToUpper(a.Name)
	}
	if gt.alias != "" {
		ref += g.oneOf(" ", " "+g.kw("AS")+" ") + gt.alias
	}
	return ref
}

// ta adds a table with an alias to the FROM clause.
func (g *queryGen) ta(t *policy.Table, alias string) genTable {
	gt := genTable{t: t, alias: alias}
	g.from = append(g.from, gt)
	return gt
}

func (g *queryGen) tableRef(gt genTable) string {
	return gt.t.Name + " " + gt.alias
}

func (g *queryGen) joinWord() string {
	if g.chance(0.2) {
		return g.kw("LEFT JOIN")
	}
	return g.oneOf(g.kw("JOIN"), g.kw("INNER JOIN"))
}

func (g *queryGen) other(ts []*policy.Table, not *policy.Table) *policy.Table {
	for {
		if t := ts[g.rng.IntN(len(ts))]; t != not {
			return t
		}
	}
}

// publicJoin joins a public table on a column of the same type (by name
// when both have it).
func (g *queryGen) publicJoin(pub []*policy.Table, p *policy.Table, palias string) string {
	t := pub[g.rng.IntN(len(pub))]
	var pairs [][2]string
	for _, tc := range t.ColumnOrder {
		c := t.Columns[tc]
		if c.Hidden {
			continue
		}
		for _, pc := range p.ColumnOrder {
			d := p.Columns[pc]
			if !d.Hidden && d.Type == c.Type && (pc == tc || g.chance(0.2)) {
				pairs = append(pairs, [2]string{pc, tc})
			}
		}
	}
	if len(pairs) == 0 {
		return ""
	}
	pr := pairs[g.rng.IntN(len(pairs))]
	alias := fmt.Sprintf("r%d", len(g.from))
	g.ta(t, alias)
	return " " + g.joinWord() + " " + t.Name + " " + alias + " " + g.kw("ON") + " " + palias + "." + pr[0] + " = " + alias + "." + pr[1]
}

// keyJoin finds two protected tables with visible join columns of the
// same type.
func (g *queryGen) keyJoin(prot []*policy.Table) (a *policy.Table, ak string, b *policy.Table, bk string, ok bool) {
	type cand struct {
		a, b   *policy.Table
		ak, bk string
	}
	var cs []cand
	for _, x := range prot {
		for _, y := range prot {
			if x == y {
				continue
			}
			for _, xn := range x.ColumnOrder {
				for _, yn := range y.ColumnOrder {
					xc, yc := x.Columns[xn], y.Columns[yn]
					if !xc.Hidden && !yc.Hidden && xc.Type == yc.Type {
						cs = append(cs, cand{x, y, xn, yn})
					}
				}
			}
		}
	}
	if len(cs) == 0 {
		return nil, "", nil, "", false
	}
	c := cs[g.rng.IntN(len(cs))]
	return c.a, c.ak, c.b, c.bk, true
}

// addCols lists the visible columns of the FROM tables.
func (g *queryGen) addCols() {
	for _, gt := range g.from {
		qual := func(name string) string {
			switch {
			case gt.alias != "":
				return gt.alias + "." + name
			case g.chance(0.1):
				return gt.t.Name + "." + name
			case g.chance(0.05):
				return `"` + name + `"`
			}
			return name
		}
		t := gt.t
		if !t.Public {
			g.cols = append(g.cols, genCol{ref: qual(t.UnitColumn), name: t.UnitColumn, c: t.Columns[t.UnitColumn], unit: true})
		}
		for _, name := range t.ColumnOrder {
			c := t.Columns[name]
			if c.Hidden || name == t.UnitColumn {
				continue
			}
			g.cols = append(g.cols, genCol{ref: qual(name), name: name, c: c})
		}
	}
}

// key returns a GROUP BY key expression.
func (g *queryGen) key() (string, bool) {
	for try := 0; try < 4; try++ {
		w := []int{30, 20, 12, 8, 6, 15, 0, 0}
		if g.loose {
			w[6], w[7] = 4, 6
		}
		switch g.weighted(w...) {
		case 0: // a column with public values
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.c != nil && len(c.c.PublicValues) > 0 })); ok {
				return c.ref, true
			}
		case 1: // a private key (DP partition selection)
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool {
				return !c.unit && c.c != nil && len(c.c.PublicValues) == 0 && (!c.c.Type.Numeric() || c.c.Type == policy.TypeInt || g.chance(0.2))
			})); ok {
				return c.ref, true
			}
		case 2:
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return !c.unit && c.typ().Numeric() })); ok {
				lo, hi := g.bucketBounds(c)
				return g.kw("width_bucket") + "(" + c.ref + ", " + lo + ", " + hi + ", " +
					g.pool([]string{"1", "2", "5", "10", "9998"}, []string{"9999", "0", "-1", "2.5", "'4'", "1e3"}) + ")", true
			}
		case 3:
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.typ() == policy.TypeDate })); ok {
				unit := g.pool([]string{"'month'", "'year'", "'YEAR'", "E'month'", "$$year$$"}, []string{"'day'", "'week'"})
				return g.kw("date_trunc") + "(" + unit + ", " + c.ref + ")", true
			}
		case 4:
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.typ() == policy.TypeDate })); ok {
				field := g.pool([]string{g.kw("YEAR")}, []string{g.kw("MONTH"), g.kw("EPOCH"), g.kw("DOW"), g.kw("ISODOW"), g.kw("DOY"), g.kw("WEEK"), g.kw("DAY")})
				switch {
				case g.chance(0.3): // Grafana's $__timeGroup (datekey.go)
					w := g.pool([]string{"86400", "604800", "3600", "2.592e+06"}, []string{"0", "-86400", "1.5", "1e12"})
					return "floor(" + g.kw("extract") + "(" + g.kw("epoch") + " " + g.kw("from") + " " + c.ref + ")/" + w + ")*" + w, true
				case g.chance(0.2):
					return "date_part(" + g.oneOf("'epoch'", "'dow'", "'doy'", "'isodow'") + ", " + c.ref + ")", true
				}
				return g.kw("EXTRACT") + "(" + field + " " + g.kw("FROM") + " " + c.ref + ")", true
			}
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.typ() == policy.TypeInt })); ok {
				// $__unixEpochGroup over an integer column
				w := g.pool([]string{"10", "86400", "3"}, []string{"0", "-10", "2.5"})
				return "floor((" + c.ref + ")/" + w + ")*" + w, true
			}
		case 5:
			return g.caseKey(), true
		case 6: // the unit column: refused
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.unit })); ok {
				return c.ref, true
			}
		case 7: // other expressions: refused today
			if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return !c.unit })); ok {
				return g.oneOf("lower("+c.ref+")", c.ref+" + 1", "COALESCE("+c.ref+", 0)", c.ref+"::text", "date_part('year', "+c.ref+")"), true
			}
		}
	}
	return "", false
}

// bucketBounds are width_bucket's low and high constants for a column:
// its policy bounds, values around them, or adversarial numbers.
func (g *queryGen) bucketBounds(c genCol) (string, string) {
	lo, hi := "0", "100"
	if c.c != nil && c.c.HasBounds {
		lo, hi = c.c.Lower, c.c.Upper
	}
	good := []string{"0", "1", "-1", "0.5", "1e-400", "1e999", "-1e999", "1e308", "123456789012345678901234567890", "0.000000000000000000000001"}
	bad := []string{"'NaN'", "1.5::float8", "'1'"}
	switch g.rng.IntN(4) {
	case 0:
		return lo, hi
	case 1:
		return hi, lo
	case 2:
		return g.pool(good, bad), hi
	}
	return g.pool(good, bad), g.pool(good, bad)
}

// caseKey is a CASE bucket key with constant labels.
func (g *queryGen) caseKey() string {
	ints := g.chance(0.3)
	label := func() string {
		if g.chance(0.05) {
			return "NULL"
		}
		if ints {
			return g.pool([]string{"0", "1", "2", "-7", "9223372036854775807", "-9223372036854775808"}, []string{"9223372036854775808", "1.5"})
		}
		return g.strLit(totalTextPool[g.rng.IntN(len(totalTextPool))])
	}
	var b strings.Builder
	b.WriteString(g.kw("CASE"))
	simple, ok := genCol{}, false
	if g.chance(0.2) {
		simple, ok = g.pickCol(g.colsWhere(func(c genCol) bool { return !c.unit || c.c != nil || g.loose }))
		if ok {
			b.WriteString(" " + simple.ref)
		}
	}
	for n := 1 + g.rng.IntN(3); n > 0; n-- {
		cond := ""
		if ok {
			cond = g.litFor(simple)
		} else {
			cond = g.pred(1)
		}
		b.WriteString(" " + g.kw("WHEN") + " " + cond + " " + g.kw("THEN") + " " + label())
	}
	if g.chance(0.7) {
		b.WriteString(" " + g.kw("ELSE") + " " + label())
	}
	b.WriteString(" " + g.kw("END"))
	return b.String()
}

// aggregateOutput is an aggregate of the select list, or arithmetic over
// aggregates.
func (g *queryGen) aggregateOutput() string {
	if g.chance(0.1) {
		a := g.aggregate()
		switch g.rng.IntN(4) {
		case 0:
			return a + " " + g.oneOf("+", "-", "*", "/") + " " + g.aggregate()
		case 1:
			return a + " " + g.oneOf("+", "-", "*", "/") + " " + g.exprNum()
		case 2:
			return a + " * 1.0 / " + g.aggregate()
		default:
			return "-" + a
		}
	}
	return g.aggregate()
}

// aggregate is one aggregate call.
func (g *queryGen) aggregate() string {
	filter := func(s string) string {
		if g.chance(0.2) {
			return s + " " + g.kw("FILTER") + " (" + g.kw("WHERE") + " " + g.pred(2) + ")"
		}
		return s
	}
	w := []int{10, 2, 6, 4, 3, 12, 9, 8, 7, 7, 0, 0}
	if g.loose {
		w[10], w[11] = 2, 2
	}
	switch g.weighted(w...) {
	case 0:
		return filter(g.kw("COUNT") + "(*)")
	case 1:
		return filter(g.kw("COUNT") + "(" + g.pool([]string{"1", "'x'", "0.5"}, []string{"NULL"}) + ")")
	case 2:
		c, _ := g.pickCol(g.cols)
		return filter(g.kw("COUNT") + "(" + c.ref + ")")
	case 3:
		if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.unit })); ok {
			return filter(g.kw("COUNT") + "(" + g.kw("DISTINCT") + " " + c.ref + ")")
		}
		c, _ := g.pickCol(g.cols)
		return filter(g.kw("COUNT") + "(" + c.ref + ")")
	case 4:
		return filter(g.kw("COUNT") + "(" + g.rowExpr(2) + ")")
	case 5:
		return filter(g.kw(g.oneOf("SUM", "SUM", "AVG")) + "(" + g.numArg() + ")")
	case 6:
		return filter(g.kw("AVG") + "(" + g.numArg() + ")")
	case 7:
		return filter(g.kw(g.oneOf("VAR_POP", "VAR_SAMP", "VARIANCE", "STDDEV", "STDDEV_POP", "STDDEV_SAMP")) + "(" + g.numArg() + ")")
	case 8:
		arg := g.numArg()
		if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.typ() == policy.TypeDate })); ok && g.chance(0.2) {
			arg = c.ref
		}
		return filter(g.kw(g.oneOf("MIN", "MAX")) + "(" + arg + ")")
	case 9:
		arg := g.numArg()
		if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.typ() == policy.TypeDate })); ok && g.chance(0.15) {
			arg = c.ref
		}
		q := g.pool([]string{"0.5", "0.5", "0.25", "0.9", "0", "1", "0.999999", "1e-400", "-0"}, []string{"1.5", "'0.5'", "0.5::float8"})
		return g.kw(g.oneOf("percentile_cont", "percentile_disc")) + "(" + q + ") " + g.kw("WITHIN GROUP") + " (" + g.kw("ORDER BY") + " " + arg + g.pool([]string{"", "", " " + g.kw("ASC")}, []string{" " + g.kw("DESC")}) + ")"
	case 10:
		c, _ := g.pickCol(g.cols)
		return g.oneOf("median", "mode", "string_agg", "bool_and", "array_agg", "bit_or") + "(" + c.ref + ")"
	default:
		return g.sampleAggCall()
	}
}

// sampleAggCall is corr(y, x) and its kin (corr and regr_r2 by
// sample-and-aggregate, the others from sums, regrstats.go).
func (g *queryGen) sampleAggCall() string {
	num := g.colsWhere(func(c genCol) bool { return c.bounded() })
	if len(num) == 0 {
		num = g.cols
	}
	y, _ := g.pickCol(num)
	x, _ := g.pickCol(num)
	fn := g.oneOf("corr", "corr", "covar_pop", "covar_samp", "regr_slope", "regr_intercept", "regr_r2")
	return g.kw(fn) + "(" + y.ref + ", " + x.ref + ")"
}

// saOptions draws the sample-and-aggregate session settings.
func (g *queryGen) saOptions() {
	if g.chance(0.5) {
		ks := []int{2, 3, 16, 64, 1, 100000, 1 << 20}
		n := 4
		if g.loose {
			n = len(ks)
		}
		g.opts.SampleBlocks = ks[g.rng.IntN(n)]
	}
}

// numArg is the argument of SUM, AVG …: a bounded column or an expression.
func (g *queryGen) numArg() string {
	if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.bounded() })); ok && g.chance(0.6) {
		return c.ref
	}
	if g.near(0.1) {
		c, _ := g.pickCol(g.cols)
		return c.ref
	}
	return g.rowExpr(2)
}

// rowExpr is an expression inside an aggregate.
func (g *queryGen) rowExpr(depth int) string {
	leaf := func() string {
		if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.bounded() })); ok && g.chance(0.7) {
			return c.ref
		}
		return g.exprNum()
	}
	if depth <= 0 || g.chance(0.3) {
		return leaf()
	}
	e := func() string { return g.rowExpr(depth - 1) }
	w := []int{20, 4, 10, 4, 4, 4, 4, 4, 0, 0}
	if g.loose {
		w[8], w[9] = 4, 4
	}
	switch g.weighted(w...) {
	case 0:
		return "(" + e() + " " + g.oneOf("+", "-", "*", "/", "/") + " " + e() + ")"
	case 1:
		return "-(" + e() + ")"
	case 2:
		s := g.kw("CASE") + " " + g.kw("WHEN") + " " + g.pred(1) + " " + g.kw("THEN") + " " + e()
		if g.chance(0.7) {
			s += " " + g.kw("ELSE") + " " + e()
		}
		return s + " " + g.kw("END")
	case 3:
		if c, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return !c.unit || c.c != nil || g.loose })); ok {
			return g.kw("CASE") + " " + c.ref + " " + g.kw("WHEN") + " " + g.litFor(c) + " " + g.kw("THEN") + " " + e() + " " + g.kw("ELSE") + " " + e() + " " + g.kw("END")
		}
		return leaf()
	case 4:
		return g.kw("COALESCE") + "(" + e() + ", " + e() + ")"
	case 5:
		return g.kw("NULLIF") + "(" + e() + ", " + e() + ")"
	case 6:
		return g.kw(g.oneOf("LEAST", "GREATEST")) + "(" + e() + ", " + e() + g.oneOf("", ", "+e()) + ")"
	case 7:
		return g.kw("ABS") + "(" + e() + ")"
	case 8: // functions and operators PostgreSQL has and the planner refuses today
		x := e()
		return g.oneOf("sqrt("+x+")", "ln("+x+")", "exp("+x+")", "power("+x+", 2)", "round("+x+")", "floor("+x+")",
			"mod("+x+", 3)", "("+x+" % 3)", "("+x+" ^ 2)", "trunc("+x+", 2)", "sign("+x+")", "log("+x+")", "ceil("+x+")")
	default: // casts
		c, _ := g.pickCol(g.cols)
		return g.oneOf(c.ref+"::numeric", "CAST("+c.ref+" AS float8)", c.ref+"::int", "("+e()+")::numeric")
	}
}

// pred is a WHERE (or FILTER, or CASE WHEN) condition.
func (g *queryGen) pred(depth int) string {
	if depth > 0 && g.chance(0.35) {
		p := func() string { return g.pred(depth - 1) }
		switch g.rng.IntN(4) {
		case 0:
			return g.kw("NOT") + " " + "(" + p() + ")"
		case 1:
			return "(" + p() + " " + g.kw("OR") + " " + p() + ")"
		default:
			return p() + " " + g.kw("AND") + " " + p()
		}
	}
	c, ok := g.pickCol(g.cols)
	if !ok {
		return g.kw("TRUE")
	}
	if c.typ() == policy.TypeText && g.chance(0.4) {
		return g.likePred(c)
	}
	w := []int{35, 6, 10, 8, 8, 6, 3, 0, 0, 0}
	if g.loose {
		w[7], w[8], w[9] = 4, 4, 2
	}
	switch g.weighted(w...) {
	case 0:
		return c.ref + " " + g.oneOf("=", "<>", "!=", "<", "<=", ">", ">=") + " " + g.litFor(c)
	case 1:
		return g.litFor(c) + " " + g.oneOf("=", "<", ">=") + " " + c.ref
	case 2:
		var lits []string
		for n := 1 + g.rng.IntN(4); n > 0; n-- {
			lits = append(lits, g.litFor(c))
		}
		return c.ref + " " + g.oneOf("", g.kw("NOT")+" ") + g.kw("IN") + " (" + strings.Join(lits, ", ") + ")"
	case 3:
		return c.ref + " " + g.oneOf("", g.kw("NOT")+" ") + g.kw("BETWEEN") + " " + g.litFor(c) + " " + g.kw("AND") + " " + g.litFor(c)
	case 4:
		return c.ref + " " + g.oneOf(g.kw("IS NULL"), g.kw("IS NOT NULL"), g.kw("ISNULL"), g.kw("NOTNULL"))
	case 5:
		return c.ref + " " + g.oneOf(g.kw("IS DISTINCT FROM"), g.kw("IS NOT DISTINCT FROM")) + " " + g.litFor(c)
	case 6:
		if c.typ() == policy.TypeBool {
			return g.pool([]string{c.ref, g.kw("NOT") + " " + c.ref, c.ref + " = " + g.boolLit()}, []string{c.ref + " " + g.kw("IS TRUE")})
		}
		return g.oneOf(g.kw("TRUE"), g.kw("FALSE"), "1 = 1", "'a' = 'a'", "1 = 2", "NULL", "1 < 1e999")
	case 7: // comparisons of two columns: refused today
		d, _ := g.pickCol(g.cols)
		return c.ref + " " + g.oneOf("=", "<", "<>") + " " + d.ref
	case 8: // expressions in WHERE: refused today
		return g.oneOf("lower("+c.ref+") = 'a'", c.ref+" + 1 > 0", "length("+c.ref+") > 2", c.ref+"::text = '1'", c.ref+" ~ 'a'", c.ref+" "+g.kw("SIMILAR TO")+" 'a%'")
	default:
		return c.ref + " " + g.oneOf("=", ">") + " " + g.oneOf("$1", "?", "(SELECT 1)", "ANY(ARRAY[1])", "current_date", "now()")
	}
}

// bigPred is a large condition: a long chain of ORs or nested NOTs (some
// beyond maxExprDepth, refused), a long IN list, or a LIKE pattern with
// many wildcards (compared with a 10,000-character stored string).
func (g *queryGen) bigPred() string {
	c, _ := g.pickCol(g.cols)
	n := []int{100, 450, 900, 2000}[g.rng.IntN(4)]
	switch g.rng.IntN(4) {
	case 0:
		p := g.pred(0)
		for i := 0; i < n; i++ {
			p += " " + g.kw("OR") + " " + g.pred(0)
		}
		return p
	case 1:
		return strings.Repeat(g.kw("NOT")+" (", n/2) + g.pred(0) + strings.Repeat(")", n/2)
	case 2:
		var lits []string
		for i := 0; i < 5*n; i++ {
			lits = append(lits, g.litFor(c))
		}
		return c.ref + " " + g.kw("IN") + " (" + strings.Join(lits, ", ") + ")"
	}
	if t, ok := g.pickCol(g.colsWhere(func(c genCol) bool { return c.typ() == policy.TypeText })); ok {
		return t.ref + " " + g.kw("LIKE") + " '" + g.oneOf(strings.Repeat("%z", n/10), "%"+strings.Repeat("_", 5*n)+"%", strings.Repeat("%_", n)) + "'"
	}
	return g.pred(1)
}

// likePred is [NOT] LIKE/ILIKE with a generated pattern.
func (g *queryGen) likePred(c genCol) string {
	op := g.oneOf(g.kw("LIKE"), g.kw("LIKE"), g.kw("ILIKE"), g.kw("NOT LIKE"), g.kw("NOT ILIKE"))
	if g.near(0.1) {
		op = g.oneOf("~~", "~~*", "!~~")
	}
	s := c.ref + " " + op + " " + g.strLit(g.likePattern())
	if g.near(0.1) {
		s += " " + g.kw("ESCAPE") + " " + g.oneOf("'!'", "''", `'\'`, "'ab'")
	}
	return s
}

// likePattern builds a pattern from stored values, wildcards, escapes,
// quotes and unicode; sometimes it ends in a lone backslash (issue 14's
// oracle).
func (g *queryGen) likePattern() string {
	var b strings.Builder
	for n := 1 + g.rng.IntN(3); n > 0; n-- {
		switch g.rng.IntN(8) {
		case 0:
			b.WriteString("%")
		case 1:
			b.WriteString("_")
		case 2, 3, 4:
			b.WriteString(totalTextPool[g.rng.IntN(len(totalTextPool))])
		case 5:
			b.WriteString(g.oneOf(`\%`, `\_`, `\\`, `\a`, `\`))
		case 6:
			b.WriteString(g.oneOf("ö", "\U0001F600", "日", "\u00a0", "ẞ"))
		default:
			b.WriteString("'")
		}
	}
	if g.chance(0.12) {
		b.WriteString(`\`)
	}
	return b.String()
}

// litFor is a literal to compare column c with: usually of its type,
// sometimes of another.
func (g *queryGen) litFor(c genCol) string {
	if g.chance(0.04) {
		return "NULL"
	}
	if c.unit && c.c == nil && !g.loose {
		// The policy does not declare the type: integers only.
		return g.oneOf("0", "1", "7", "42", "-1", "'17'", "' 5 '", "+3", "9223372036854775807", "-(4)")
	}
	ty := c.typ()
	if c.unit && g.chance(0.5) {
		// The units of the test tables: 1…30 (u1…u30 for text), 7 is
		// the one unit of the one_unit set.
		u := g.oneOf("7", "1", "30", "31")
		switch ty {
		case policy.TypeText:
			return g.strLit("u" + u)
		case policy.TypeNumeric, policy.TypeFloat:
			return g.oneOf(u, u+".0", "'"+u+"'")
		}
		return u
	}
	if g.near(0.25) {
		ty = []policy.Type{policy.TypeInt, policy.TypeNumeric, policy.TypeText, policy.TypeDate, policy.TypeBool}[g.rng.IntN(5)]
	}
	switch ty {
	case policy.TypeInt:
		return g.intLit(c)
	case policy.TypeNumeric, policy.TypeFloat:
		return g.numLit(c)
	case policy.TypeDate:
		if g.chance(0.2) { // timestamps folded to dates (datefold.go)
			return g.oneOf("TIMESTAMP '2021-06-01 12:30:00'", "'2021-06-01T23:59:59Z'", "TIMESTAMPTZ '2021-06-01 00:00:00+14'",
				"to_timestamp(1622505600)", "to_timestamp('2021-06-01 08:00:00', 'YYYY-MM-DD HH24:MI:SS')", "'9999-12-31 23:59:59'::timestamp",
				"'0001-01-01 00:00:01Z'::timestamptz", "to_timestamp(-8999999999)")
		}
		return g.dateLit(c)
	case policy.TypeBool:
		return g.boolLit()
	}
	if c.c != nil && len(c.c.PublicValues) > 0 && g.chance(0.3) {
		return g.strLit(c.c.PublicValues[g.rng.IntN(len(c.c.PublicValues))])
	}
	s := totalTextPool[g.rng.IntN(len(totalTextPool))]
	if g.chance(0.2) {
		s += totalTextPool[g.rng.IntN(len(totalTextPool))]
	}
	return g.strLit(s)
}

// Literal pools: good literals are accepted by the planner for a column
// of the type (most of them), bad ones are refused (loose queries only).
var (
	intGood = []string{"0", "1", "-1", "7", "42", "-0", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"-9223372036854775809", "99999999999999999999999999999999", "1e3", "1.5", "-2.5", "0.0", "1e-400", "1e999", "1e308",
		"'17'", "'-3'", "' 5 '", "17::int", "CAST(5 AS bigint)", "3::numeric", "2.5::float8", "'9'::int",
		"-(4)", "+3", "000000000000000000000001", "1" + strings.Repeat("0", 150)}
	intBad  = []string{"'1e3'", "'abc'", "''", "0x10", "1_000", "1" + strings.Repeat("0", 250), "1e1000"}
	numGood = []string{"0", "1.5", "-0", "-0.0", "0.1", "1e-400", "1e999", "-1e999", "1e308", "-1e308", "1.7976931348623157e308",
		"2e308", "4.9e-324", "1e-324", "2.2250738585072014e-308", "123456789012345678901234567890.123456789",
		"0." + strings.Repeat("0", 120) + "1", "1e-999", "'1.5'", "' 2.5 '", "'1e300'",
		"1.5::numeric", "CAST('2.5' AS numeric)", "1e10::float8", "'3'::float8", "1::int", "1.5::real", "9223372036854775807",
		"1e15", "-1e15", "1e16", "1e-16", "1e-300", ".5", "5.", "1e+5", "1E5", "9" + strings.Repeat("9", 180)}
	numBad   = []string{"'NaN'", "'Infinity'", "'-Infinity'", "'NaN'::numeric", "'Infinity'::float8", "1e1000", "1e-1000", "'abc'"}
	dateGood = []string{"2021-01-01", "0001-01-01", "9999-12-31", "1970-01-01", "2000-02-29", "2021-1-2", " 2021-01-01 "}
	dateBad  = []string{"infinity", "-infinity", "epoch", "today", "2021-02-30", "2021-13-01", "20210101", "5874897-12-31",
		"4713-01-01 BC", "294277-01-01", "0000-01-01", "", "2100-02-29", "10000-01-01", "2021-06-15T00:00"}
	// exprNums are constants inside aggregates and in arithmetic over
	// them.
	exprNums = []string{"0", "1", "2", "0.5", "10", "-1", "100", "1.0", "1e3", "1e-400", "1e999", "-0", "1e308",
		"123456789012345678901234567890.123456789", "0." + strings.Repeat("0", 120) + "1", "1.5::numeric",
		"CAST(2.5 AS numeric)", "1::int", "2.5::float8", "(-3)", "1e15"}
)

// intLit is an integer literal: near the column's bounds or public values,
// or from the adversarial pool.
func (g *queryGen) intLit(c genCol) string {
	if c.c != nil && g.chance(0.5) {
		var near []string
		if c.c.HasBounds && c.c.Type == policy.TypeInt {
			lo, _ := strconv.ParseInt(c.c.Lower, 10, 64)
			hi, _ := strconv.ParseInt(c.c.Upper, 10, 64)
			near = append(near, c.c.Lower, c.c.Upper, strconv.FormatInt(lo-1, 10), strconv.FormatInt(hi+1, 10), strconv.FormatInt((lo+hi)/2, 10))
		}
		if c.c.Type == policy.TypeInt {
			near = append(near, c.c.PublicValues...)
		}
		if len(near) > 0 {
			return g.decorate(near[g.rng.IntN(len(near))], "int")
		}
	}
	return g.pool(intGood, intBad)
}

// numLit is a numeric literal.
func (g *queryGen) numLit(c genCol) string {
	if c.c != nil && c.c.HasBounds && c.c.Type.Numeric() && g.chance(0.5) {
		near := []string{c.c.Lower, c.c.Upper, c.c.Lower + "1", "0"}
		return g.decorate(near[g.rng.IntN(len(near))], g.oneOf("numeric", "float8"))
	}
	if g.chance(0.3) {
		return g.oneOf("0", "1", "2", "0.5", "10", "-1", "100", "1.0", "1e3")
	}
	return g.pool(numGood, numBad)
}

// exprNum is a constant inside an aggregate or combined with aggregates.
func (g *queryGen) exprNum() string {
	if g.near(0.1) {
		return g.pool(numGood, numBad)
	}
	return exprNums[g.rng.IntN(len(exprNums))]
}

// decorate writes a number plainly or as a cast or string.
func (g *queryGen) decorate(n, typ string) string {
	switch g.rng.IntN(10) {
	case 0:
		return "'" + n + "'"
	case 1:
		return n + "::" + typ
	case 2:
		return g.kw("CAST") + "(" + n + " " + g.kw("AS") + " " + typ + ")"
	case 3:
		if strings.HasPrefix(n, "-") {
			return "-(" + n[1:] + ")"
		}
	}
	return n
}

// dateLit is a date literal, in one of PostgreSQL's spellings.
func (g *queryGen) dateLit(c genCol) string {
	d := g.pool(dateGood, dateBad)
	if c.c != nil && c.c.Type == policy.TypeDate && g.chance(0.4) {
		near := append([]string{}, c.c.PublicValues...)
		if c.c.HasBounds {
			near = append(near, c.c.Lower, c.c.Upper)
		}
		if len(near) > 0 {
			d = near[g.rng.IntN(len(near))]
		}
	}
	s := g.strLit(d)
	switch g.rng.IntN(5) {
	case 0:
		return g.kw("DATE") + " " + s
	case 1:
		return s + "::date"
	case 2:
		return g.kw("CAST") + "(" + s + " " + g.kw("AS") + " date)"
	}
	return s
}

func (g *queryGen) boolLit() string {
	return g.pool([]string{"true", "false", "TRUE", "'t'", "'yes'", "'off'", "'1'", "true::boolean"}, []string{"'maybe'", "1", "0"})
}

// strLit writes s as a string constant in one of PostgreSQL's spellings:
// standard ('…', backslashes literal), escape (E'…'), dollar-quoted.
func (g *queryGen) strLit(s string) string {
	if !utf8.ValidString(s) {
		return "'x'"
	}
	w := []int{50, 30, 10, 8, 0}
	if g.loose {
		w[4] = 4
	}
	switch g.weighted(w...) {
	case 1:
		var b strings.Builder
		b.WriteString("E'")
		for _, r := range s {
			switch {
			case r == '\\':
				b.WriteString(`\\`)
			case r == '\'':
				b.WriteString(g.oneOf(`\'`, "''"))
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\t':
				b.WriteString(`\t`)
			case r > 0x7f && r <= 0xffff && g.chance(0.5):
				fmt.Fprintf(&b, `\u%04x`, r)
			case r > 0xffff && g.chance(0.5):
				fmt.Fprintf(&b, `\U%08x`, r)
			case r < 0x7f && r >= 'a' && r <= 'z' && g.chance(0.1):
				fmt.Fprintf(&b, `\x%02x`, r)
			default:
				b.WriteRune(r)
			}
		}
		return b.String() + "'"
	case 2:
		if !strings.Contains(s, "$") {
			return "$$" + s + "$$"
		}
	case 3:
		if !strings.Contains(s, "$") {
			return "$q$" + s + "$q$"
		}
	case 4: // escapes PostgreSQL refuses
		return g.oneOf(`E'\0'`, `E'\x00'`, `E'\u0000'`, `E'\xff'`, `E'\ud800'`, `U&'\0041'`, `B'101'`, `X'1F'`)
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// havingCond is a HAVING condition over aggregates.
func (g *queryGen) havingCond(depth int) string {
	if depth > 0 && g.chance(0.3) {
		return "(" + g.havingCond(depth-1) + " " + g.oneOf(g.kw("AND"), g.kw("OR")) + " " + g.havingCond(depth-1) + ")"
	}
	if g.chance(0.1) {
		return g.kw("NOT") + " " + g.havingCond(depth-1)
	}
	return g.aggregateOutput() + " " + g.oneOf("=", "<>", "<", "<=", ">", ">=") + " " + g.exprNum()
}

// policyNames lists dataset names for messages.
func policyNames(ps []*totalDB) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
