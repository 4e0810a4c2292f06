package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestShadowRestrict: `dpproxy shadow restrict`, run as a superuser of the
// shadow database, leaves the config's shadow role without EXECUTE on the
// volatile functions catalog statements must not reach (review 81: the
// earlier advice, to start once with a superuser shadow_admin, built the
// shadow's objects as that superuser, which the real owner then could
// not rebuild).
func TestShadowRestrict(t *testing.T) {
	cfgPath, _, _, _ := stewardSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t) // the shadow database, as a superuser
	// The config's shadow DSN names the role s.
	if err := pgtest.Exec(ctx, dsn, `DO $$ BEGIN CREATE ROLE s; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	out := okCLI(t, "shadow", "restrict", "--config", cfgPath, "--dataset", "hospital", "--superuser-dsn", dsn)
	if !strings.Contains(out, "restricted: shadow role s") {
		t.Fatalf("shadow restrict: %s", out)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var may bool
	if err := conn.QueryRow(ctx, "SELECT has_function_privilege('s', 'pg_catalog.ts_stat(text)', 'EXECUTE')").Scan(&may); err != nil {
		t.Fatal(err)
	}
	if may {
		t.Fatal("role s may still execute ts_stat")
	}
}
