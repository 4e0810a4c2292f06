// Pre-checks of a post-processing statement's leaves, before its charge.
//
// Not in the privacy-critical set (docs/ARCHITECTURE.md): each refuses a
// statement or names its price before anything is charged; what admits a
// charge is RunBatch's one Reserve of the calibrated events (batch.go), and
// what calibrates them is calibrate (calibrate.go), whatever these report.
// A bug here refuses a statement it should not, or names a wrong total in
// a message, never a release larger than its charge.

package release

import (
	"context"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// IsCached reports whether Run would answer req from the answer cache, at
// no cost. It reads the cache (and the ledger's copy); it charges nothing.
func (r *Releaser) IsCached(ctx context.Context, req Request) bool {
	if req.NoCache || checkRequest(req) != nil {
		return false
	}
	_, ok, err := r.cached(ctx, req, cacheKey(req))
	return err == nil && ok
}

// Check runs every check Run makes of req before its charge (the
// settings, the ε floor, the answer's size in noisy cells, partition
// selection's δ, the calibration of every mechanism…), so a
// post-processing statement can refuse all its leaves before charging any
// (proxy/post.go). Nothing is sampled.
func Check(req Request) error {
	_, err := (&Releaser{}).calibrate(req)
	return err
}

// MaxCost is the most Run charges for req: its ε and δ. A query's ε (and
// δ) are split between its measurements with the shares rounded down
// (splitDown), so the basic composition of its events never exceeds them;
// every accountant charges at most the basic composition.
func MaxCost(req Request) accountant.Spent {
	return accountant.Spent{Epsilon: req.Epsilon, Delta: req.Delta}
}

// CheckTotal refuses (53400, before any charge) a batch whose total
// maximal cost exceeds what st leaves: total ε or δ above the remaining
// budget. It is a pre-check, for a message naming the statement's total:
// RunBatch's one Reserve checks and charges all the leaves atomically.
func CheckTotal(st accountant.Status, total accountant.Spent) error {
	rem := st.Remaining()
	// The remaining budget is exact decimal; the total is a sum of
	// float64s: allow the rounding of the sum (relative 1e-12).
	if total.Epsilon > rem.Epsilon*(1+1e-12) || total.Delta > 0 && total.Delta > rem.Delta*(1+1e-12) {
		return pgerr.New(pgerr.ConfigurationLimit,
			"privacy budget exhausted on dataset %s: this statement's DP aggregates need ε=%s, δ=%s together but your remaining budget is ε=%s, δ=%s",
			st.Dataset, num(total.Epsilon), num(total.Delta), num(rem.Epsilon), num(rem.Delta)).
			WithDetail("accountant %s; nothing was charged for this statement", st.Accountant).
			WithHint("lower the cost (SET dp.epsilon = …, fewer DP aggregates in the statement), or ask the data steward for more budget")
	}
	return nil
}
