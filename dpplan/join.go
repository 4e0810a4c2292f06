// Privacy-critical: needs DP review.

package dpplan

// # The shapes of a join and their sensitivity
//
// rewrite parses a FROM clause with joins into a Join; nothing it decides
// is trusted: VerifyJoin (join_check.go) checks every fact below against
// the policy before a join is calibrated.
//
// Neighbouring databases differ by all rows of one privacy unit x, in every
// protected table (the dataset has one privacy unit; each protected table
// names the column that holds it). Public tables hold no personal data and
// are the same in both databases.
//
//   - JoinPublic: one protected table P joined (JOIN or P LEFT JOIN T) to
//     public tables on any columns. Every joined row contains exactly one
//     row of P and is attributed to P's unit. The joined rows of x are
//     exactly the joined rows that contain a row of x, so removing x
//     removes them and changes no other joined row. Contribution bounding
//     (rows per unit and group, groups per unit, bounds.go) is applied to
//     the joined rows, so the guarantee of bounds.go holds unchanged,
//     whatever the multiplicity of the public join key: a public row that
//     matches many rows of x multiplies x's joined rows, and the bounding
//     cuts them back. No uniqueness declaration is needed for privacy (on
//     data where the key is not unique, answers are computed on the
//     multiplied rows and bounded like any other rows).
//   - JoinUnit: several protected tables, each joined to an earlier one by
//     an equality of their unit columns (ON a.unit = b.unit, or USING the
//     unit when the columns share a name), plus public tables. Every
//     protected row of a joined row belongs to the same unit (a LEFT JOIN
//     may leave the later rows absent), so again the joined rows of x are
//     exactly those containing a row of x, and bounding after the join
//     gives the guarantee of bounds.go. The contribution limits are the
//     largest of the joined tables' (the noise is calibrated to them).
//
// Protected tables joined on anything but their units are refused; the
// planner's hint is to add the unit equality, which makes a JoinUnit of
// the same tables (elastic joins on another key were removed, issue 28).
//
// Every choice is in the order of a hash of the row (or of the unit and
// keys, bounds.go), fixed per row, so the bounds hold whatever the data;
// no random() (which would keep PostgreSQL from parallel plans).
//
// # Work of a unit join
//
// Every protected input of a unit join but the first is cut, before the
// join, to at most C_T = max_groups_per_unit·max_rows_per_unit rows per
// unit (its whole allowance in any one query; pgemit's joinFromSQL), so
// each row of the first protected table joins at most F = Π C_T rows: a
// unit with n rows there makes at most n·F joined rows, linear in its own
// rows as a scan of one table is, whatever its rows elsewhere (work.go).
// The cut is a function of the unit's own rows (a fixed hash order of the
// row's values), so neighbouring databases still differ only in that
// unit's joined rows, and bounding after the join gives the guarantee
// above unchanged. Plans whose F or number of protected inputs exceed
// MaxJoinFanout and MaxUnitJoinInputs are refused before any charge.
//
// # Private group keys and quantiles over joins
//
// In both shapes the joined relation is bounded per unit after the join
// exactly as bounds.go bounds one table, so what partition selection
// (Wilson et al. 2020 §3) and the quantiles (quantile.go) rest on holds
// unchanged: adding or removing u changes its distinct-unit count by at
// most 1 in at most L0 groups and no other unit's (unit, group) rows; a
// group that exists only because of u has count 1; and u adds or removes
// at most R = the join's max_rows_per_unit values of each of at most L0
// groups (the quantile SQL is the single-table one over the joined
// relation). A key may be a column of a public table too: which of its
// values appear depends on which protected rows join them, so it needs
// partition selection unless it has public_values.

// Join shapes (Join.Shape).
const (
	JoinPublic = "public" // one protected table and public tables
	JoinUnit   = "unit"   // protected tables joined on the privacy unit
)

// Join is the FROM clause of a join query. Immutable once planned.
type Join struct {
	Shape  string
	Tables []JoinTable
	// Columns are the columns of the joined relation that the plan reads,
	// in order; Plan columns (Key.Column, Measure.Column, the unit) are
	// their Names.
	Columns []JoinColumn
	// For a unit join (JoinUnit), RowsPerUnit is the per-unit cut C_T of
	// each protected input but the first before the join (0 for the first
	// and for public tables) and Fanout their product: the most joined
	// rows one row of the first protected table makes
	// ("Work of a unit join" above).
	RowsPerUnit []int `json:",omitempty"`
	Fanout      int   `json:",omitempty"`
}

// JoinTable is one table of the FROM clause, in order.
type JoinTable struct {
	Name, Schema string
	Public       bool
	Unit         string // unit column ("" for public tables)
	// UnitPGType is the unit column's base type (policy.Table.UnitPGType,
	// "" when the catalog was not read): pgemit bounds its values' size.
	UnitPGType string `json:",omitempty"`
	Left       bool   // joined with LEFT JOIN
	On         []JoinOn
	// Texts are the table's text columns (policy type text), sorted,
	// for a protected table: the join reads their values through a
	// length test (MaxJoinTextBytes) where it would read them whole.
	Texts []string `json:",omitempty"`
}

// MaxJoinTextBytes bounds the text values of protected tables that a
// join reads whole (pgemit join_sql.go): a longer value is NULL in a
// later protected table of a unit join (whose cut hashes and sorts each
// row's values) and to a join condition of a protected table (a hash
// join hashes the key, a merge join compares it), as a longer unit value
// has no unit (MaxUnitBytes). A NULL value is a function of the row's own
// value, so the joined rows of a unit stay a function of its own rows and
// the guarantee above is unchanged. octet_length reads the length from
// the value's header, not the value (TestAttack107_LongTextJoinTime).
const MaxJoinTextBytes = 1024

// JoinOn is an equality of the ON (or USING) clause of a table: the column
// Column of Tables[Table] (an earlier table) equals this table's Other.
type JoinOn struct {
	Table  int
	Column string
	Other  string
}

// JoinColumn is a column of the joined relation: Tables[Table].Column,
// named Name.
type JoinColumn struct {
	Name   string
	Table  int
	Column string
}
