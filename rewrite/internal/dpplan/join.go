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
	RowsPerUnit  []int    `json:",omitempty"`
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
	if j.Shape == JoinKey {
		s += fmt.Sprintf("; rows per unit %v, rows per value %v of %v; changed rows E = %d", j.RowsPerUnit, j.RowsPerValue, j.KeyColumn, j.Changed)
	}
	return s
}
