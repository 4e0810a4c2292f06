package rewrite

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Rewrite validates one DP statement against the policy and plans it. Every
// error is a *pgerr.Error with a SQLSTATE and a hint.
//
// The statement is lexed by our PostgreSQL lexer, normalized (normalize.go)
// into text the TiDB parser reads with the same structure, parsed, and then
// checked and planned by this package (build.go, pred.go); Plan.SQL comes
// from our emitter (pgemit/bounds_sql.go) over the plan, never from analyst text.
func Rewrite(ds *policy.Dataset, stmt string) (*Plan, error) {
	if ds == nil {
		return nil, pgerr.New(pgerr.InternalError, "rewrite: no policy")
	}
	if err := CheckText(stmt); err != nil { // depth.go; plan's own re-plans skip it
		return nil, err
	}
	return plan(ds, stmt, Options{})
}

// Options are the session settings that change a plan (SET dp.…); see
// dpplan.Options.
type Options = dpplan.Options

// RewriteWith is Rewrite with session options.
func RewriteWith(ds *policy.Dataset, stmt string, opts Options) (*Plan, error) {
	if ds == nil {
		return nil, pgerr.New(pgerr.InternalError, "rewrite: no policy")
	}
	if err := CheckText(stmt); err != nil { // depth.go
		return nil, err
	}
	return plan(ds, stmt, opts)
}
