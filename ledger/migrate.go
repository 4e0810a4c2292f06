// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// migrationLock is the pg_advisory_xact_lock key that serialises schema
// migrations of proxies starting at once ("dpproxyL" in ASCII).
const migrationLock int64 = 0x6470_7072_6f78_794c

// migrations are applied in order, each once; never edit a released one,
// append a new one.
var migrations = []string{
	// 1: budgets and the charge ledger.
	`CREATE TABLE dpproxy_ledger.budget (
		dataset       text NOT NULL,
		analyst       text NOT NULL, -- '' is the dataset's global row (cap across analysts)
		accountant    text NOT NULL, -- composition method: pure|advanced|rdp|zcdp|pld
		limit_epsilon double precision, -- from the policy at the last charge; NULL: no cap
		limit_delta   double precision,
		spent_epsilon numeric NOT NULL DEFAULT 0, -- composed spending at limit_delta
		spent_delta   numeric NOT NULL DEFAULT 0,
		charges       bigint NOT NULL DEFAULT 0,
		state         jsonb NOT NULL DEFAULT '{}', -- the method's composition state
		created_at    timestamptz NOT NULL DEFAULT now(),
		updated_at    timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (dataset, analyst)
	);
	CREATE TABLE dpproxy_ledger.charge (
		id             bigserial PRIMARY KEY,
		dataset        text NOT NULL,
		analyst        text NOT NULL,
		created_at     timestamptz NOT NULL DEFAULT now(),
		status         text NOT NULL CHECK (status IN ('reserved', 'released')),
		fingerprint    text NOT NULL,
		policy_version text NOT NULL,
		accountant     text NOT NULL,
		events         jsonb NOT NULL,
		cost_epsilon   numeric NOT NULL,
		cost_delta     numeric NOT NULL,
		answer         jsonb,
		released_at    timestamptz
	);
	CREATE INDEX charge_analyst_idx ON dpproxy_ledger.charge (dataset, analyst, created_at);
	CREATE INDEX charge_cache_idx ON dpproxy_ledger.charge (dataset, fingerprint, policy_version, id)
		WHERE status = 'released';`,
	// 2: steward grants on top of the policy's limit, and the audit trail of
	// grants and resets (dpproxy budget grant|reset).
	`ALTER TABLE dpproxy_ledger.budget
		ADD COLUMN granted_epsilon numeric NOT NULL DEFAULT 0, -- added to the policy's limit
		ADD COLUMN granted_delta   numeric NOT NULL DEFAULT 0;
	CREATE TABLE dpproxy_ledger.audit (
		id                     bigserial PRIMARY KEY,
		at                     timestamptz NOT NULL DEFAULT now(),
		actor                  text NOT NULL, -- who ran the command (OS user@host)
		db_user                text NOT NULL DEFAULT session_user,
		action                 text NOT NULL CHECK (action IN ('grant', 'reset')),
		dataset                text NOT NULL,
		analyst                text NOT NULL,
		epsilon                numeric, -- grant: the amount added
		delta                  numeric,
		before_spent_epsilon   numeric NOT NULL,
		before_spent_delta     numeric NOT NULL,
		before_charges         bigint NOT NULL,
		before_granted_epsilon numeric NOT NULL,
		before_granted_delta   numeric NOT NULL,
		before_state           jsonb NOT NULL,
		last_charge_id         bigint NOT NULL -- reset: charges up to this id are before it
	);
	CREATE INDEX audit_budget_idx ON dpproxy_ledger.audit (dataset, analyst, id);`,
	// 3: incidents (an error after a charge, incident.go) and the circuit
	// breaker: an analyst whose incidents reach the policy's
	// budget.incident_limit is suspended on the dataset until a steward
	// resumes them (audit action 'resume').
	`ALTER TABLE dpproxy_ledger.budget
		ADD COLUMN incidents    integer NOT NULL DEFAULT 0, -- since the last resume
		ADD COLUMN suspended_at timestamptz;                -- NULL: not suspended
	CREATE TABLE dpproxy_ledger.incident (
		id          bigserial PRIMARY KEY,
		at          timestamptz NOT NULL DEFAULT now(),
		dataset     text NOT NULL,
		analyst     text NOT NULL,
		charge_id   bigint NOT NULL,
		fingerprint text NOT NULL,
		kind        text NOT NULL,  -- what failed: upstream, timeout, result, noise, panic
		sqlstate    text NOT NULL,  -- the upstream SQLSTATE, or '' (never the message: it may quote data)
		suspended   boolean NOT NULL
	);
	CREATE INDEX incident_budget_idx ON dpproxy_ledger.incident (dataset, analyst, id);
	ALTER TABLE dpproxy_ledger.audit DROP CONSTRAINT audit_action_check,
		ADD CONSTRAINT audit_action_check CHECK (action IN ('grant', 'reset', 'resume'));`,
	// 4: budget windows and teams (accountant/window.go). A row's
	// window_start is the start of its current window (NULL: the dataset has no window, or the
	// row was never charged under one); its state, spent_* and charges are
	// per window. lifetime_state composes every charge of every window
	// (NULL without a window). A team's budget is a row named 'team:NAME';
	// each charge records its analyst's team. A renewal writes an audit row
	// (action 'renew') with the last charge before it, as a reset does.
	`ALTER TABLE dpproxy_ledger.budget
		ADD COLUMN window_start           timestamptz,
		ADD COLUMN windows                bigint NOT NULL DEFAULT 0, -- renewals so far
		ADD COLUMN lifetime_state         jsonb,
		ADD COLUMN lifetime_spent_epsilon numeric,
		ADD COLUMN lifetime_spent_delta   numeric;
	ALTER TABLE dpproxy_ledger.charge ADD COLUMN team text; -- the analyst's team at the charge, NULL: none
	CREATE INDEX charge_team_idx ON dpproxy_ledger.charge (dataset, team, id) WHERE team IS NOT NULL;
	ALTER TABLE dpproxy_ledger.audit DROP CONSTRAINT audit_action_check,
		ADD CONSTRAINT audit_action_check CHECK (action IN ('grant', 'reset', 'resume', 'renew'));`,
	// 5: the rdp accountant composes a Laplace release as randomized
	// response (accountant/rdp.go); the data step (dataSteps) recharges the
	// rdp states earlier builds wrote and records each rewritten row in the
	// audit trail (action 'migrate', with the row as it was).
	`ALTER TABLE dpproxy_ledger.audit DROP CONSTRAINT audit_action_check,
		ADD CONSTRAINT audit_action_check CHECK (action IN ('grant', 'reset', 'resume', 'renew', 'migrate'));`,
	// 6: the rows several analysts share (a dataset's global row, a team's)
	// compose with accountant.SharedMethodName's method (rdp on a pld
	// dataset), whose state does not grow with one analyst's choices; the
	// data step (dataSteps) recomposes the shared rows earlier builds
	// composed with pld.
	`SELECT 1`,
}

// dataSteps run in Go after the migration of the same number, in its
// transaction.
var dataSteps = map[int]func(context.Context, pgx.Tx, *zap.Logger) error{
	5: rechargeRDPLaplace,
	6: recomposeSharedRows,
}

// SchemaVersion returns the ledger schema version this build writes.
func SchemaVersion() int { return len(migrations) }

func (l *Ledger) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS dpproxy_ledger;
			CREATE TABLE IF NOT EXISTS dpproxy_ledger.schema_version (
				version    integer PRIMARY KEY,
				applied_at timestamptz NOT NULL DEFAULT now()
			)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM dpproxy_ledger.schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return fmt.Errorf("ledger schema version %d is newer than this dpproxy (%d); upgrade dpproxy", have, len(migrations))
		}
		for v := have + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if step := dataSteps[v]; step != nil {
				if err := step(ctx, tx, l.logger); err != nil {
					return fmt.Errorf("migration %d: %w", v, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO dpproxy_ledger.schema_version (version) VALUES ($1)`, v); err != nil {
				return err
			}
			l.logger.Info("ledger schema migrated", zap.Int("version", v))
		}
		return nil
	})
}
