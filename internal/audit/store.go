package audit

import (
	"context"
	"errors"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Counters receives the ledger events the metrics count
// (internal/admin.Metrics implements it).
type Counters interface {
	Charged(dataset string)
	Incident(dataset, kind string)
}

// Store wraps the ledger as the release path sees it, writing a charge,
// refusal or incident line for each Reserve and RecordIncident, and
// counting them. It adds no I/O to the ledger's transactions: lines are
// written after the ledger answered. Safe for concurrent use.
type Store struct {
	accountant.Store
	Log      *Log
	Counters Counters // may be nil
}

// Reserve charges through the ledger and records the outcome.
func (s *Store) Reserve(ctx context.Context, c accountant.Charge) (*accountant.Reservation, error) {
	res, err := s.Store.Reserve(ctx, c)
	if err != nil {
		var pe *pgerr.Error
		if errors.As(err, &pe) {
			reason := ""
			switch {
			case errors.Is(err, accountant.ErrBudgetExhausted):
				reason = "budget_exhausted"
			case errors.Is(err, accountant.ErrSuspended):
				reason = "suspended"
			}
			if reason != "" {
				var e, d float64
				for _, ev := range c.Events {
					e += ev.Epsilon
					d += ev.Delta
				}
				s.Log.Refusal(c.Analyst, c.Dataset, c.Fingerprint, pe.Code, reason, e, d)
			}
		}
		return nil, err
	}
	for _, row := range res.Renewed {
		who := row
		if who == "" {
			who = "(all analysts)"
		}
		s.Log.BudgetChange("renew", who, c.Dataset, "dpproxy (window renewal)", 0, 0)
	}
	rem := res.Status.Remaining()
	s.Log.Charge(c.Analyst, c.Dataset, c.Fingerprint, res.ID, res.Cost.Epsilon, res.Cost.Delta, rem.Epsilon, rem.Delta)
	if s.Counters != nil {
		s.Counters.Charged(c.Dataset)
	}
	return res, nil
}

// RecordIncident records through the ledger and logs the incident.
func (s *Store) RecordIncident(ctx context.Context, ds *policy.Dataset, inc accountant.Incident) (accountant.IncidentResult, error) {
	r, err := s.Store.RecordIncident(ctx, ds, inc)
	s.Log.Incident(inc.Analyst, inc.Dataset, inc.Fingerprint, inc.Kind, inc.SQLState, inc.ChargeID, r.Suspended)
	if s.Counters != nil {
		s.Counters.Incident(inc.Dataset, inc.Kind)
	}
	return r, err
}
