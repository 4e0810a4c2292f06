package doctor

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestCheckConnectionLimits(t *testing.T) {
	super := pgtest.NewDatabase(t)
	u, err := url.Parse(super)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	role := fmt.Sprintf("doctor_conns_%d", os.Getpid())
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	ctx := context.Background()
	if err := pgtest.Exec(ctx, super,
		"DROP ROLE IF EXISTS "+q(role),
		"CREATE ROLE "+q(role)+" LOGIN PASSWORD 'pw' CONNECTION LIMIT 3",
		"GRANT CONNECT ON DATABASE "+q(db)+" TO "+q(role),
	); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pgtest.Exec(context.Background(), super, "REVOKE ALL ON DATABASE "+q(db)+" FROM "+q(role), "DROP ROLE IF EXISTS "+q(role))
	})
	u.User = url.UserPassword(role, "pw")
	dsn := u.String()

	tests := []struct {
		name   string
		want   int
		ok     bool
		substr string
	}{
		{"pool above the role's limit", 10, false, "the server allows 3 connections (role " + role + " has CONNECTION LIMIT 3), fewer than upstream_max_connections = 10"},
		{"pool within the limit", 3, true, "enough for upstream_max_connections = 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{}
			if err := checkConnectionLimits(ctx, r, "hospital", "upstream", dsn, "upstream_max_connections", tt.want); err != nil {
				t.Fatal(err)
			}
			if len(r.Findings) != 1 || r.Findings[0].OK != tt.ok || !strings.Contains(r.Findings[0].Message, tt.substr) {
				t.Fatalf("findings = %v, want one with ok=%v containing %q", r.Findings, tt.ok, tt.substr)
			}
		})
	}
	// Without a role limit, max_connections less the reserved slots.
	r := &Report{}
	if err := pgtest.Exec(ctx, super, "ALTER ROLE "+q(role)+" CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	if err := checkConnectionLimits(ctx, r, "hospital", "shadow", dsn, "shadow_max_connections", 100000); err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 1 || r.Findings[0].OK || !strings.Contains(r.Findings[0].Message, "max_connections = ") {
		t.Fatalf("findings = %v, want a warning naming max_connections", r.Findings)
	}
}
