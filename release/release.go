// Privacy-critical: needs DP review.

package release

import (
	"context"
	"errors"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Upstream runs emitted SQL on the data database and returns every value as
// text (NULL as nil). Implementations run it in a READ ONLY transaction with
// a statement timeout.
type Upstream interface {
	Query(ctx context.Context, sql string) ([][]*string, error)
}

// Config configures a Releaser.
type Config struct {
	Ledger accountant.Store
}

// Releaser is the one path that turns a plan into released numbers:
// reserve → run → noise → record. Safe for concurrent use.
type Releaser struct{ cfg Config }

// New returns a Releaser.
func New(cfg Config) (*Releaser, error) { return &Releaser{cfg: cfg}, nil }

// Request is one DP query of one analyst.
type Request struct {
	Analyst   string
	Dataset   *policy.Dataset
	Plan      *rewrite.Plan
	Epsilon   float64 // the query's ε (session dp.epsilon or the policy default)
	Delta     float64
	Mechanism string // policy.MechanismLaplace or policy.MechanismGaussian
	Upstream  Upstream
}

// Column is one result column.
type Column struct {
	Name   string
	PGType string // "int8", "numeric", "text", "int4", "date", "bool"
}

// Result is a released answer.
type Result struct {
	Columns []Column
	Rows    [][]*string // text values, NULL as nil
	// Notice is the text of the NOTICE sent with the rows: cost, remaining
	// budget, 95% error half-width per column.
	Notice string
}

// Run answers the request or returns a *pgerr.Error.
func (r *Releaser) Run(ctx context.Context, req Request) (*Result, error) {
	return nil, errors.New("release: not implemented")
}
