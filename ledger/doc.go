// Ledger-critical: needs review of the reserve-before-read protocol (ledger/doc.go).

// Package ledger is the persistent privacy-budget ledger in PostgreSQL: it
// implements [accountant.Store] for the release path, and the stewards'
// operations (grant, reset, resume, verify) for the CLI and the admin
// endpoint.
//
// It may import accountant (every figure it stores or compares is computed
// there, by pure functions), policy, internal/pgerr, pgx (pgxpool) and
// zap; nothing imports it but cmd/dpproxy, internal/admin and tests. It
// keeps budget rows per (analyst, dataset), one global row per dataset
// (analyst "", the optional cap across analysts), one row per team
// ("team:NAME"), and one charge row per query (schema: migrate.go). It logs
// budget events at Info (analyst, dataset, ε/δ cost, remaining,
// fingerprint), never answers or data; the ledger, not the log, is the
// audit trail.
//
// Its review is not a DP review: the composition is accountant's. What
// must hold here is the protocol below — that every released answer was
// charged durably before its private rows were read, that concurrent
// charges never overspend, and that nothing is refunded — and that the
// rows it stores are the ones accountant composed.
//
// # Reserve before read
//
// For every DP statement the release path
//
//  1. calls [Ledger.Reserve]: one transaction creates the budget rows the
//     charge touches if missing (INSERT … ON CONFLICT DO NOTHING, so two
//     first charges cannot both create a row), then locks them with
//     SELECT … FOR UPDATE in one fixed order (the analyst's row, then the
//     rows shared with other analysts by name: the dataset's global row
//     "" and the team's), composes the query's events onto each row's
//     state (accountant; the shared rows with
//     [accountant.SharedMethodName]'s method, whose state is a fixed set
//     of sums), refuses (SQLSTATE
//     53400, wrapping [accountant.ErrBudgetExhausted]) if any row's limit
//     or lifetime cap would be exceeded — or (42501, wrapping
//     [accountant.ErrSuspended]) if the analyst is suspended — and
//     otherwise updates the rows and inserts a charge row with status
//     "reserved", then commits with synchronous commit. The transaction is
//     sent as three pipelined batches (BEGIN, INSERT, SELECT … FOR UPDATE
//     of the analyst's row; SELECT … FOR UPDATE of the shared rows; the
//     UPDATEs, the INSERT and COMMIT), so the global row, which every
//     charge on the dataset takes, stays locked for one round trip,
//     fixed-size compositions and the commit's WAL flush, whatever the
//     analyst's own history costs to compose;
//  2. runs the emitted query upstream and adds noise — only after Reserve
//     returned, so the charge is durable before any private row is read;
//  3. calls [Ledger.Release] to store the released (noisy) answer on the
//     charge row (status "released"), which also serves the answer cache
//     ([Ledger.Cached]). The release is committed with synchronous_commit
//     off (one round trip, no wait for the flush): a crash of the ledger
//     database can lose the last release records, which leaves those
//     charges charged and "unanswered", as a proxy crash between 1 and 3
//     does (fail closed; the answer cache misses them).
//
// # Why concurrent charges never overspend
//
// Two Reserve calls for the same analyst and dataset (from one proxy or
// several sharing the database) both need the row lock of the analyst's
// budget row, and of the dataset's global row, held from the SELECT … FOR
// UPDATE to COMMIT. PostgreSQL grants it to one transaction at a time; the
// other waits and then reads the row as the first one committed it
// (READ COMMITTED, which the reservation transaction sets whatever the
// database's default, re-reads a locked row after the lock holder
// commits; under a stricter level every charge committed on the dataset
// while another composed its analyst's row failed that one with SQLSTATE
// 40001: attack round 69), so it composes its
// events onto a state that already holds the first charge. The check and the debit are therefore one atomic step on each
// row; the fixed locking order means two charges cannot deadlock (a
// deadlock or serialization failure before COMMIT is retried). Steward
// operations (grant, reset, resume) take the same row lock, so they
// serialise with charges. An analyst's charges take one ledger
// connection at a time per proxy (they would wait for each other on the
// analyst's row anyway), so one analyst's costly compositions cannot hold
// the pool every other analyst's charges need (attack round 69).
//
// # Refund rule
//
// Nothing is refunded once a query was sent upstream. A reservation whose
// query then failed, was cancelled, or whose proxy crashed between steps 1
// and 3 stays charged: whether and when the upstream failed can depend on
// the data, so a refund would leak. A refused charge (53400) charges
// nothing. A steward's reset sets one analyst's spending back to zero and
// is audited; it never deletes a charge row and leaves the dataset's
// global row untouched. Budget-window renewals start a row's window from
// zero but never its lifetime state (accountant, window.go).
//
// # Failing closed
//
// If the ledger database cannot be reached, Reserve, Release and Status
// return SQLSTATE 58000 "privacy ledger unavailable; DP queries are refused
// until it is back" (wrapping [accountant.ErrLedgerUnavailable]; no DSN,
// host or user in the text) and no DP answer is released. The connection
// pool reconnects by itself when the database returns. A transaction that
// failed before its COMMIT was sent (a stale connection, a serialization
// failure, a deadlock) is retried; one that may have committed is not, so
// a lost COMMIT reply can only overcharge.
//
// # Incidents (incident.go)
//
// An error after a charge is an incident ([accountant.Incident]):
// [Ledger.RecordIncident] counts it on the analyst's budget row and
// suspends the analyst at the policy's budget.incident_limit; the
// suspension is stored in the ledger database, so it holds across
// restarts and across proxies. [Ledger.Resume] lifts it.
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
// composition order exactly ([accountant.MatchesEarlierPLDOrder]). The CLI:
// dpproxy budget show|grant|reset|resume and dpproxy ledger verify.
//
// # Schema migrations (migrate.go)
//
// Open applies the schema migrations this build knows, once each, under an
// advisory lock, and refuses a ledger of a newer schema. A migration may
// have a data step: schema 5's (rdp_schema5.go) recharged the rdp rows of
// earlier builds, which composed a Laplace release as continuous, with
// the discrete sampler's loss, recomposing each row from its charges and
// writing the row as it was to the audit trail (action 'migrate').
//
// Limits come from the policy passed with each charge
// ([accountant.Charge].Policy), so a data steward raises a budget by
// editing the policy; the limits in force are stored on the budget row.
package ledger
