package proxy

// Log field keys, in one place so that a grep finds every field the proxy
// logs. Values, query literals and passwords are never logged: statements
// appear as a fingerprint at Info and as truncated text at Debug only.
const (
	logKeyAddr        = "addr"
	logKeyActive      = "active"
	logKeyConnID      = "conn_id"
	logKeyRemote      = "remote"
	logKeyAnalyst     = "analyst"
	logKeyDataset     = "dataset"
	logKeyPanic       = "panic"
	logKeyStack       = "stack"
	logKeyRoute       = "route"
	logKeyFingerprint = "fingerprint"
	logKeyPlanHash    = "plan_hash"
	logKeyQuery       = "query"
	logKeySQLState    = "sqlstate"
	logKeyEpsilon     = "epsilon"
	logKeyDelta       = "delta"
	logKeyMechanism   = "mechanism"
	logKeyCached      = "cached"
	logKeyDuration    = "duration"
	logKeyTLS         = "tls"
	logKeyApplication = "application_name"
	logKeyMessage     = "message_type"
	logKeyError       = "error"
)

// maxDebugQuery is how much statement text a Debug log line carries.
const maxDebugQuery = 200
