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
// the same tables. (Elastic joins on another key with declared
// multiplicities, after Johnson, Near, Song, VLDB 2018, were answered
// until December 2026 and removed, issue 28: one unit changed up to
// E = 2·(C_A·m_B + C_B·m_A) joined rows, 320 with the example policy's
// limits, so a count's sensitivity was 320 where the unit join of the
// same tables has 3, and their argument was the largest one here.)
//
// Every choice is in the order of a hash of the row (or of the unit and
// keys, bounds.go), fixed per row, so the bounds hold whatever the data;
// no random() (which would keep PostgreSQL from parallel plans).
//
// # Work of a unit join
//
// (Issue 27.) Without a bound, n rows of one unit in
// each of k copies of a table made n^k joined rows upstream, and the time
// to answer showed whether a person had a value. So every protected input
// of a unit join but the first is cut, before the join, to at most
// C_T = max_groups_per_unit·max_rows_per_unit rows per unit (its whole
// allowance in any one query; pgemit's joinFromSQL), and each row of the
// first protected table then joins at most F = Π C_T rows: a unit with n
// rows there makes at most n·F joined rows, linear in its own rows as a
// scan of one table is, whatever its rows elsewhere. The first table is
// not cut (its rows are bounded after the join, and cutting it too would
// cost a sort of the largest input for nothing).
//
// The cut is a function of the unit's own rows (a fixed hash order of the
// row's values), so neighbouring databases still differ only in that
// unit's joined rows, and bounding after the join (bounds.go) gives
// the guarantee of join.go unchanged. Plans whose F or number of protected
// inputs exceed MaxJoinFanout and MaxUnitJoinInputs are refused before any
// charge.
//
// # Private group keys in joins
//
// Partition selection rests on two facts about the SQL's per-group count n
// of distinct units after contribution bounding (bounds.go, Wilson et al.
// 2020 §3):
//
//	(a) adding or removing one unit u changes n by at most 1 in each group,
//	    in at most L0 groups, and changes no other unit's (unit, group)
//	    rows;
//	(b) a group that exists only because of u (it has no rows without u)
//	    has n = 1, so the threshold, calibrated for n = 1, keeps it with
//	    probability at most δ_p.
//
// # JoinPublic and JoinUnit: allowed
//
// In both shapes every joined row contains rows of exactly one unit, the
// primary table's unit (join.go: public tables hold no units; in a unit
// join all protected rows of a joined row share the unit). So the joined
// rows of u are exactly those containing a row of u, removing u removes
// them and changes no other joined row, and bounds.go bounds the joined
// relation per unit exactly as it bounds one table: (a) and (b) hold
// unchanged. The key may be a column of any joined table, also of a public
// one: which values of a public column appear depends on which protected
// rows join them, which is why such a column needs partition selection too
// (unless it has public_values).
//
// # Quantiles over joins
//
// Quantiles (percentile_cont, percentile_disc, MIN, MAX; quantile.go) over
// joins and with private group keys (issue 9).
//
// The quantile method rests on one fact about the values a group's SQL
// summary is computed from: adding or removing one unit adds or removes at
// most R values of each group, in at most L0 groups (R = Quantile.Rows =
// Measure.LInf). The exponential method's utilities then move by at most R
// (release/quantile.go). So a quantile is answered over a join exactly
// when the join shape gives such an R:
//
//   - JoinPublic and JoinUnit: the joined relation is bounded per unit
//     after the join by bounds.go (join.go: every joined row holds rows of
//     exactly one unit), with R = the join's max_rows_per_unit and L0 = its
//     max_groups_per_unit (capped by the number of groups); the quantile SQL
//     is the single-table one (per (unit, group) arrays of at most R values,
//     quantileUnitSQL) over the joined relation.
//
// With a private group key (release/partition.go) the groups
// are chosen by DP partition selection and the quantile is released for
// the kept groups only (release/partition.go); the per-group facts above
// are unchanged, since partition selection only adds the unit-count column.

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
// the value's header; the value itself, compressed, can be 90 times its
// stored size: one patient's 20 visits with diagnoses of 100 MB
// (1.1 MB stored each) made a unit join's cut 17.5 s slower, past its
// 16 s slot, and a hash join on the diagnosis 2.2 s slower, past its
// 1 s slot (attack round 107).
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
