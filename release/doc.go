// Privacy-critical: needs DP review.

// Package release is the one path that turns a validated plan into released
// numbers:
//
//  1. verify and calibrate (verify.go; calibrate.go, the one place, used
//     by Run, the sample-and-aggregate path and Explain alike): check that
//     the plan's SQL is the emitter's, then build one noise mechanism per
//     measurement of the plan, with the query's ε (and δ) split equally
//     between the measurements (basic composition inside one query: m
//     measurements of ε/m each cost ε), and the mechanisms of the choices
//     made by DP first (clamping bounds, rows per unit, released groups);
//     collect every ledger event;
//  2. reserve: durably charge the ledger (accountant.Store.Reserve) before
//     any private data is read; a refusal (53400) ends the query here;
//  3. run: execute the plan's emitted SQL upstream (never analyst text);
//  4. noise: add calibrated noise to every measurement of every released
//     group — every key of the public domain, including keys absent from the
//     data, which get a noisy zero;
//  5. post-process: counts are floored at zero, averages are noisy sum over
//     noisy count clamped to the column bounds, variances are (Q̃ − S̃²/C̃)
//     over C̃ (pop) or C̃ − 1 (samp, NULL when C̃ < 2) clamped to
//     [0, ((upper − lower)/2)²] (× C̃/(C̃ − 1) for samp), standard deviations
//     their square roots; expressions over aggregates are evaluated on
//     these noisy values and HAVING filters rows by them (hidden values
//     used only by HAVING or expressions are never returned); then ORDER BY / LIMIT /
//     OFFSET run on the noisy rows (post-processing costs no privacy);
//  6. record: store the released answer on the ledger row, and return rows
//     and a NOTICE with the cost, the remaining budget and a 95% error
//     half-width per output column.
//
// Nothing is refunded: if the upstream query fails after step 2 the charge
// stands, and the analyst gets one generic error that says nothing about the
// data. The sensitivities come from package sensitivity, recomputed here from
// the policy and cross-checked against the plan.
//
// release imports dpplan (plan types), pgemit (to re-emit a plan's SQL and
// compare), sensitivity, noise, accountant and policy; never the parser. It
// does no logging; I/O only through the Upstream and Store it is given.
package release
