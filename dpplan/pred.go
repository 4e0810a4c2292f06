package dpplan

// Pred is a validated WHERE condition. Its SQL is produced by our emitter:
// columns are quoted names of policy columns, literals are typed and
// quoted by us, so the condition cannot raise a data-dependent error.
type Pred interface{ isPred() }

// PredBool is L AND R or L OR R (Op).
type PredBool struct {
	Op   string
	L, R Pred
} // AND / OR

// PredNot is NOT X.
type PredNot struct{ X Pred }

// PredConst is a constant condition.
type PredConst struct{ V string } // TRUE / FALSE / NULL

// PredCol is a boolean column (quoted name) used as a condition.
type PredCol struct{ Col string } // a boolean column used as a condition

// PredCmp is a comparison of a column (quoted name) with a literal
// written by the planner, or of two literals.
type PredCmp struct {
	Col, Op, Lit string // "col" op literal, or literal op literal when col is a literal
}

// PredIn is Col [NOT] IN (Lits).
type PredIn struct {
	Col  string
	Lits []string
	Not  bool
}

// PredBetween is Col [NOT] BETWEEN Lo AND Hi.
type PredBetween struct {
	Col, Lo, Hi string
	Not         bool
}

// PredNull is Col IS [NOT] NULL.
type PredNull struct {
	Col string
	Not bool
}

// PredLike is Col [NOT] LIKE or ILIKE Pattern (a string constant
// the planner checked and wrote).
type PredLike struct {
	Col, Pattern string
	Not, ILike   bool
}

func (PredBool) isPred() {}

func (PredNot) isPred() {}

func (PredConst) isPred() {}

func (PredCol) isPred() {}

func (PredCmp) isPred() {}

func (PredIn) isPred() {}

func (PredBetween) isPred() {}

func (PredNull) isPred() {}

func (PredLike) isPred() {}
