// Package demodb gives tests a database loaded with the demo's data. It is
// apart from pgtest because the demo package's own tests use pgtest.
package demodb

import (
	"context"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// New is pgtest.NewDatabase loaded with the demo's data (200,000 visits
// of demo.Generate(demo.Seed)) and analyzed, with a connection to it that
// is closed when the test ends. Tests that use it skip under -short.
func New(t testing.TB) (dsn string, conn *pgx.Conn) {
	t.Helper()
	if testing.Short() {
		t.Skip("loads the demo's 200,000 visits")
	}
	dsn = pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := demo.Load(ctx, dsn, demo.Generate(demo.Seed)); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	return dsn, conn
}
