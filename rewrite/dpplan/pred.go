package dpplan

// Pred is a validated WHERE condition. Its SQL is produced by our emitter:
// columns are quoted names of policy columns, literals are typed and
// quoted by us, so the condition cannot raise a data-dependent error.
type Pred interface{ isPred() }

type PredBool struct {
	Op   string
	L, R Pred
} // AND / OR

type PredNot struct{ X Pred }

type PredConst struct{ V string } // TRUE / FALSE / NULL

type PredCol struct{ Col string } // a boolean column used as a condition

type PredCmp struct {
	Col, Op, Lit string // "col" op literal, or literal op literal when col is a literal
}

type PredIn struct {
	Col  string
	Lits []string
	Not  bool
}

type PredBetween struct {
	Col, Lo, Hi string
	Not         bool
}

type PredNull struct {
	Col string
	Not bool
}

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
