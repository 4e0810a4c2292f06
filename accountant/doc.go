// Privacy-critical: needs DP review.

// Package accountant composes the privacy cost of released answers: pure
// functions, with no I/O and no logging, that fold releases ([Event]) into
// a running state and say what (ε, δ) the state guarantees, and the budget
// semantics a charge is checked against. The persistent budget ledger in
// PostgreSQL, which stores these states and runs the reserve-before-read
// protocol, is package ledger; release sees it through [Store].
//
// It may import only the standard library and policy (TestPackageInvariants;
// `go list -deps ./accountant` names no pgx, zap or net package). It holds:
//
//   - Composition ([Method], method.go, decimal.go and one file per method;
//     "Methods" below). [Evaluate] gives the figure and the budget check
//     of one state at once; [ComposeEpsilon] gives the CLI the same
//     figures (planning.go, which no charge reaches). Budgets and charges are added and compared as exact
//     decimals (decimal.go, "The rounding rule").
//   - The budget semantics (window.go): which rows a charge of an analyst
//     must fit in ([LimitsFor]: the dataset's global cap, the analyst's
//     budget, the analyst's team's), with which caps, per budget window and
//     over the lifetime ([WindowOf]); steward grants added in exact decimal
//     ([WithGrants]); the method rows shared by several analysts compose
//     with ([SharedMethodName]).
//   - The shared types of the release path and the ledger: [Event],
//     [Charge], [Spent], [Status], [Reservation], [Incident], the [Store]
//     interface and its sentinels ([ErrBudgetExhausted],
//     [ErrLedgerUnavailable], [ErrSuspended]).
//   - Reading states back (state.go): the exact basic sums a row records
//     ([BasicSums]) and the comparisons ledger verification makes
//     ([CompareStates], [LifetimeCovers], [SameDecimal]).
//
// The privacy argument of this package: a state composed from the events
// of every charge of a row guarantees the (ε, δ) its method reports (each
// method file states the theorem and its assumptions), figures are rounded
// up, and a charge fits when the state after it is within every cap of
// every row it touches. That the ledger composes every charge, durably and
// before any private row is read, is the ledger's argument (package
// ledger's documentation).
//
// [PLDMemo] remembers intermediate privacy-loss distributions of the pld
// method: the same figures, but one more charge on a long history reuses
// the earlier composition (pld.go, "The memo"). A ledger holds one; it is
// the only mutable value here, and pure memoisation.
//
// # Refund rule
//
// Nothing is refunded once a query was sent upstream: a charge whose query
// failed, was cancelled or whose proxy crashed stays composed into its
// rows' states (package ledger, "Refund rule"). A refused charge composes
// nothing.
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
//	          Laplace as randomized response (the discrete
//	          samplers' worst case); improved conversion           rdp.go
//	zcdp      ρ (Laplace via ε²/2); tight conversion                zcdp.go
//	pld       privacy-loss distributions, each Laplace release as
//	          randomized response (the discrete samplers' worst
//	          case), pessimistic discretisation; states with
//	          Gaussian releases by their RDP bound                 pld.go, fft.go
//
// Each figure is the minimum of the method's bound and exact basic
// composition (pld also takes the minimum with its RDP bound). For Laplace
// work pld is the tightest for the discrete samplers; for Gaussian work pld
// ≈ rdp ≈ zcdp; advanced ≤ pure. Releases a method cannot model
// (δ > 0 without a noise multiplier) are added to its bound by basic
// composition; if the steward changes budget.accountant, earlier spending
// counts by basic composition. Float results are rounded up (roundUp).
//
// Cost per charge: well under a millisecond for every method with 10,000
// earlier charges on the row (BenchmarkReserveCompose); pld's, made while
// the row is locked, is bounded whatever ε values an analyst chooses
// (pld.go; BENCHMARKS.md "Accountant").
package accountant
