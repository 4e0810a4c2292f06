// Package shadowacl restricts what the shadow role may execute in a
// shadow database: the second guard of the shadow's shared sessions. It
// imports only pgx.
package shadowacl

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RestrictFunctions is the second guard of the shadow's shared sessions
// (SECURITY.md G8), behind the catalog route's lexical allow-list
// (pgsql.CheckCatalog): on the shadow database reached with adminDSN, it
// revokes from PUBLIC the EXECUTE privilege of every volatile function of
// pg_catalog that is not in keep (the allow-list's names) and that
// PostgreSQL does not call on the shadow role's behalf (operators, casts,
// the system views: their definitions name them, and a system view's
// dependencies are not in pg_depend). It grants nothing back to PUBLIC, so
// a steward's own REVOKE of an allowed function stands. Volatile functions are the
// ones that can change or read the state a session leaves for the next
// (setseed, advisory locks, large objects, sleeping, signals, ts_stat and
// query_to_xml, which run SQL text): with EXECUTE revoked, a
// statement that gets past the lexical check still cannot call them
// (attack rounds 78 and 79 did, by attribute notation). Privileges on
// pg_catalog's functions are the bootstrap superuser's to change, so it
// does this only when connected as a superuser (`dpproxy shadow
// restrict`, the demo's set-up, or a superuser shadow_admin); function privileges are per database, so the
// shadow database alone is changed. It reports whether role (the shadow
// role) is then without EXECUTE on ts_stat(text), the mark of a
// restricted shadow. Idempotent.
//
// set_config stays executable whatever keep says: the pool applies each
// session's settings with it (shadow.Conn.Apply), and it takes three
// arguments, so attribute notation cannot call it; analysts' statements
// cannot name it (pgsql.CheckCatalog).
func RestrictFunctions(ctx context.Context, adminDSN, role string, keep []string) (bool, error) {
	keep = append(append([]string(nil), keep...), "set_config")
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return false, fmt.Errorf("shadowacl: %w", err)
	}
	defer conn.Close(context.Background())
	restricted := func() (bool, error) { return Restricted(ctx, conn, role) }
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		return false, fmt.Errorf("shadowacl: %w", err)
	}
	if !super {
		return restricted()
	}
	var revoke *string
	err = conn.QueryRow(ctx, `
		SELECT string_agg(p.oid::regprocedure::text, ', ') FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f' AND p.provolatile = 'v'
		  AND p.proname <> ALL($1::text[])
		  AND p.oid NOT IN (SELECT oprcode FROM pg_catalog.pg_operator)
		  AND p.oid NOT IN (SELECT castfunc FROM pg_catalog.pg_cast)
		  AND p.proname NOT IN (SELECT m[1] FROM pg_catalog.pg_class c,
		                        regexp_matches(pg_catalog.pg_get_viewdef(c.oid), '([a-z_0-9]+)\(', 'g') AS m
		                        WHERE c.relkind = 'v' AND c.relnamespace IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace))`,
		keep).Scan(&revoke)
	if err != nil {
		return false, fmt.Errorf("shadowacl: listing functions: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("shadowacl: %w", err)
	}
	defer tx.Rollback(context.Background())
	if revoke != nil {
		if _, err := tx.Exec(ctx, "REVOKE EXECUTE ON FUNCTION "+*revoke+" FROM PUBLIC"); err != nil {
			return false, fmt.Errorf("shadowacl: revoking EXECUTE on volatile functions: %w", err)
		}
	}
	// The shadow's owner (the proxy's shadow admin) keeps what shadow.Build
	// calls: the cluster's system identifier (that the shadow is not the
	// data's cluster) and the transaction lock that serialises builds.
	if _, err := tx.Exec(ctx, `DO $$ BEGIN
		EXECUTE format('GRANT EXECUTE ON FUNCTION pg_catalog.pg_control_system(), pg_catalog.pg_advisory_xact_lock(bigint) TO %s',
			(SELECT datdba::regrole::text FROM pg_catalog.pg_database WHERE datname = current_database())); -- regrole's text is quoted
		END $$`); err != nil {
		return false, fmt.Errorf("shadowacl: granting the shadow owner what shadow.Build calls: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("shadowacl: %w", err)
	}
	return restricted()
}

// Restricted reports whether role cannot execute ts_stat(text) in conn's
// database: the mark RestrictFunctions leaves (and dpproxy doctor reads).
func Restricted(ctx context.Context, conn *pgx.Conn, role string) (bool, error) {
	var may bool
	err := conn.QueryRow(ctx, "SELECT has_function_privilege($1, 'pg_catalog.ts_stat(text)', 'EXECUTE')", role).Scan(&may)
	if err != nil {
		return false, fmt.Errorf("shadowacl: %w", err)
	}
	return !may, nil
}
