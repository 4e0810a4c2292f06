package rewrite

import "github.com/dpproxy/dpproxy/internal/pgerr"

// SessionKind is the kind of a session statement.
type SessionKind int

// Session statement kinds.
const (
	SessionSet        SessionKind = iota // SET [SESSION|LOCAL] name {=|TO} value; SET TIME ZONE v; SET NAMES v
	SessionReset                         // RESET name | RESET ALL
	SessionShow                          // SHOW name | SHOW ALL
	SessionBegin                         // BEGIN | START TRANSACTION [modes]
	SessionCommit                        // COMMIT | END
	SessionRollback                      // ROLLBACK | ABORT
	SessionDiscard                       // DISCARD ALL|PLANS|SEQUENCES|TEMP
	SessionDeallocate                    // DEALLOCATE [PREPARE] name|ALL
	SessionCharacteristics               // SET SESSION CHARACTERISTICS AS TRANSACTION …
)

// SessionStmt is a parsed session statement.
type SessionStmt struct {
	Kind SessionKind
	// Name is the lower-case setting name: "dp.epsilon", "application_name",
	// "timezone" (for SET TIME ZONE), "transaction isolation level", "all"…
	Name string
	// Value is the SET value as text with quotes removed ("DEFAULT" is
	// reported as Default=true); several comma-separated values are joined
	// with ", ".
	Value   string
	Default bool
	Local   bool // SET LOCAL
}

// ParseSession parses a session statement (a statement Classify routed to
// RouteSession).
func ParseSession(stmt string) (*SessionStmt, error) {
	return nil, pgerr.New(pgerr.FeatureNotSupported, "not implemented")
}
