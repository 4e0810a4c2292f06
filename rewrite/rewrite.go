package rewrite

import (
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Route is where the proxy sends a statement.
type Route int

// Routes.
const (
	RouteEmpty   Route = iota // only whitespace and comments
	RouteSession              // SET/SHOW/RESET/BEGIN/COMMIT/ROLLBACK…: answered by the proxy
	RouteCatalog              // names no protected table: the shadow catalog
	RouteDP                   // names a protected table: the DP path
	RouteRefuse               // never answered (writes, COPY, …); see the error
)

// Rewrite validates one DP statement against the policy and plans it. Every
// error is a *pgerr.Error with a SQLSTATE and a hint.
func Rewrite(ds *policy.Dataset, stmt string) (*Plan, error) {
	return nil, pgerr.New(pgerr.FeatureNotSupported, "not implemented")
}
