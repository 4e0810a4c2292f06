package proxy

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"
)

// Severities of ErrorResponse and NoticeResponse.
const (
	severityError   = "ERROR"
	severityFatal   = "FATAL"
	severityNotice  = "NOTICE"
	severityWarning = "WARNING"
)

const internalErrorMessage = "internal error"

// shadowError marks an error the shadow catalog database returned for an
// analyst's statement. The shadow holds no rows, so its messages carry no
// data and are forwarded faithfully (as PostgreSQL wrote them).
type shadowError struct{ pg *pgconn.PgError }

func (e *shadowError) Error() string    { return "shadow: " + e.pg.Error() }
func (e *shadowError) Unwrap() error    { return e.pg }
func (e *shadowError) SQLState() string { return e.pg.Code }

// errorResponse builds the ErrorResponse for err. It is the one place where
// errors become wire messages:
//
//   - a *pgerr.Error (every client-facing error of the project) is sent with
//     its code, message, detail, hint and position;
//   - a *shadowError is forwarded field by field;
//   - any other error with a SQLState() method is sent with its code and
//     its Error() text;
//   - anything else is XX000 "internal error" with no detail, and is logged
//     at Error.
//
// Errors of the DP path never reach the last two cases with upstream text:
// release maps data-dependent upstream errors to pgerr, and the DP route
// turns any error that is not a *pgerr.Error into XX000 (see dp.go).
func errorResponse(err error, severity string, log *zap.Logger) *pgproto3.ErrorResponse {
	if pe, ok := pgerr.As(err); ok {
		return &pgproto3.ErrorResponse{
			Severity: severity, SeverityUnlocalized: severity,
			Code: pe.Code, Message: pe.Message, Detail: pe.Detail, Hint: pe.Hint,
			Position: int32(pe.Position),
		}
	}
	var se *shadowError
	if errors.As(err, &se) {
		p := se.pg
		sev, sevU := p.Severity, p.SeverityUnlocalized
		if sev == "FATAL" || sev == "PANIC" {
			// The shadow session died; the client's session does not.
			sev, sevU = severityError, severityError
		}
		hint := p.Hint
		if p.Code == "42P01" && hint == "" {
			// A misspelt table (a new user's FROM vists) had no hint.
			hint = `the dataset's tables are listed by \dt in psql, or SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`
		}
		return &pgproto3.ErrorResponse{
			Severity: sev, SeverityUnlocalized: sevU, Code: p.Code,
			Message: p.Message, Detail: p.Detail, Hint: hint, Position: p.Position,
			InternalPosition: p.InternalPosition, InternalQuery: p.InternalQuery,
			Where: p.Where, SchemaName: p.SchemaName, TableName: p.TableName,
			ColumnName: p.ColumnName, DataTypeName: p.DataTypeName,
			ConstraintName: p.ConstraintName, File: p.File, Line: p.Line, Routine: p.Routine,
		}
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) && len(st.SQLState()) == 5 {
		return &pgproto3.ErrorResponse{
			Severity: severity, SeverityUnlocalized: severity,
			Code: st.SQLState(), Message: err.Error(),
		}
	}
	log.Error("internal error", zap.Error(err))
	return &pgproto3.ErrorResponse{
		Severity: severity, SeverityUnlocalized: severity,
		Code: pgerr.InternalError, Message: internalErrorMessage,
	}
}

// statementError maps the context errors of a statement to PostgreSQL's
// messages: a CancelRequest gives 57014 "canceling statement due to user
// request", statement_timeout gives 57014 "… due to statement timeout",
// and server shutdown gives 57P01. Other errors are returned unchanged.
func statementError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := pgerr.As(err); ok {
		return err
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return err
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStatementTimeout):
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to statement timeout").Wrap(err).
			WithHint("raise statement_timeout (SET statement_timeout = '60s') or ask for less; %s", chargeStandsHint)
	case errors.Is(cause, errCatalogTimeout):
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to statement timeout").Wrap(err).
			WithHint("catalog statements run for at most catalog_statement_timeout")
	case errors.Is(cause, errShutdown):
		return pgerr.New(adminShutdown, "terminating connection due to administrator command").Wrap(err)
	case errors.Is(cause, errCancelRequest), ctx.Err() != nil:
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request").Wrap(err).
			WithHint("%s", chargeStandsHint)
	}
	return err
}

// chargeStandsHint ends the hint of a cancelled statement: a DP query's
// charge is made before its data is read and never refunded (SECURITY.md
// G3), which a client that retries on 57014 should know (round 111).
const chargeStandsHint = "a DP query cancelled after its charge stays charged (SHOW dp.budget)"

// SQLSTATEs used only by the wire layer.
const (
	adminShutdown           = "57P01"
	idleSessionTimeout      = "57P05"
	cantChangeRuntimeParam  = "55P02"
	invalidSQLStatementName = "26000"
	duplicatePreparedStmt   = "42P05"
	invalidCursorName       = "34000"
	programLimitExceeded    = "54000"
	successfulCompletion    = "00000"
	undefinedParameter      = "42P02"
	duplicateCursor         = "42P03"
)

var (
	errStatementTimeout = errors.New("statement timeout")
	errCancelRequest    = errors.New("cancel request")
	errShutdown         = errors.New("server shutting down")
)

// writeRawFatal writes one FATAL ErrorResponse straight to the socket,
// bypassing the session's write buffer (used after a panic, when that buffer
// may hold part of a reply that must not be released).
func writeRawFatal(nc net.Conn, msg string) {
	b, err := (&pgproto3.ErrorResponse{
		Severity: severityFatal, SeverityUnlocalized: severityFatal,
		Code: pgerr.InternalError, Message: msg,
	}).Encode(nil)
	if err != nil {
		return
	}
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(b)
}

// errorCode returns the SQLSTATE the client gets for err.
func errorCode(err error) string {
	if pe, ok := pgerr.As(err); ok {
		return pe.Code
	}
	return errorResponse(err, severityError, zap.NewNop()).Code
}
