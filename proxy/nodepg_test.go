package proxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// TestNodePostgres runs node-postgres (pg from npm) against the in-process
// proxy: SCRAM, a parameterised query whose parameter type the server
// infers, a grouped DP query, a refused query as an ordinary error with
// the connection usable afterwards.
func TestNodePostgres(t *testing.T) {
	t.Parallel()
	node, modules := pgtest.NodePG(t)
	ts := startShadowServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/node_pg_client.js",
		fmt.Sprintf("postgres://alice:alice@%s/hospital?sslmode=disable", ts.addr))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"count 42", "groups 7 department,n", "refused 42501", "after 42"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("node-postgres output lacks %q:\n%s", want, got)
		}
	}
	if len(ts.releaser.requests()) != 2 {
		t.Errorf("%d DP requests, want 2", len(ts.releaser.requests()))
	}
}
