package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// bench-serve refuses a missing config and a pprof address off loopback
// (profiles expose memory contents) before touching anything.
func TestBenchServeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench-serve"}, "--config FILE is required"},
		{[]string{"bench-serve", "--config", "x.yaml", "--pprof", "0.0.0.0:6060"}, "not a loopback"},
		{[]string{"bench-serve", "--config", "x.yaml", "--pprof", "localhost"}, "not a loopback"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
