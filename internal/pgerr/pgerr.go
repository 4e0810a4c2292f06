// Package pgerr defines the client-facing error type of dpproxy: an error that
// carries a PostgreSQL SQLSTATE, a message, and a hint on how to fix the
// statement. proxy/ turns every such error into one ErrorResponse; anything
// else becomes XX000 with no detail.
//
// Errors are an output channel. Message, Detail and Hint must never contain
// result values, exact counts, noiseless aggregates or the text of
// data-dependent upstream errors.
//
// Codes used by dpproxy:
//
//	42601  syntax error
//	42501  the policy forbids the table, column or statement
//	42P01  undefined table (in the policy's view of the dataset)
//	42703  undefined column
//	0A000  no DP rewrite for this query shape
//	53400  privacy budget exhausted
//	22023  bad setting value
//	57014  query cancelled
//	08P01  protocol violation
//	28P01  authentication failed
//	3D000  unknown database (dataset)
//	55000  the data database's column types changed since start-up
//	58000  upstream or ledger unavailable (the query was not answered)
//	XX000  internal error
package pgerr

import (
	"errors"
	"fmt"
)

// SQLSTATE codes used across the project.
const (
	SyntaxError            = "42601"
	InsufficientPrivilege  = "42501"
	UndefinedTable         = "42P01"
	UndefinedColumn        = "42703"
	UndefinedParameter     = "42P02"
	FeatureNotSupported    = "0A000"
	ConfigurationLimit     = "53400"
	InvalidParameterValue  = "22023"
	QueryCanceled          = "57014"
	ProtocolViolation      = "08P01"
	InvalidPassword        = "28P01"
	InvalidAuthorization   = "28000"
	InvalidCatalogName     = "3D000"
	SystemError            = "58000"
	InternalError          = "XX000"
	InFailedTransaction    = "25P02"
	UndefinedObject        = "42704"
	ReadOnlyTransaction    = "25006"
	TooManyConnections     = "53300"
	ProgramLimitExceeded   = "54000"
	ActiveSQLTransaction   = "25001"
	NoActiveSQLTransaction = "25P01"
	// ObjectNotInPrerequisiteState: the data database's column types
	// changed since start-up (internal/upstream, catalog.GuardSQL).
	ObjectNotInPrerequisiteState = "55000"
)

// ErrCatalogChanged marks the error of a DP query whose transaction found
// the policy's columns with other types than at start-up
// (internal/upstream's guard, catalog.GuardSQL): an error of the schema,
// not of any row, so release reports it as itself and records no incident.
var ErrCatalogChanged = errors.New("the data database's column types changed since start-up")

// Error is a client-facing error with a SQLSTATE. Safe for concurrent use
// (immutable once built).
type Error struct {
	Code    string // SQLSTATE, five characters
	Message string // primary message: what was refused or went wrong
	Detail  string // optional: why
	Hint    string // optional: what to write instead
	// Position is the 1-based character position in the statement the error
	// refers to, or 0.
	Position int
	Err      error // optional wrapped cause; never shown to the client
}

// New returns an Error with the given code and formatted message.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithHint returns a copy of e with the hint set.
func (e *Error) WithHint(format string, args ...any) *Error {
	c := *e
	c.Hint = fmt.Sprintf(format, args...)
	return &c
}

// WithDetail returns a copy of e with the detail set.
func (e *Error) WithDetail(format string, args ...any) *Error {
	c := *e
	c.Detail = fmt.Sprintf(format, args...)
	return &c
}

// WithPosition returns a copy of e pointing at a 1-based character position.
func (e *Error) WithPosition(pos int) *Error {
	c := *e
	c.Position = pos
	return &c
}

// Wrap returns a copy of e that wraps err (for logs and errors.Is; the cause
// is never sent to the client).
func (e *Error) Wrap(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return e.Code + ": " + e.Message + " (hint: " + e.Hint + ")"
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// SQLState returns the SQLSTATE code; the method name matches pgconn.PgError.
func (e *Error) SQLState() string { return e.Code }

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe, true
	}
	return nil, false
}

// Truncate shortens s to at most n bytes (on a rune boundary), marking the
// cut with an ellipsis: for statement texts and values quoted in messages.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
