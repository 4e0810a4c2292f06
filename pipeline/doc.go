// Package pipeline is the one path of a DP statement from its text and the
// session's settings to released rows and NOTICEs, without wire types:
//
//  1. Prepare: the statement is recognised (a drop-down answered from the
//     policy's public values, an EXPLAIN, a DP aggregate, or a
//     post-processing statement whose leaves are DP aggregates) and
//     planned by the planner it is given (rewrite, through the proxy's
//     plan cache); a per-session Texts cache remembers what is derived
//     from the text alone;
//  2. Request and TimeSlot: the release request under the session's
//     settings (ε, δ, mechanism, quantile method), and the answer's time
//     slot, fixed from the plan's work bound before any charge;
//  3. the release itself is package release's (verify, calibrate,
//     reserve, execute, record); a post-processing statement's leaves are
//     checked against the remaining budget together (CheckPost) and
//     released under one charge (release.RunBatch), and Outer binds their
//     released rows into the outer SQL;
//  4. Answer: the rows, columns and NOTICEs for the client (Explain,
//     FromResult, FromDistinct).
//
// The proxy keeps what needs the wire or the session's goroutine: the
// protocol, routing, the DP admission slot and the pacing of the answer to
// its time slot, cancellation, the shadow connection the outer SQL of a
// post-processing statement runs on, and logging. This package does no
// I/O of its own (the ledger status and the releaser are given) and no
// logging.
package pipeline
