package shadowacl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestRestrictFunctions: on a shadow database whose admin is a superuser,
// the shadow role can no longer execute the volatile functions that change
// or read what a session leaves for the next (the second guard behind the
// catalog route's allow-list, which attack rounds 78 and 79 got past with
// ts_stat called by attribute notation), while the allowed ones, the views
// clients read and ordinary expressions still work; a second run changes
// nothing.
func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRestrictFunctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	role := fmt.Sprintf("acl_%d", os.Getpid())
	if err := pgtest.Exec(ctx, dsn, "DROP ROLE IF EXISTS "+role, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pgtest.Exec(context.Background(), dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'", "DROP OWNED BY "+role, "DROP ROLE IF EXISTS "+role)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	roleDSN := u.String()
	for i := 0; i < 2; i++ {
		ok, err := RestrictFunctions(ctx, dsn, role, pgsql.CatalogFunctionNames())
		if err != nil || !ok {
			t.Fatalf("RestrictFunctions (run %d) = %v, %v; want true for a superuser admin", i+1, ok, err)
		}
	}
	conn, err := pgx.Connect(ctx, roleDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"SELECT pg_sleep(0)",
		"SELECT ts_stat('SELECT to_tsvector(''simple'', ''x'')')",
		"SELECT t.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(''simple'', ''x'')']) t",
		"SELECT pg_advisory_lock(1)",
		"SELECT pg_try_advisory_lock(1)",
		"SELECT setseed(0.5)",
		"SELECT pg_terminate_backend(pg_backend_pid() + 1)",
		"SELECT query_to_xml('SELECT 1', true, false, '')",
		"SELECT pg_notify('c', 'x')",
		"SELECT lo_create(0)",
	} {
		_, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: %v, want 42501 permission denied", sql, err)
		}
	}
	for _, sql := range []string{
		"SELECT count(*) FROM pg_settings",
		"SELECT count(*) FROM pg_sequences", // pg_sequence_last_value, volatile, kept for the view
		"SELECT count(*) FROM pg_locks",
		"SELECT count(*) FROM information_schema.columns",
		"SELECT pg_relation_size('pg_class'), clock_timestamp() > now(), 1 + 1, 'a' || 'b', lower('X')",
		"SELECT relname FROM pg_class WHERE relname ~ '^pg_' ORDER BY 1 LIMIT 1",
		"SELECT current_setting('statement_timeout'), version(), pg_get_userbyid(10)",
		// The pool applies settings with set_config (shadow.Conn.Apply).
		"SELECT set_config('application_name', 'x', false)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
}
