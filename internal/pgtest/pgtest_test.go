package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestNewDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("NewDatabase returned the same DSN twice: %s", a)
	}
	for _, dsn := range []string{a, b} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect %s: %v", dsn, err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("fresh database %s has %d relations in public, want 0", dsn, n)
		}
		var super bool
		if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
			t.Fatal(err)
		}
		if !super {
			t.Errorf("NewDatabase DSN %s is not a superuser", dsn)
		}
		conn.Close(ctx)
	}
	if a, b := Cluster(t), Cluster(t); a != b {
		t.Error("Cluster returned two different clusters")
	}
}
