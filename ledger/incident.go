// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"
	"fmt"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Incidents and the circuit breaker (issue 14, SECURITY.md G5).
//
// An incident is a failure after a charge that is not an availability
// failure: the emitted SQL raised an error or timed out, a released value
// could not be read, the noise could not be added. Whether it happens may
// depend on one person's data, so it is a release at ε = ∞ of (at most)
// one bit. The proxy answers every incident with the same fixed error, and
// the ledger counts incidents per analyst and dataset; when the count
// reaches the policy's budget.incident_limit (default 1) the analyst is
// suspended on the dataset: Reserve refuses every further charge, until a
// steward has looked at the incident and resumes them (Resume; `dpproxy
// budget resume`). So whatever construct nobody thought of yet, an analyst
// learns at most incident_limit bits through it, never an oracle.
//
// Incidents are stored in the ledger database (not in the proxy's memory),
// so the breaker holds across restarts and across proxies sharing one
// ledger. An incident row records the upstream SQLSTATE but never the
// error's message, which could quote a value.

// RecordIncident stores the incident and counts it on the analyst's budget
// row; the row is suspended when the count reaches the policy's
// budget.incident_limit (at least 1).
func (l *Ledger) RecordIncident(ctx context.Context, ds *policy.Dataset, inc accountant.Incident) (accountant.IncidentResult, error) {
	limit := 1
	if ds != nil && ds.Budget.IncidentLimit > 1 {
		limit = ds.Budget.IncidentLimit
	}
	var out accountant.IncidentResult
	again := false
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		// One charge has at most one incident: a write of the same charge's
		// again (release retries one whose reply was lost) counts nothing
		// more. The budget row's lock orders the check with the insert.
		if err := tx.QueryRow(ctx, `SELECT b.incidents, b.suspended_at IS NOT NULL,
					EXISTS (SELECT 1 FROM dpproxy_ledger.incident i
						WHERE i.dataset = b.dataset AND i.analyst = b.analyst AND i.charge_id = $3)
				FROM dpproxy_ledger.budget b WHERE b.dataset = $1 AND b.analyst = $2 FOR UPDATE`,
			inc.Dataset, inc.Analyst, inc.ChargeID).Scan(&out.Incidents, &out.Suspended, &again); err != nil {
			return err
		}
		if again {
			return nil
		}
		// The row exists: the charge that preceded the incident created it.
		if err := tx.QueryRow(ctx, `UPDATE dpproxy_ledger.budget
				SET incidents = incidents + 1,
				    suspended_at = CASE WHEN incidents + 1 >= $3 THEN coalesce(suspended_at, now()) ELSE suspended_at END,
				    updated_at = now()
				WHERE dataset = $1 AND analyst = $2
				RETURNING incidents, suspended_at IS NOT NULL`, inc.Dataset, inc.Analyst, limit).
			Scan(&out.Incidents, &out.Suspended); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.incident
				(dataset, analyst, charge_id, fingerprint, kind, sqlstate, suspended)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			inc.Dataset, inc.Analyst, inc.ChargeID, inc.Fingerprint, inc.Kind, inc.SQLState, out.Suspended)
		return err
	})
	if err != nil {
		l.logger.Error("cannot record an incident in the ledger", zap.String(logKeyAnalyst, inc.Analyst),
			zap.String(logKeyDataset, inc.Dataset), zap.Int64(logKeyReservation, inc.ChargeID), zap.Error(redact(err)))
		return out, l.ledgerError(ctx, err)
	}
	if again {
		return out, nil
	}
	l.logger.Warn("incident: an error after a charge",
		zap.String(logKeyAnalyst, inc.Analyst), zap.String(logKeyDataset, inc.Dataset),
		zap.Int64(logKeyReservation, inc.ChargeID), zap.String(logKeyFingerprint, inc.Fingerprint),
		zap.String("kind", inc.Kind), zap.String("sqlstate", inc.SQLState),
		zap.Int("incidents", out.Incidents), zap.Int("incident_limit", limit), zap.Bool("suspended", out.Suspended))
	return out, nil
}

// suspendedError is the refusal of a charge by an open breaker. It says
// nothing the analyst did not already see (the incident's fixed error).
func (l *Ledger) suspendedError(c accountant.Charge) *pgerr.Error {
	// Debug, as a refusal for the budget (ledger.go refuse): free to repeat.
	l.logger.Debug("privacy budget refused: analyst suspended",
		zap.String(logKeyAnalyst, c.Analyst), zap.String(logKeyDataset, c.Dataset), zap.String(logKeyFingerprint, c.Fingerprint))
	return &pgerr.Error{
		Code:    pgerr.InsufficientPrivilege,
		Message: fmt.Sprintf("DP queries of %s on dataset %s are suspended after an incident", c.Analyst, c.Dataset),
		Detail:  "An earlier query failed after its privacy charge. The query was not run and nothing was charged.",
		Hint:    fmt.Sprintf("ask the data steward to review the incident and resume you: dpproxy budget resume --dataset %s --analyst %s", c.Dataset, c.Analyst),
		Err:     accountant.ErrSuspended,
	}
}

// IncidentInfo is one stored incident (for `dpproxy budget show`).
type IncidentInfo struct {
	accountant.Incident
	At        string // RFC 3339
	Suspended bool
}

// Incidents returns the newest incidents of the analyst on the dataset
// (both "" for all), newest first, at most limit rows.
func (l *Ledger) Incidents(ctx context.Context, dataset, analyst string, limit int) ([]IncidentInfo, error) {
	rows, err := l.pool.Query(ctx, `SELECT dataset, analyst, charge_id, fingerprint, kind, sqlstate, suspended,
			to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
		FROM dpproxy_ledger.incident WHERE ($1 = '' OR dataset = $1) AND ($2 = '' OR analyst = $2)
		ORDER BY id DESC LIMIT $3`, dataset, analyst, limit)
	if err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	defer rows.Close()
	var out []IncidentInfo
	for rows.Next() {
		var i IncidentInfo
		if err := rows.Scan(&i.Dataset, &i.Analyst, &i.ChargeID, &i.Fingerprint, &i.Kind, &i.SQLState, &i.Suspended, &i.At); err != nil {
			return nil, l.ledgerError(ctx, err)
		}
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	return out, nil
}

// Resume closes the analyst's breaker on the dataset: the incident count
// goes back to zero and the suspension ends. It writes an audit row and
// returns the number of incidents cleared. Resuming an analyst who is not
// suspended and has no incidents is refused.
func (l *Ledger) Resume(ctx context.Context, ds *policy.Dataset, analyst, actor string) (int, error) {
	if err := checkAdmin(ds, analyst, actor); err != nil {
		return 0, err
	}
	var cleared int
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		r, ok, err := lockForAdmin(ctx, tx, ds, analyst, false)
		if err != nil {
			return err
		}
		var suspended bool
		if ok {
			if err := tx.QueryRow(ctx, `SELECT incidents, suspended_at IS NOT NULL FROM dpproxy_ledger.budget
				WHERE dataset = $1 AND analyst = $2`, ds.Name, analyst).Scan(&cleared, &suspended); err != nil {
				return err
			}
		}
		if !ok || (cleared == 0 && !suspended) {
			return refused("accountant: %s is not suspended on %s and has no incidents", analyst, ds.Name)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.audit (actor, action, dataset, analyst,
				before_spent_epsilon, before_spent_delta, before_charges, before_granted_epsilon, before_granted_delta, before_state, last_charge_id)
			VALUES ($1, 'resume', $2, $3, $4::numeric, $5::numeric, $6, $7::numeric, $8::numeric, $9,
				(SELECT coalesce(max(id), 0) FROM dpproxy_ledger.charge WHERE dataset = $2 AND `+chargesOfRow("3")+`))`,
			actor, ds.Name, analyst, r.spent[0], r.spent[1], r.charges, r.granted[0], r.granted[1], stateOrEmpty(r.state)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE dpproxy_ledger.budget SET incidents = 0, suspended_at = NULL, updated_at = now()
			WHERE dataset = $1 AND analyst = $2`, ds.Name, analyst)
		return err
	})
	if err != nil {
		return 0, l.adminResult(ctx, err)
	}
	l.logger.Info("analyst resumed after incidents", zap.String(logKeyAnalyst, analyst), zap.String(logKeyDataset, ds.Name),
		zap.Int("incidents", cleared), zap.String("actor", actor))
	return cleared, nil
}
