package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimal = `policies: policies
ledger: postgres://l@127.0.0.1/ledger
datasets:
  hospital: {upstream: postgres://u@h/db, shadow: postgres://s@h2/db, shadow_admin: postgres://a@h2/db}
analysts:
  alice: {password: "plain:alice"}
`

func TestParse_Defaults(t *testing.T) {
	c, err := Parse([]byte(minimal), "c.yaml")
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	if c.Listen != "127.0.0.1:6432" || c.StatementTimeout.Duration != 30*time.Second || c.MaxConnections != 200 || c.LogLevel != "info" ||
		c.IdleTimeout.Duration != time.Hour || c.MaxMessageBytes != 1<<20 {
		t.Fatalf("defaults = %+v", c)
	}
	if d := c.Datasets["hospital"]; d.PublicMaxRows != DefaultPublicMaxRows || d.PublicRefresh.Duration != 0 {
		t.Fatalf("public table defaults = %d, %v; want %d, 0s", d.PublicMaxRows, d.PublicRefresh, DefaultPublicMaxRows)
	}
	if c.UpstreamMaxConnections != DefaultUpstreamMaxConnections || c.ShadowMaxConnections != DefaultShadowMaxConnections ||
		c.ShadowAcquireTimeout.Duration != 5*time.Second {
		t.Fatalf("pool defaults: upstream %d, shadow %d, acquire timeout %v", c.UpstreamMaxConnections, c.ShadowMaxConnections, c.ShadowAcquireTimeout)
	}
	if c.MaxMemoryPerAnalystMB != DefaultMaxMemoryPerAnalystMB {
		t.Fatalf("max_memory_per_analyst_mb default %d, want %d (the doctor's memory check reads it)", c.MaxMemoryPerAnalystMB, DefaultMaxMemoryPerAnalystMB)
	}
	if c.ShadowMaxConnectionsPerAnalyst != DefaultShadowMaxConnections/4 || c.CatalogStatementTimeout.Duration != DefaultCatalogStatementTimeout {
		t.Fatalf("catalog defaults: %d per analyst, timeout %v", c.ShadowMaxConnectionsPerAnalyst, c.CatalogStatementTimeout)
	}
	if !c.Analysts["alice"].MayQuery("hospital") {
		t.Fatal("an analyst with no datasets list may query every dataset")
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown key", minimal + "listne: x\n", `c.yaml:7: unknown key "listne"`},
		{"text for a number", minimal + "max_connections: many\n", `max_connections needs a whole number, not the text "many"`},
		{"bad listen", minimal + "listen: nowhere\n", "not host:port"},
		{"no ledger", strings.Replace(minimal, "ledger: postgres://l@127.0.0.1/ledger\n", "", 1), "ledger:"},
		{"missing shadow", strings.Replace(minimal, "shadow: postgres://s@h2/db, ", "", 1), "all required"},
		{"password in clear", strings.Replace(minimal, `"plain:alice"`, "alice", 1), "dpproxy passwd alice"},
		{"bad duration", minimal + "statement_timeout: soon\n", "not a duration"},
		{"bad level", minimal + "log_level: loud\n", "log_level"},
		{"half tls", minimal + "tls: {cert: c.pem}\n", "cert and key"},
		{"negative idle", minimal + "idle_timeout: -1s\n", "idle_timeout"},
		{"negative upstream pool", minimal + "upstream_max_connections: -1\n", "upstream_max_connections"},
		{"huge upstream pool", minimal + "upstream_max_connections: 5000\n", "upstream_max_connections"},
		{"negative shadow pool", minimal + "shadow_max_connections: -3\n", "shadow_max_connections"},
		{"negative acquire timeout", minimal + "shadow_acquire_timeout: -1s\n", "shadow_acquire_timeout"},
		{"bad acquire timeout", minimal + "shadow_acquire_timeout: forever\n", "not a duration"},
		{"tiny messages", minimal + "max_message_bytes: 10\n", "max_message_bytes"},
		{"zero rate", minimal + "rate_limit: {per_second: 0}\n", "rate_limit.per_second"},
		{"negative burst", strings.Replace(minimal, `{password: "plain:alice"}`, `{password: "plain:alice", rate_limit: {per_second: 1, burst: -1}}`, 1), "analysts.alice.rate_limit.burst"},
		{"unknown rate key", minimal + "rate_limit: {per_minute: 5}\n", "per_minute"},
		{"negative public_max_rows", strings.Replace(minimal, "shadow_admin: postgres://a@h2/db}", "shadow_admin: postgres://a@h2/db, public_max_rows: -5}", 1), "datasets.hospital.public_max_rows"},
		{"huge public_max_rows", strings.Replace(minimal, "shadow_admin: postgres://a@h2/db}", "shadow_admin: postgres://a@h2/db, public_max_rows: 20000000}", 1), "datasets.hospital.public_max_rows"},
		{"fast public_refresh", strings.Replace(minimal, "shadow_admin: postgres://a@h2/db}", "shadow_admin: postgres://a@h2/db, public_refresh: 1s}", 1), "datasets.hospital.public_refresh"},
		{"negative response time", strings.Replace(minimal, "shadow_admin: postgres://a@h2/db}", "shadow_admin: postgres://a@h2/db, response_time: -1s}", 1), "datasets.hospital.response_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "c.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "c.yaml") {
				t.Fatalf("Parse() = %v, want an error naming c.yaml and containing %q", err, tt.want)
			}
		})
	}
}

func TestParse_PoolSizes(t *testing.T) {
	c, err := Parse([]byte(minimal+"upstream_max_connections: 32\nshadow_max_connections: 8\nshadow_acquire_timeout: 250ms\n"), "c.yaml")
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	if c.UpstreamMaxConnections != 32 || c.ShadowMaxConnections != 8 || c.ShadowAcquireTimeout.Duration != 250*time.Millisecond {
		t.Fatalf("pools: upstream %d, shadow %d, acquire timeout %v; want 32, 8, 250ms", c.UpstreamMaxConnections, c.ShadowMaxConnections, c.ShadowAcquireTimeout)
	}
	if c.ShadowMaxConnectionsPerAnalyst != 2 {
		t.Fatalf("default share of a pool of 8: %d, want 2", c.ShadowMaxConnectionsPerAnalyst)
	}
	c, err = Parse([]byte(minimal+"shadow_max_connections: 8\nshadow_max_connections_per_analyst: 3\ncatalog_statement_timeout: 2s\n"), "c.yaml")
	if err != nil || c.ShadowMaxConnectionsPerAnalyst != 3 || c.CatalogStatementTimeout.Duration != 2*time.Second {
		t.Fatalf("Parse(per analyst 3, catalog timeout 2s) = %+v, %v", c, err)
	}
	for _, bad := range []string{"shadow_max_connections: 8\nshadow_max_connections_per_analyst: 9\n", "catalog_statement_timeout: 2h\n", "catalog_statement_timeout: 1ms\n"} {
		if _, err := Parse([]byte(minimal+bad), "c.yaml"); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestLoad_ExampleAndPaths(t *testing.T) {
	c, err := Load("../../examples/dpproxy.yaml")
	if err != nil {
		t.Fatalf("Load(example) = %v", err)
	}
	if got := c.Path(c.Policies); !filepath.IsAbs(got) || !strings.HasSuffix(got, filepath.Join("examples", "policies")) {
		t.Fatalf("Path(policies) = %s", got)
	}
	if c.Path("/abs/x") != "/abs/x" {
		t.Fatal("absolute paths must stay as they are")
	}
	if a := c.Analysts["bob"]; !a.MayQuery("hospital") || a.MayQuery("other") {
		t.Fatalf("bob's datasets = %v", a.Datasets)
	}
}

func TestParse_IdleTimeoutZeroDisables(t *testing.T) {
	c, err := Parse([]byte(minimal+"idle_timeout: 0s\n"), "c.yaml")
	if err != nil || c.IdleTimeout.Duration != 0 {
		t.Fatalf("Parse(idle_timeout: 0s) = %+v, %v; want 0 (disabled)", c.IdleTimeout, err)
	}
}

func TestParse_RateLimitAndResponseTime(t *testing.T) {
	doc := strings.Replace(minimal, "shadow_admin: postgres://a@h2/db}", "shadow_admin: postgres://a@h2/db, response_time: 250ms}", 1) +
		"  bob: {password: \"plain:bob\", rate_limit: {per_second: 0.5, burst: 3}}\nrate_limit: {per_second: 2.5}\n"
	c, err := Parse([]byte(doc), "c.yaml")
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	if got := c.Datasets["hospital"].ResponseTime.Duration; got != 250*time.Millisecond {
		t.Errorf("response_time = %v, want 250ms", got)
	}
	if rl := c.RateLimitOf("alice"); rl == nil || rl.PerSecond != 2.5 || rl.Burst != 3 {
		t.Errorf("alice's rate limit = %+v, want the default 2.5/s with burst ceil(2.5) = 3", rl)
	}
	if rl := c.RateLimitOf("bob"); rl == nil || rl.PerSecond != 0.5 || rl.Burst != 3 {
		t.Errorf("bob's rate limit = %+v, want his own 0.5/s burst 3", rl)
	}
	c, err = Parse([]byte(minimal), "c.yaml")
	if err != nil || c.RateLimitOf("alice") != nil || c.Datasets["hospital"].ResponseTime.Duration != 0 {
		t.Errorf("defaults: rate limit %v, response time %v; want none", c.RateLimitOf("alice"), c.Datasets["hospital"].ResponseTime)
	}
}

// TestParse_NameLength: analyst and dataset names longer than PostgreSQL's
// 63 bytes are refused, since the proxy cuts the start-up's names to 63.
func TestParse_NameLength(t *testing.T) {
	long := strings.Repeat("a", MaxNameBytes+1)
	base := minimal
	for _, c := range []struct{ from, to string }{
		{"  alice:", "  " + long + ":"},
		{"  hospital:", "  " + long + ":"},
	} {
		if !strings.Contains(base, c.from) {
			t.Fatalf("the minimal config has no %q", c.from)
		}
		_, err := Parse([]byte(strings.Replace(base, c.from, c.to, 1)), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), "at most 63 bytes") {
			t.Errorf("%s of %d bytes: Parse() = %v, want refused", strings.TrimSpace(c.from), len(long), err)
		}
	}
	if _, err := Parse([]byte(base), "t.yaml"); err != nil {
		t.Fatalf("control: the example config: %v", err)
	}
}
