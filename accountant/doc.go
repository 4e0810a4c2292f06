// Privacy-critical: needs DP review.

// Package accountant composes the privacy cost of released answers and keeps
// the persistent budget ledger in PostgreSQL.
//
// It may import policy, internal/pgerr, pgx (pgxpool) and zap. Two parts:
//
//   - Composition ([Method], method.go, decimal.go and one file per method):
//     pure functions with no I/O and no logging that fold releases ([Event])
//     into a running state and say what (ε, δ) the state guarantees. Methods:
//     pure (basic composition, exact decimal), and the tighter advanced, rdp,
//     zcdp and pld, each documented with its guarantee and source. Every
//     method's figure is the minimum of its own bound and exact basic
//     composition. [ComposeEpsilon] gives the CLI the same figures.
//   - The ledger ([Ledger], ledger.go, admin.go, migrate.go): budget rows per
//     (analyst, dataset), one global row per dataset (analyst "", the
//     optional cap across analysts), and one charge row per query. The
//     ledger logs budget events at Info (analyst, dataset, ε/δ cost,
//     remaining, fingerprint), never answers or data.
//
// # Reserve before read
//
// For every DP statement the release path
//
//  1. calls [Ledger.Reserve]: one transaction locks the dataset's global
//     budget row and then the analyst's (fixed order: no deadlocks) with
//     SELECT … FOR UPDATE, creating them first if missing (INSERT … ON
//     CONFLICT DO NOTHING), composes the query's events onto each row's
//     state, refuses (SQLSTATE 53400, wrapping [ErrBudgetExhausted]) if the
//     analyst's limit or the dataset's global cap would be exceeded, and
//     otherwise updates the rows and inserts a charge row with status
//     "reserved", then commits. The charge is durable before Reserve
//     returns, and before any private data is read. The transaction is sent
//     as two pipelined batches (BEGIN, INSERT, SELECT … FOR UPDATE; then the
//     UPDATEs, the INSERT and COMMIT), so the rows stay locked for one
//     round trip plus the commit's WAL flush;
//  2. runs the emitted query upstream and adds noise;
//  3. calls [Ledger.Release] to store the released (noisy) answer on the
//     charge row (status "released"), which also serves the answer cache
//     ([Ledger.Cached]). The release is committed with synchronous_commit
//     off (one round trip, no wait for the flush): a crash of the ledger
//     database can lose the last release records, which leaves those
//     charges charged and "unanswered", as a proxy crash between 1 and 3
//     does (fail closed; the answer cache misses them).
//
// The pld method keeps a memo of intermediate privacy-loss distributions
// per Ledger (pldmemo.go): the same figures, but one more charge on a long
// history reuses the earlier composition.
//
// Limits come from the policy passed with each charge ([Charge].Policy), so
// a data steward raises a budget by editing the policy; the limits in force
// are stored on the budget row.
//
// # Stewards: grants, resets, verification (admin.go)
//
// [Ledger.Grant] adds to one analyst's limit on top of the policy's (the
// budget row's granted_epsilon/granted_delta; Reserve and Status use policy
// + grants, added in exact decimal). [Ledger.Reset] sets one analyst's
// spending, state and charge count back to zero; it keeps the grants and
// every charge row and leaves the dataset's global row (the cap across
// analysts) untouched. Both run under SELECT … FOR UPDATE of the budget row
// (so they serialise with Reserve) and write a row of dpproxy_ledger.audit
// (who, when, what, the values before, and for a reset the id of the last
// charge it covers) in the same transaction. [Ledger.Verify] recomputes
// every budget row from its charges since its last reset, in one snapshot,
// and lists the charges left reserved. Figures are compared exactly (to
// float64 rounding, relative 1e-12); a pld row last charged by a build
// before the memo is also accepted when it matches that build's
// composition order exactly (pldlegacy.go explains why not a wider
// tolerance). The CLI: dpproxy budget
// show|grant|reset and dpproxy ledger verify.
//
// # Refund rule
//
// Nothing is refunded once a query was sent upstream. A reservation whose
// query then failed, was cancelled, or whose proxy crashed between steps 1
// and 3 stays charged: whether and when the upstream failed can depend on
// the data, so a refund would leak. A refused charge (53400) charges nothing.
//
// # Failing closed
//
// If the ledger database cannot be reached, Reserve, Release and Status
// return SQLSTATE 58000 "privacy ledger unavailable; DP queries are refused
// until it is back" (wrapping [ErrLedgerUnavailable]; no DSN, host or user
// in the text) and no DP answer is released. The connection pool reconnects
// by itself when the database returns. A transaction that failed before its
// COMMIT was sent (a stale connection, a serialization failure, a deadlock)
// is retried; one that may have committed is not, so a lost COMMIT reply
// can only overcharge.
//
// # Methods
//
// budget.accountant in the policy selects one (see each file for the
// guarantee, the formulas and their sources):
//
//	pure      basic composition (Σεᵢ, Σδᵢ), exact decimal           method.go, decimal.go
//	advanced  Dwork–Rothblum–Vadhan (homogeneous runs) and the
//	          Kairouz–Oh–Viswanath heterogeneous bound             advanced.go
//	rdp       Rényi DP over a grid of 185 orders; Gaussian αμ²/2,
//	          Laplace by Mironov's Prop. 6; improved conversion    rdp.go
//	zcdp      ρ (Laplace via ε²/2); tight conversion                zcdp.go
//	pld       privacy-loss distributions: exact for Gaussians
//	          (μ = √Σμᵢ²), pessimistic discretisation otherwise    pld.go, fft.go
//
// Each figure is the minimum of the method's bound and exact basic
// composition (pld also takes the minimum with rdp), so ordering on the same
// work is pld ≤ rdp ≈ zcdp ≤ advanced ≤ pure. Releases a method cannot model
// (δ > 0 without a noise multiplier) are added to its bound by basic
// composition; if the steward changes budget.accountant, earlier spending
// counts by basic composition. Float results are rounded up (roundUp).
//
// Cost per charge with 10,000 earlier charges on the row
// (BenchmarkReserveCompose): well under a millisecond for every method; pld
// computes its distribution for up to about 1,600 releases of ε = 0.1 (about
// 0.15–0.3 s at 1,000) and beyond its 2¹⁶-point grid uses its rdp bound.
//
// # Exact arithmetic
//
// Budgets and charges are added and compared as exact decimals: see the
// rounding rule in decimal.go. Thirty charges of ε = 0.1 exactly exhaust a
// budget of 3; no float rounding lets a real overspend through.
package accountant
