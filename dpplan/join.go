// Privacy-critical: needs DP review.

package dpplan

import (
	"fmt"
	"strings"
)

// Join shapes (Join.Shape).
const (
	JoinPublic = "public" // one protected table and public tables
	JoinUnit   = "unit"   // protected tables joined on the privacy unit
	JoinKey    = "key"    // two protected tables on another key (elastic)
)

// Join is the FROM clause of a join query. Immutable once planned.
type Join struct {
	Shape  string
	Tables []JoinTable
	// Columns are the columns of the joined relation that the plan reads,
	// in order; Plan columns (Key.Column, Measure.Column, the unit) are
	// their Names.
	Columns []JoinColumn
	// Elastic (JoinKey) parameters: per table, the per-unit row cap C_T,
	// the join column and its declared multiplicity m_T; Changed is
	// E = 2·(C_A·m_B + C_B·m_A), the most joined rows one unit can change.
	// For a unit join (JoinUnit), RowsPerUnit is the per-unit cut C_T of
	// each protected input but the first before the join (0 for the first
	// and for public tables) and Fanout their product: the most joined
	// rows one row of the first protected table makes
	// (rewrite/join_shape.go, "Work of a unit join").
	RowsPerUnit  []int    `json:",omitempty"`
	Fanout       int      `json:",omitempty"`
	KeyColumn    []string `json:",omitempty"`
	RowsPerValue []int    `json:",omitempty"`
	Changed      int      `json:",omitempty"`
}

// JoinTable is one table of the FROM clause, in order.
type JoinTable struct {
	Name, Schema string
	Public       bool
	Unit         string // unit column ("" for public tables)
	Left         bool   // joined with LEFT JOIN
	On           []JoinOn
}

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
	if j.Shape == JoinKey {
		s += fmt.Sprintf("; rows per unit %v, rows per value %v of %v; changed rows E = %d", j.RowsPerUnit, j.RowsPerValue, j.KeyColumn, j.Changed)
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
