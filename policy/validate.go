// Privacy-critical: needs DP review.

package policy

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits on declared values. They keep every derived sensitivity finite and
// representable exactly in float64 (2⁵³) after multiplication.
const (
	maxContribution = 1_000_000 // max_groups_per_unit, max_rows_per_unit
	// maxDeclaredRows bounds max_rows (10¹⁵: work bounds stay exact in
	// float64 and int64 products with the fan-out limits).
	maxDeclaredRows = 1e15
	maxAbsBound     = 1e15   // |lower|, |upper| of numeric columns
	maxPublicValues = 10_000 // keys of one public_values list
)

var (
	identRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	decimalRE = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
	integerRE = regexp.MustCompile(`^[-+]?[0-9]+$`)
)

type validator struct {
	file string
	root *yaml.Node
	errs Errors
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func (v *validator) dataset(r *rawDataset) *Dataset {
	d := &Dataset{
		Name:        r.Dataset,
		Description: r.Description,
		PrivacyUnit: r.PrivacyUnit,
		Tables:      map[string]*Table{},
		Analysts:    map[string]Budget{},
	}
	switch {
	case r.Dataset == "":
		v.errorf(nil, "missing key dataset: name the database analysts connect to, e.g. \"dataset: hospital\"")
	case !identRE.MatchString(r.Dataset):
		v.errorf(p("dataset"), "dataset %q is not a plain identifier; use letters, digits and underscores", r.Dataset)
	}
	if r.PrivacyUnit == "" {
		v.errorf(nil, "missing key privacy_unit: name the protected entity for humans, e.g. \"privacy_unit: patient\"")
	}
	d.Budget = v.budget(r.Budget)
	d.Defaults = v.defaults(r.Defaults, d.Budget)
	v.tables(r.Tables, d)
	v.sampleKey(d, r.SampleKeyFile)
	d.MinUnitsPerCell = v.minUnitsPerCell(r.MinUnitsPerCell)
	v.window(r.Budget, d)
	v.teams(r.Teams, d)
	for name, rb := range r.Analysts {
		path := p("analysts", name)
		if rb == nil {
			v.errorf(path, "analyst %q has no settings; write {epsilon: …} or remove the entry", name)
			continue
		}
		if rb.Accountant != "" || rb.GlobalEpsilon != nil || rb.GlobalDelta != nil || rb.IncidentLimit != nil || rb.MinEpsilonPerQuery != nil ||
			rb.Window != "" || rb.Lifetime != nil {
			v.errorf(path, "analyst %q: only epsilon and delta can be overridden per analyst", name)
		}
		var b Budget
		if rb.Epsilon != nil {
			if !finite(*rb.Epsilon) || *rb.Epsilon <= 0 {
				v.errorf(append(path, "epsilon"), "analyst %q: epsilon must be a positive number", name)
			} else if *rb.Epsilon < d.Budget.MinEpsilonPerQuery {
				v.errorf(append(path, "epsilon"), "analyst %q: epsilon (%g) is below budget.min_epsilon_per_query (%g), so no query could run; raise it or lower the floor", name, *rb.Epsilon, d.Budget.MinEpsilonPerQuery)
			}
			b.Epsilon = *rb.Epsilon
		}
		if rb.Delta != nil {
			if !finite(*rb.Delta) || *rb.Delta < 0 || *rb.Delta >= 1 {
				v.errorf(append(path, "delta"), "analyst %q: delta must be in [0, 1)", name)
			}
			b.Delta = *rb.Delta
		}
		d.Analysts[name] = b
	}
	return d
}

// maxMinUnitsPerCell bounds min_units_per_cell: statistical offices use
// thresholds of 3 to a few dozen; a larger one would suppress nearly every
// cell of a query at the ε a budget allows.
const maxMinUnitsPerCell = 1000

// minUnitsPerCell validates min_units_per_cell: absent (0, no
// suppression) or an integer in [2, maxMinUnitsPerCell] (1 would suppress
// only empty cells, which the noise already hides).
func (v *validator) minUnitsPerCell(k *float64) int {
	if k == nil {
		return 0
	}
	if !(*k >= 2 && *k <= maxMinUnitsPerCell) || *k != math.Trunc(*k) {
		v.errorf(p("min_units_per_cell"), "min_units_per_cell must be an integer from 2 to %d (e.g. 11: a cell is released only when about 11 units or more contribute to it); omit it for no minimum", maxMinUnitsPerCell)
		return 0
	}
	return int(*k)
}

func (v *validator) budget(r *rawBudget) Budget {
	var b Budget
	if r == nil {
		v.errorf(nil, "missing key budget: declare at least \"budget: {epsilon: 1.0}\"")
		return b
	}
	if r.Epsilon == nil {
		v.errorf(p("budget"), "missing key budget.epsilon: the total ε each analyst may spend on this dataset")
	} else if !finite(*r.Epsilon) || *r.Epsilon <= 0 {
		v.errorf(p("budget", "epsilon"), "budget.epsilon must be a positive number")
	} else {
		b.Epsilon = *r.Epsilon
	}
	if r.Delta != nil {
		if !finite(*r.Delta) || *r.Delta < 0 || *r.Delta >= 1 {
			v.errorf(p("budget", "delta"), "budget.delta must be in [0, 1); typical values are below 1/(number of units)")
		} else {
			b.Delta = *r.Delta
		}
	}
	b.Accountant = r.Accountant
	switch r.Accountant {
	case "":
		b.Accountant = AccountantPure
	case AccountantPure, AccountantAdvanced, AccountantRDP, AccountantZCDP, AccountantPLD:
	default:
		v.errorf(p("budget", "accountant"), "unknown accountant %q; use one of pure, advanced, rdp, zcdp, pld", r.Accountant)
	}
	if b.Accountant != AccountantPure && b.Delta == 0 && r.Delta != nil {
		v.errorf(p("budget", "delta"), "accountant %s needs budget.delta > 0", b.Accountant)
	}
	if r.GlobalEpsilon != nil {
		if !finite(*r.GlobalEpsilon) || *r.GlobalEpsilon <= 0 {
			v.errorf(p("budget", "global_epsilon"), "budget.global_epsilon must be a positive number (omit it for no global cap)")
		} else {
			b.GlobalEpsilon = *r.GlobalEpsilon
		}
	}
	if r.GlobalDelta != nil {
		if !finite(*r.GlobalDelta) || *r.GlobalDelta <= 0 || *r.GlobalDelta >= 1 {
			v.errorf(p("budget", "global_delta"), "budget.global_delta must be in (0, 1) (omit it for no global cap)")
		} else {
			b.GlobalDelta = *r.GlobalDelta
		}
	}
	b.IncidentLimit = 1
	if r.IncidentLimit != nil {
		if *r.IncidentLimit < 1 || *r.IncidentLimit > 10 {
			v.errorf(p("budget", "incident_limit"), "budget.incident_limit must be between 1 and 10: each incident can tell an analyst about one bit of one person's data")
		} else {
			b.IncidentLimit = *r.IncidentLimit
		}
	}
	b.MinEpsilonPerQuery = v.minEpsilonPerQuery(r, b)
	return b
}

func (v *validator) tables(raw map[string]*rawTable, d *Dataset) {
	if len(raw) == 0 {
		v.errorf(nil, "missing key tables: declare at least one table")
		return
	}
	for _, name := range sortedKeys(v.root, "tables", raw) {
		rt := raw[name]
		path := p("tables", name)
		if !identRE.MatchString(name) {
			v.errorf(path, "table name %q is not a plain identifier", name)
			continue
		}
		lname := strings.ToLower(name)
		if _, dup := d.Tables[lname]; dup {
			v.errorf(path, "table %q is declared twice (names are case-insensitive)", name)
			continue
		}
		if rt == nil {
			v.errorf(path, "table %q has no settings; declare unit_column and columns, or public: true", name)
			continue
		}
		t := &Table{Name: lname, Schema: "public", Public: rt.Public, Columns: map[string]*Column{}}
		if rt.Schema != "" {
			if !identRE.MatchString(rt.Schema) {
				v.errorf(append(path, "schema"), "schema %q is not a plain identifier", rt.Schema)
			}
			t.Schema = strings.ToLower(rt.Schema)
		}
		if rt.Public {
			if rt.UnitColumn != "" || rt.MaxGroupsPerUnit != nil || rt.MaxRowsPerUnit != nil {
				v.errorf(path, "public table %q cannot have unit_column or contribution limits; remove them or remove public: true", name)
			}
		} else {
			if rt.UnitColumn == "" {
				v.errorf(path, "table %q needs unit_column: the column that identifies the privacy unit (or public: true if it holds no personal data)", name)
			} else if !identRE.MatchString(rt.UnitColumn) {
				v.errorf(append(path, "unit_column"), "unit_column %q is not a plain identifier", rt.UnitColumn)
			}
			t.UnitColumn = strings.ToLower(rt.UnitColumn)
			t.MaxGroupsPerUnit = v.contribution(append(path, "max_groups_per_unit"), rt.MaxGroupsPerUnit, "max_groups_per_unit", "how many groups one unit may contribute to")
			t.MaxRowsPerUnit = v.contribution(append(path, "max_rows_per_unit"), rt.MaxRowsPerUnit, "max_rows_per_unit", "how many rows one unit may contribute to one group")
		}
		if rt.MaxRows != nil {
			if *rt.MaxRows < 1 || *rt.MaxRows > maxDeclaredRows {
				v.errorf(append(path, "max_rows"), "max_rows must be between 1 and %d (a bound on the table's rows, e.g. its expected size with room to grow)", int64(maxDeclaredRows))
			} else {
				t.MaxRows = *rt.MaxRows
			}
		}
		for _, cname := range sortedKeys(v.root, strings.Join(append(path, "columns"), "\x00"), rt.Columns) {
			c := v.column(append(path, "columns", cname), cname, rt.Columns[cname], t)
			if c == nil {
				continue
			}
			if _, dup := t.Columns[c.Name]; dup {
				v.errorf(append(path, "columns", cname), "column %q is declared twice (names are case-insensitive)", cname)
				continue
			}
			t.Columns[c.Name] = c
			t.ColumnOrder = append(t.ColumnOrder, c.Name)
		}
		if uc, ok := t.Columns[t.UnitColumn]; ok && uc.Hidden {
			v.errorf(append(path, "columns", t.UnitColumn), "the unit column cannot be access: none")
		}
		d.Tables[lname] = t
		d.TableOrder = append(d.TableOrder, lname)
	}
}

func (v *validator) contribution(path []string, x *int, key, what string) int {
	if x == nil {
		v.errorf(path[:len(path)-1], "missing key %s: %s (a positive integer)", key, what)
		return 0
	}
	if *x < 1 || *x > maxContribution {
		v.errorf(path, "%s must be between 1 and %d", key, maxContribution)
		return 0
	}
	return *x
}

func (v *validator) column(path []string, name string, rc *rawColumn, t *Table) *Column {
	if !identRE.MatchString(name) {
		v.errorf(path, "column name %q is not a plain identifier", name)
		return nil
	}
	c := &Column{Name: strings.ToLower(name)}
	if rc == nil {
		v.errorf(path, "column %q has no settings; write {type: …} or {access: none}", name)
		return nil
	}
	switch rc.Access {
	case "":
	case "none":
		c.Hidden = true
		if rc.Type != "" || rc.Lower != nil || rc.Upper != nil || rc.PublicValues != nil || rc.MaxRowsPerValue != nil {
			v.errorf(path, "column %q is access: none; it takes no other settings", name)
		}
		return c
	default:
		v.errorf(append(path, "access"), "unknown access %q; the only value is none (omit access for visible columns)", rc.Access)
		return nil
	}
	switch Type(rc.Type) {
	case TypeInt, TypeNumeric, TypeFloat, TypeText, TypeDate, TypeBool:
		c.Type = Type(rc.Type)
	case "":
		v.errorf(path, "column %q needs a type: int, numeric, float, text, date or bool", name)
		return nil
	default:
		v.errorf(append(path, "type"), "unknown type %q; use int, numeric, float, text, date or bool", rc.Type)
		return nil
	}
	if (rc.Lower == nil) != (rc.Upper == nil) {
		v.errorf(path, "column %q declares only one of lower and upper; declare both", name)
		return c
	}
	if rc.Lower != nil {
		v.bounds(path, c, *rc.Lower, *rc.Upper)
	}
	if rc.MaxRowsPerValue != nil {
		switch {
		case !t.Public:
			v.errorf(append(path, "max_rows_per_value"), "max_rows_per_value is for the join columns of public tables (it bounds the work of a join); protected tables are joined on their unit column only: remove it")
		case *rc.MaxRowsPerValue < 1 || *rc.MaxRowsPerValue > maxContribution:
			v.errorf(append(path, "max_rows_per_value"), "max_rows_per_value must be between 1 and %d", maxContribution)
		default:
			c.MaxRowsPerValue = *rc.MaxRowsPerValue
		}
	}
	if rc.PublicValues != nil {
		switch {
		case c.Type != TypeText && c.Type != TypeInt && c.Type != TypeBool && c.Type != TypeDate:
			v.errorf(append(path, "public_values"), "public_values are for text, int, bool and date columns")
		case len(rc.PublicValues) == 0:
			v.errorf(append(path, "public_values"), "public_values is empty; list the keys or remove it")
		case len(rc.PublicValues) > maxPublicValues:
			v.errorf(append(path, "public_values"), "public_values has more than %d keys", maxPublicValues)
		default:
			seen := map[string]bool{}
			for _, pv := range rc.PublicValues {
				if seen[pv] {
					v.errorf(append(path, "public_values"), "public value %q is listed twice", pv)
				}
				seen[pv] = true
				if c.Type == TypeInt && !integerRE.MatchString(pv) {
					v.errorf(append(path, "public_values"), "public value %q of int column %q is not an integer", pv, name)
				}
				if c.Type == TypeDate {
					if _, err := time.Parse("2006-01-02", pv); err != nil {
						v.errorf(append(path, "public_values"), "public value %q of date column %q is not YYYY-MM-DD", pv, name)
					}
				}
				if c.Type == TypeBool && pv != "true" && pv != "false" {
					v.errorf(append(path, "public_values"), "public value %q of bool column %q must be true or false", pv, name)
				}
			}
			c.PublicValues = append([]string(nil), rc.PublicValues...)
		}
	}
	return c
}

func (v *validator) bounds(path []string, c *Column, lo, hi string) {
	switch c.Type {
	case TypeInt, TypeNumeric, TypeFloat:
		re := decimalRE
		if c.Type == TypeInt {
			re = integerRE
		}
		if !re.MatchString(lo) || !re.MatchString(hi) {
			v.errorf(append(path, "lower"), "bounds of %s column %q must be %s numbers", c.Type, c.Name, map[bool]string{true: "integer", false: "decimal"}[c.Type == TypeInt])
			return
		}
		if significantDigits(lo) > 15 || significantDigits(hi) > 15 {
			// A float64 holds 15 significant decimal digits exactly: the
			// sensitivities read each bound as the float's shortest text
			// (sensitivity.Outward).
			v.errorf(append(path, "lower"), "bounds of column %q may have at most 15 significant digits; round them outwards", c.Name)
			return
		}
		l, err1 := strconv.ParseFloat(lo, 64)
		u, err2 := strconv.ParseFloat(hi, 64)
		if err1 != nil || err2 != nil || !finite(l) || !finite(u) || math.Abs(l) > maxAbsBound || math.Abs(u) > maxAbsBound {
			v.errorf(append(path, "lower"), "bounds of column %q must be finite numbers of magnitude at most %g", c.Name, maxAbsBound)
			return
		}
		if l > u {
			v.errorf(append(path, "lower"), "column %q: lower (%s) is greater than upper (%s); swap them", c.Name, lo, hi)
			return
		}
		c.LowerNum, c.UpperNum = l, u
	case TypeDate:
		l, err1 := time.Parse("2006-01-02", lo)
		u, err2 := time.Parse("2006-01-02", hi)
		if err1 != nil || err2 != nil {
			v.errorf(append(path, "lower"), "bounds of date column %q must be dates written YYYY-MM-DD", c.Name)
			return
		}
		if l.After(u) {
			v.errorf(append(path, "lower"), "column %q: lower (%s) is after upper (%s); swap them", c.Name, lo, hi)
			return
		}
		c.LowerNum, c.UpperNum = float64(l.Unix()/86400), float64(u.Unix()/86400)
	default:
		v.errorf(append(path, "lower"), "bounds are for int, numeric, float and date columns, not %s", c.Type)
		return
	}
	c.HasBounds = true
	c.Lower, c.Upper = lo, hi
}

// significantDigits counts the significant digits of a decimal's mantissa
// (leading zeros and a fraction's trailing zeros do not count).
func significantDigits(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimLeft(s, "+-")
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.Replace(s, ".", "", 1)
	}
	return len(strings.TrimLeft(s, "0"))
}
