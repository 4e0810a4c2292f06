// Package proxy is dpproxy's PostgreSQL wire-protocol server: analysts
// connect to it with psql, JDBC, pgx or psycopg as if it were PostgreSQL,
// and it answers catalog statements from a shadow database with no
// protected rows (public tables are copied there: internal/shadow) and
// aggregate queries over protected tables only with differentially private
// answers.
//
// It may import release, rewrite, pgsql, accountant, policy,
// internal/config and internal/pgerr, plus pgx's pgproto3 (server side)
// and pgconn (the shadow connection). Nothing imports proxy except
// cmd/dpproxy.
//
// # Layers
//
//   - server.go: the listener loop. One goroutine per connection, started
//     through a recover so that a panic closes that connection only (with a
//     FATAL XX000 written straight to the socket, never a partial reply),
//     MaxConnections (53300 beyond it), and the drain on shutdown.
//   - frame.go: the one framer (type byte, int32 length, limits, whole
//     messages, no byte handed out past one) for the client's start-up
//     packets and messages and the shadow's replies the relay copies;
//     client messages are decoded by pgproto3's message types. A message
//     read whole but malformed gets ERROR 08P01 and the session goes on,
//     as in PostgreSQL (postgres.c); only a message that cannot be framed
//     or an unknown type ends it with FATAL 08P01.
//   - conn.go: the connection (socket, TLS, Backend, cancellation,
//     shutdown) and start-up. SSLRequest (TLS when Config.TLS is set, else 'N'),
//     GSSENCRequest ('N'), each at most once, CancelRequest, StartupMessage
//     (protocol 3.0; a newer 3.x minor gets NegotiateProtocolVersion; user
//     and database cut to 63 bytes, as PostgreSQL does), with a bound on the
//     message size before authentication (Config.MaxStartupMessage) and
//     after it (Config.MaxMessage), and a time bound on the whole start-up.
//   - auth.go: SCRAM-SHA-256 (xdg-go/scram) against verifiers in
//     PostgreSQL's format, or "plain:" demo passwords (hashed at start-up).
//     Unknown users run the same exchange against mock credentials, so a
//     probe cannot tell them from a wrong password. Only after a successful
//     exchange are the database (3D000) and the analyst's datasets (28000)
//     checked.
//   - session.go: the session's state (settings, transaction block,
//     savepoints, prepared statements, portals, cursors), apart from the
//     connection: its methods make the transitions without I/O, and conn
//     sends what they decide (replies, WARNINGs, ParameterStatus).
//   - query.go, sessionstmt.go, settings.go: the simple query protocol,
//     routing, session statements and settings.
//   - extended.go, bind.go: the extended query protocol.
//   - shadow.go, shadowpool.go: shadow catalog connections, borrowed from
//     the dataset's pool (internal/shadow) for each catalog statement,
//     with the session's settings applied.
//   - relay.go: byte-level forwarding: a catalog statement is written to
//     the shadow's socket in one write and the shadow's reply is copied
//     to the client (or kept for a portal) without decoding its rows.
//   - dp.go, post.go: the DP route: package pipeline prepares the
//     statement (plan, request, time slot); the proxy adds the admission
//     slot, the pacing of the answer, cancellation and, for
//     post-processing statements, the shadow connection of the outer SQL.
//   - encode.go: text and binary formats of int8, int4, numeric, text,
//     date, bool and float8.
//   - errors.go: the one place that turns errors into ErrorResponses.
//
// # Session lifecycle
//
// start-up → authentication → ParameterStatus set (server_version,
// client_encoding UTF8, DateStyle, TimeZone, integer_datetimes,
// standard_conforming_strings, …) → BackendKeyData → ReadyForQuery('I') →
// messages until Terminate, a disconnect, IdleTimeout (57P05) or shutdown
// (57P01). Settings live in the session; those PostgreSQL reports are sent
// in ParameterStatus before ReadyForQuery when they change, and those that
// affect catalog answers (TimeZone, DateStyle, search_path, …) are applied
// with set_config to the pooled shadow connection each catalog statement
// borrows (only those that differ from what it had). BEGIN/COMMIT/ROLLBACK
// keep the transaction status ('I', 'T', 'E'); in a failed block every
// statement but COMMIT/ROLLBACK gets 25P02, and ROLLBACK restores the
// settings of BEGIN.
//
// # Simple and extended protocol
//
// A Query message is split into statements (pgsql.Split); each is routed
// and answered in turn (one CommandComplete or error each, one
// ReadyForQuery); after an error the rest of the string is skipped and, as
// the string is one implicit transaction, its earlier SETs are undone.
//
// In the extended protocol, Parse classifies the statement; Describe of a
// catalog statement asks the shadow, of a DP statement plans it (its
// parameter types inferred by the shadow, which has the same schema) and
// reports the plan's columns without reading data or spending budget.
// Execute runs a portal once and keeps its rows for row-limited Executes
// (PortalSuspended). A DP statement's $n parameters are bound as validated,
// quoted literals before rewriting. After an error, messages are skipped
// until Sync.
//
// # Routing and the security invariant
//
// pgsql.Classify routes every statement:
//
//   - session statements are answered by the proxy (SET/SHOW/RESET of
//     dp.epsilon, dp.delta, dp.mechanism and client settings, SHOW
//     dp.budget from the ledger, transaction control, DISCARD, DEALLOCATE);
//   - catalog statements that pass pgsql.CheckCatalog's allow-lists (read-
//     only catalog and scalar functions, no view of other sessions) go to a
//     pooled shadow connection that all analysts share (read-only, with
//     the catalog route's statement_timeout, at most a share of the pool
//     per analyst: shadow.go), and their results, notices and errors are
//     forwarded as PostgreSQL wrote them;
//   - statements that provably return no rows (a top-level LIMIT 0, or a
//     plain SELECT without aggregates filtered by WHERE 1 = 0, as BI tools
//     send to read result types) are catalog statements even when they
//     name protected tables: the shadow has the same columns and no
//     protected rows, so its answer is the real one (pgsql.Classify
//     decides, from syntax only);
//   - a SELECT DISTINCT of a protected table's column with public_values (optionally ordered
//     and limited) is answered from the policy's list, which is public: no
//     data read, no budget spent, a NOTICE saying so
//     (rewrite.PublicDistinct);
//   - DP statements go to rewrite.Rewrite and the Releaser, and their
//     answer comes with a NOTICE stating its cost and accuracy;
//   - everything else is refused with the classifier's error.
//
// The invariant: analyst text only ever goes to the shadow connection (and
// to rewrite's parser). The proxy never holds a connection to the data
// database; only the Releaser's Upstream does, and it is given the plan
// (whose SQL rewrite's emitter wrote), never the analyst's text. Errors of
// the DP path that are not *pgerr.Error become XX000 without their text,
// so upstream messages cannot carry data to the client.
//
// # Cancellation
//
// Every statement runs under a context derived from the connection's,
// cancelled by a CancelRequest that matches the session's BackendKeyData
// (random process id and secret; a wrong key is ignored silently, as in
// PostgreSQL) and bounded by statement_timeout. pgconn forwards the
// cancellation to the shadow with a real cancel request; the Releaser
// passes it upstream. A cancelled DP query stays charged. Shutdown closes
// idle sessions at once, lets running statements finish until
// Config.DrainTimeout, then cancels them.
//
// # Logging
//
// Each connection logs with conn_id, analyst and dataset. Statements are
// logged as a fingerprint (literals removed) and as truncated text at Debug
// only; at Info only failed or refused statements and new DP releases
// ("dp answer released") get a line, with the fingerprint, so forwarding
// a catalog statement or serving a cached DP answer costs no log line (a
// cached answer's line is at Debug; the Observer sees every answer). Values, passwords and noiseless
// numbers are never logged.
//
// # Observer
//
// Config.Observer, when set, is told of every statement once its reply is
// known: route, SQLSTATE, duration, and for a DP answer its cost and
// whether it came from the cache (observer.go). The admin endpoint's
// metrics and the audit log (internal/admin, internal/audit, wired in
// cmd/dpproxy) use it. It sees no text, parameter or result; it may ask
// for the statement's fingerprint. Without an Observer the session pays
// one nil check per statement.
package proxy
