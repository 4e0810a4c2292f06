// Privacy-critical: needs DP review.

package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5/pgconn"
)

// An error after the charge is an incident, not a message (issue 14,
// SECURITY.md G5, ledger/incident.go).
//
// Once a query is charged, whatever goes wrong — the emitted SQL raised an
// error or timed out, a value could not be read, the noise could not be
// added, a panic — may depend on one person's data. So the analyst gets one
// fixed error (IncidentMessage), whatever failed: no SQLSTATE, text or
// timing of the upstream error reaches them; the incident is recorded in
// the ledger, with the upstream SQLSTATE but never its message; and the
// ledger's circuit breaker suspends the analyst on the dataset when their
// incidents reach the policy's incident_limit. Even a construct nobody has
// thought of yet yields at most incident_limit bits, never an oracle.
//
// Availability failures — the data server's connection lost or refused,
// the server shutting down, the proxy itself shutting down — do not depend
// on a row: they get their own error and do not trip the breaker.

// IncidentMessage is the message of the one error every incident gets.
const IncidentMessage = "the DP query failed after its privacy charge; the data steward has been notified"

// ErrIncident marks the fixed incident error.
var ErrIncident = errors.New("incident after a charge")

func incidentError() *pgerr.Error {
	return pgerr.New(pgerr.InternalError, "%s", IncidentMessage).
		WithDetail("The privacy budget for this query stays charged. Your DP queries on this dataset may be suspended until the steward has reviewed the incident.").
		WithHint("ask the data steward to look at the incident log (dpproxy budget show)").
		Wrap(ErrIncident)
}

// charged is the state of one Run once its charge is durable.
type charged struct {
	res *accountant.Reservation // nil until Reserve succeeded
	key string                  // the query's fingerprint (cacheKey)
}

// incidentTimeout bounds the ledger write of an incident, which runs even
// when the statement's context is done.
const incidentTimeout = 5 * time.Second

// afterCharge turns an error (or a recovered panic) after the charge into
// what the analyst sees, recording incidents.
func (r *Releaser) afterCharge(ctx context.Context, req Request, ch *charged, err error, panicked bool) error {
	if pe, ok := pgerr.As(err); ok && errors.Is(err, pgerr.ErrCatalogChanged) && !panicked {
		// The types of the policy's columns changed (internal/upstream's
		// guard): a fact of the schema, read from pg_catalog after the
		// query, not of any row. No incident; the rows were withheld.
		return pe.WithDetail("The privacy budget for this query stays charged; no answer was released. Until dpproxy restarts, DP queries on this dataset are refused before their charge.")
	}
	kind, state, avail := classify(ctx, err)
	if panicked {
		kind, state, avail = "panic", "", false
	}
	if avail {
		return pgerr.New(pgerr.SystemError, "the data database became unavailable during the DP query").
			WithDetail("The privacy budget for this query stays charged.").
			WithHint("retry later; the answer is not cached").Wrap(err)
	}
	if (kind == "timeout" || sharedResource(state)) && req.Contended != nil && req.Contended() {
		// Another analyst's statement ran on the dataset meanwhile: the
		// time-out, or the server's memory, disk or shared-memory segments
		// running out, may be theirs, and one analyst must not be able to
		// get another suspended by loading the data server
		// (TestAttack42_*). An availability failure: no incident, no
		// suspension. With no other analyst's load these stay the analyst's
		// incident, even within the plan's work bound: that bound counts
		// rows, not the bytes of their values, which a person's data can
		// make large.
		code, msg := state, "the data database ran out of resources during the DP query while other DP queries ran"
		if kind == "timeout" {
			code, msg = pgerr.QueryCanceled, "the DP query did not finish in time: the data database was too busy"
		}
		return pgerr.New(code, "%s", msg).
			WithDetail("The privacy budget for this query stays charged; this is not counted as an incident.").
			WithHint("retry when the data database is less busy; the answer is not cached").Wrap(err)
	}
	inc := accountant.Incident{
		Analyst: req.Analyst, Dataset: req.Dataset.Name, ChargeID: ch.res.ID,
		Fingerprint: ch.key, Kind: kind, SQLState: state,
	}
	// The incident reaches the ledger at the error's publish time, not when
	// it happened: the suspension it may open shows at once to the
	// analyst's other sessions (Reserve refuses a suspended analyst before
	// it checks the budget), so writing it at once would show the moment of
	// the failure, which the time slot hides from the error itself
	// (TestAttack85_IncidentWrittenAtPublishTime). The wait ignores ctx: a
	// session that ends must not make the write early. The error then says
	// when it was ready (ErrorReadyAt), for the proxy's padding.
	failedAt := time.Now()
	r.pending.Add(1)
	defer r.pending.Add(-1)
	if d := time.Until(publishTime(req, failedAt)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.stopping: // the proxy stops: written now, no answer goes out
		}
		t.Stop()
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), incidentTimeout)
	defer cancel()
	if _, err := r.ledger.RecordIncident(ictx, req.Dataset, inc); err != nil {
		// The ledger could not record it (and logged why): suspend the
		// analyst in this process, so a ledger outage cannot turn the
		// breaker into a free oracle, and record it once the ledger
		// answers, so that the other proxies sharing the ledger, a
		// restart and the steward see it (TestAttack45_*).
		key := suspensionKey(req)
		r.addUnrecorded(key, 1)
		go r.recordLater(req.Dataset, inc, key)
	}
	return &readyError{error: incidentError(), at: failedAt}
}

// Stop has the incidents still waiting for their publish time written at
// once, and waits for them (at most until ctx ends): the proxy calls it
// when it stops, before it closes the ledger
// (TestReleaser_StopWritesWaitingIncidents). Writing them then shows only
// when the proxy stopped, not when they happened; their statements get no
// reply.
func (r *Releaser) Stop(ctx context.Context) {
	r.stopOnce.Do(func() { close(r.stopping) })
	for r.pending.Load() > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// readyError is an incident's error, returned at its publish time, with
// the moment it happened.
type readyError struct {
	error
	at time.Time
}

func (e *readyError) Unwrap() error { return e.error }

// ErrorReadyAt returns when the error a DP statement's release returned
// was ready, and the error: for an incident, the moment of the failure
// (its error is returned at its publish time, after the incident is
// written, and is padded from the moment it happened); for any other
// error, now.
func ErrorReadyAt(err error) (time.Time, error) {
	var re *readyError
	if errors.As(err, &re) {
		return re.at, re.error
	}
	return time.Now(), err
}

// Retries of an incident the ledger could not record: the first after
// incidentRetryFirst, each next one twice as late, at most
// incidentRetryMax apart.
var (
	incidentRetryFirst = 250 * time.Millisecond
	incidentRetryMax   = 30 * time.Second
)

// recordLater records inc until the ledger accepts it, then counts it
// recorded: once every incident of the analyst on the dataset is (several
// can fail at once, one per DP statement they may run concurrently), the
// analyst's standing is the ledger's (suspended there when the incidents
// reached the dataset's incident_limit), not this process's. One
// goroutine per unrecorded incident; the analyst is refused here
// meanwhile, so starts no other.
func (r *Releaser) recordLater(ds *policy.Dataset, inc accountant.Incident, key string) {
	wait := incidentRetryFirst
	for {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), incidentTimeout)
		_, err := r.ledger.RecordIncident(ctx, ds, inc)
		cancel()
		if err == nil {
			r.addUnrecorded(key, -1)
			return
		}
		wait = min(2*wait, incidentRetryMax)
	}
}

// addUnrecorded adds d to the count of key's unrecorded incidents.
func (r *Releaser) addUnrecorded(key string, d int) {
	r.unrecordedMu.Lock()
	defer r.unrecordedMu.Unlock()
	if r.unrecorded == nil {
		r.unrecorded = map[string]int{}
	}
	if r.unrecorded[key] += d; r.unrecorded[key] <= 0 {
		delete(r.unrecorded, key)
	}
}

func suspensionKey(req Request) string { return req.Analyst + "\x00" + req.Dataset.Name }

// suspendedHere refuses, before any charge, an analyst whose incident the
// ledger could not record.
func (r *Releaser) suspendedHere(req Request) error {
	r.unrecordedMu.Lock()
	n := r.unrecorded[suspensionKey(req)]
	r.unrecordedMu.Unlock()
	if n == 0 {
		return nil
	}
	return &pgerr.Error{
		Code:    pgerr.InsufficientPrivilege,
		Message: fmt.Sprintf("DP queries of %s on dataset %s are suspended after an incident", req.Analyst, req.Dataset.Name),
		Detail:  "An earlier query failed after its privacy charge and the ledger could not record it yet. The query was not run and nothing was charged.",
		Hint:    "ask the data steward to review the proxy's log; once the ledger records the incident, its own suspension applies (dpproxy budget show)",
		Err:     accountant.ErrSuspended,
	}
}

// sharedResource: PostgreSQL's class 53 errors of a resource all
// statements share (53000 insufficient_resources, such as dynamic shared
// memory segments; 53100 disk_full, temporary files or /dev/shm; 53200
// out_of_memory), which concurrent statements exhaust together.
func sharedResource(sqlstate string) bool {
	return sqlstate == "53000" || sqlstate == "53100" || sqlstate == "53200"
}

// classify says what failed: the incident kind, the upstream SQLSTATE
// (never the message) and whether it is an availability failure.
func classify(ctx context.Context, err error) (kind, sqlstate string, availability bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == pgerr.QueryCanceled:
			return "timeout", pe.Code, false
		case len(pe.Code) == 5 && pe.Code[:2] == "08", // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutdown, crash, cannot connect now
			pe.Code == "53300": // too many connections
			return "upstream", pe.Code, true
		}
		return "upstream", pe.Code, false
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", "", false
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		// The statement's context is the proxy's own (never the client's:
		// proxy/dp.go); it is cancelled only when the proxy shuts down.
		return "upstream", "", true
	case pgconn.SafeToRetry(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "upstream", "", true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "upstream", "", true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return "upstream", "", true
	}
	if pe, ok := pgerr.As(err); ok {
		return "result", pe.Code, false
	}
	return "result", "", false
}

// runCharged runs f, which charges through ch, and maps any error after
// the charge (or a panic) through afterCharge.
func (r *Releaser) runCharged(ctx context.Context, req Request, f func(*charged) (*Result, error)) (out *Result, err error) {
	ch := &charged{}
	defer func() {
		if p := recover(); p != nil {
			if ch.res == nil {
				panic(p)
			}
			out, err = nil, r.afterCharge(ctx, req, ch, fmt.Errorf("panic: %v", p), true)
		}
	}()
	out, err = f(ch)
	if err != nil && ch.res != nil {
		return nil, r.afterCharge(ctx, req, ch, err, false)
	}
	return out, err
}
