package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Type is the declared type of a policy column.
type Type string

// Column types a policy may declare.
const (
	TypeInt     Type = "int"     // any PostgreSQL integer type
	TypeNumeric Type = "numeric" // numeric / decimal
	TypeFloat   Type = "float"   // real / double precision
	TypeText    Type = "text"    // text / varchar / char
	TypeDate    Type = "date"    // date
	TypeBool    Type = "bool"    // boolean
)

// Numeric reports whether values of the type can be summed.
func (t Type) Numeric() bool { return t == TypeInt || t == TypeNumeric || t == TypeFloat }

// Accountant names, as written in budget.accountant.
const (
	AccountantPure     = "pure"
	AccountantAdvanced = "advanced"
	AccountantRDP      = "rdp"
	AccountantZCDP     = "zcdp"
	AccountantPLD      = "pld"
)

// Mechanism names, as written in defaults.mechanism and SET dp.mechanism.
const (
	MechanismLaplace  = "laplace"
	MechanismGaussian = "gaussian"
)

// Dataset is one loaded, validated policy file. Immutable; safe for
// concurrent use.
type Dataset struct {
	Name        string // the database name analysts connect to
	Description string
	PrivacyUnit string
	Budget      Budget
	Defaults    Defaults
	// Tables by lower-case name; TableOrder lists them in file order.
	Tables     map[string]*Table
	TableOrder []string
	// Analysts holds per-analyst budget overrides by analyst name.
	Analysts map[string]Budget
	// Teams are analyst groups sharing one budget, by team name; teamOf
	// maps a member to their team (window.go).
	Teams  map[string]*Team
	teamOf map[string]string
	// Version identifies the file's content (hex SHA-256 prefix); cached
	// answers are only reused under the same version.
	Version string
	Path    string

	// MinUnitsPerCell, when > 0 (min_units_per_cell), is the smallest
	// number of units a released cell may rest on: every DP aggregate also
	// measures each group's distinct units after contribution bounding,
	// and a group whose noisy count is below it has its measures released
	// as NULL (release/minunits.go). Dataset-wide, not per table: a
	// dataset has one privacy unit and a join's cells are that unit's.
	MinUnitsPerCell int

	// sampleKey is the secret key of sample-and-aggregate's block
	// assignment (samplekey.go); unexported so that it is never marshalled
	// or printed with the dataset.
	sampleKey         []byte
	sampleKeyFromFile bool
}

// Budget is a privacy budget: per analyst, or the dataset-wide cap.
type Budget struct {
	Epsilon    float64
	Delta      float64
	Accountant string
	// GlobalEpsilon and GlobalDelta cap the sum over all analysts of this
	// dataset (collusion); zero means no global cap. Only set on the
	// dataset's own budget.
	GlobalEpsilon float64
	GlobalDelta   float64
	// IncidentLimit is the number of incidents (an error after a charge:
	// see release.Incident) after which an analyst's queries on this
	// dataset are suspended until the steward resumes them (dpproxy budget
	// resume). Default 1: the first incident suspends.
	IncidentLimit int
	// MinEpsilonPerQuery is the smallest ε one DP query may have (SET
	// dp.epsilon, defaults.epsilon); only set on the dataset's own budget,
	// DefaultMinEpsilonPerQuery when the file does not say. See
	// DefaultMinEpsilonPerQuery for why there is a floor.
	MinEpsilonPerQuery float64
	// Window, when > 0, is the budget's renewal period (budget.window):
	// Epsilon/Delta (and the global cap) are spent per window, and
	// Lifetime bounds the total over all windows (window.go). Only set on
	// the dataset's own budget.
	Window   time.Duration
	Lifetime Lifetime
}

// DefaultMinEpsilonPerQuery is budget.min_epsilon_per_query when the policy
// does not set it: 10⁻³.
//
// Why a floor (SECURITY.md G5): a query at a tiny ε
// costs nothing visible, so an analyst can repeat it for free; any channel
// that leaks more than ε per query (an error, a hang, a timeout that
// depends on one person's data) then becomes an oracle, and at ε = 10⁻¹⁶
// the noise scale of a count is 10¹⁶, beyond what float64 arithmetic
// handles exactly. At 10⁻³ a count's scale is 10³ and a query still costs
// a visible share of any sensible budget (3000 queries spend ε = 3). A
// steward who needs smaller per-query ε lowers it in the policy.
const DefaultMinEpsilonPerQuery = 1e-3

// EpsilonFloor returns the floor on one query's ε: MinEpsilonPerQuery, or
// DefaultMinEpsilonPerQuery when it is not a number > 0 (a Budget built in
// code rather than loaded from a file).
func (b Budget) EpsilonFloor() float64 {
	if b.MinEpsilonPerQuery > 0 {
		return b.MinEpsilonPerQuery
	}
	return DefaultMinEpsilonPerQuery
}

// Defaults are per-query defaults that sessions may override.
type Defaults struct {
	Epsilon   float64
	Delta     float64
	Mechanism string
	// Contribution is ContributionAuto when each query chooses its rows
	// per unit by DP within the table's max_rows_per_unit
	// (rewrite/autobounds.go), ContributionFixed (the default) when it
	// uses max_rows_per_unit as is.
	Contribution string
	// Clipping is ClippingAuto when each query chooses the clamping
	// bounds of its summed columns by DP inside the declared [lower,
	// upper] (rewrite/autoclip.go), ClippingFixed (the default) when it
	// clamps to [lower, upper] as declared.
	Clipping string
}

// Clipping modes (defaults.clipping, SET dp.clipping).
const (
	ClippingFixed = "fixed"
	ClippingAuto  = "auto"
)

// Contribution bound modes (defaults.contribution, SET dp.contribution).
const (
	ContributionFixed = "fixed"
	ContributionAuto  = "auto"
)

// Table is one table of the dataset.
type Table struct {
	Name   string // lower-case table name
	Schema string // PostgreSQL schema, default "public"
	// Public tables hold no personal data: no unit column, no bounds.
	Public           bool
	UnitColumn       string
	MaxGroupsPerUnit int // L0
	MaxRowsPerUnit   int // L∞ per group
	// MaxRows, when > 0, is the steward's declared bound on the table's
	// rows (max_rows): a public quantity, unlike the table's real size (an
	// exact row count is itself a statistic of the data). DP plans over
	// tables that all declare it get a work bound and a time slot fixed
	// before the charge (rewrite's dpplan.Work, issue 27); `dpproxy
	// doctor` checks it against the table. 0 when undeclared.
	MaxRows int64
	// UnitType is the type the unit column's literals are checked against
	// (int or text), learned from the live catalog before the dataset is
	// served (internal/catalog); UnitTypeName is the column's PostgreSQL
	// type. Both are empty when the catalog was not read; UnitType alone is
	// empty for other unit types (uuid, …), whose comparisons with
	// literals the planner refuses.
	UnitType     Type
	UnitTypeName string
	// UnitPGType is the unit column's base type (citext, numeric, int8,
	// …; internal/catalog, which refuses types whose equality is looser
	// than their text and that have no one text per value). The emitter
	// reads the unit as that one text (pgemit unitSQL). Empty when the
	// catalog was not read.
	UnitPGType string
	// Columns by lower-case name; ColumnOrder lists them in file order.
	Columns     map[string]*Column
	ColumnOrder []string
}

// Column is one declared column.
type Column struct {
	Name string // lower-case column name
	Type Type
	// Hidden columns (access: none) are never visible to analysts, not even
	// in the shadow catalog.
	Hidden bool
	// HasBounds is true when lower and upper were declared. For numeric
	// types LowerNum/UpperNum hold them; for dates Lower/Upper hold
	// YYYY-MM-DD and LowerNum/UpperNum hold days since 1970-01-01.
	HasBounds          bool
	Lower, Upper       string // canonical literal text of the bounds
	LowerNum, UpperNum float64
	// PublicValues are the declared key domain; a GROUP BY on this column
	// returns exactly these keys. Nil when none were declared.
	PublicValues []string
	// MaxRowsPerValue, when > 0, is the declared maximum number of rows of
	// the table that share one value of this column, declared on public
	// tables only: the work bound of a join on this column uses it
	// (dpplan/work.go); 0 when undeclared.
	MaxRowsPerValue int
	// PGType and Scale are the column's type in the data database (its
	// base type's name, e.g. int4, numeric, float8, date) and, for
	// numeric, its declared scale (0 when unconstrained), read from the
	// live catalog at start-up (internal/catalog.Verify) so that results
	// are typed as PostgreSQL types them; "" and 0 when not read.
	PGType string
	Scale  int
	// PadChars is n for a char(n) column (bpchar with a declared length),
	// whose values PostgreSQL stores padded with blanks to n characters,
	// so that their octet_length, which bounds what a condition reads
	// (pgemit boundedText), counts the padding; 0 otherwise. Read with
	// PGType.
	PadChars int
}

// Table returns the table with the given (case-insensitive) name.
func (d *Dataset) Table(name string) (*Table, bool) {
	t, ok := d.Tables[strings.ToLower(name)]
	return t, ok
}

// Allowance is the rows one unit may contribute to one query in all:
// max_rows_per_unit in each of max_groups_per_unit groups (an ungrouped
// query's bound; a grouped one keeps max_rows_per_unit per group).
func (t *Table) Allowance() int { return t.MaxRowsPerUnit * max(t.MaxGroupsPerUnit, 1) }

// Column returns the column with the given (case-insensitive) name. Hidden
// columns are returned too; callers must check Hidden.
func (t *Table) Column(name string) (*Column, bool) {
	c, ok := t.Columns[strings.ToLower(name)]
	return c, ok
}

// VisibleColumns returns the names of the columns analysts may see, in file
// order, with the unit column first if it is not declared.
func (t *Table) VisibleColumns() []string {
	var out []string
	if t.UnitColumn != "" {
		if _, declared := t.Columns[t.UnitColumn]; !declared {
			out = append(out, t.UnitColumn)
		}
	}
	for _, n := range t.ColumnOrder {
		if !t.Columns[n].Hidden {
			out = append(out, n)
		}
	}
	return out
}

// AnalystBudget returns the per-analyst budget of the named analyst: the
// override from the analysts section if any, else the dataset budget. The
// global caps are not part of the result.
func (d *Dataset) AnalystBudget(analyst string) Budget {
	b := d.Budget
	b.GlobalEpsilon, b.GlobalDelta = 0, 0
	if o, ok := d.Analysts[analyst]; ok {
		if o.Epsilon > 0 {
			b.Epsilon = o.Epsilon
		}
		if o.Delta > 0 {
			b.Delta = o.Delta
		}
	}
	return b
}

// ProtectedTables returns the lower-case names of the tables that are not
// public, sorted.
func (d *Dataset) ProtectedTables() []string {
	var out []string
	for n, t := range d.Tables {
		if !t.Public {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// String returns a short description for logs.
func (d *Dataset) String() string {
	return fmt.Sprintf("dataset %s (policy %s, version %s)", d.Name, d.Path, d.Version)
}

func sortStrings(s []string) { sort.Strings(s) }
