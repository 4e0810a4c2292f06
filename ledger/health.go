package ledger

import (
	"context"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolStat returns the ledger pool's statistics (for the admin endpoint's
// metrics).
func (l *Ledger) PoolStat() *pgxpool.Stat { return l.pool.Stat() }

// Ping checks that the ledger database answers (the admin endpoint's
// /healthz). The error carries no connection details.
func (l *Ledger) Ping(ctx context.Context) error {
	if err := l.pool.Ping(ctx); err != nil {
		return redact(err)
	}
	return nil
}

// ChargePoint is one charge as the steward dashboard charts it: when, whose,
// and what it cost (never the answer).
type ChargePoint struct {
	At          time.Time
	Dataset     string
	Analyst     string
	Fingerprint string
	Cost        accountant.Spent
	Released    bool
}

// History returns the charges made since the given time, oldest first, at
// most limit of them (the newest ones when there are more).
func (l *Ledger) History(ctx context.Context, since time.Time, limit int) ([]ChargePoint, error) {
	rows, err := l.pool.Query(ctx, `SELECT created_at, dataset, analyst, fingerprint, cost_epsilon::float8, cost_delta::float8, status = 'released'
		FROM (SELECT * FROM dpproxy_ledger.charge WHERE created_at >= $1 ORDER BY id DESC LIMIT $2) c ORDER BY id`, since, limit)
	if err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	defer rows.Close()
	var out []ChargePoint
	for rows.Next() {
		var p ChargePoint
		if err := rows.Scan(&p.At, &p.Dataset, &p.Analyst, &p.Fingerprint, &p.Cost.Epsilon, &p.Cost.Delta, &p.Released); err != nil {
			return nil, l.ledgerError(ctx, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, l.ledgerError(ctx, err)
	}
	return out, nil
}
