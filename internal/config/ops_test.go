package config

import (
	"strings"
	"testing"
)

// TestParse_AdminAndAudit: each bad admin or audit setting gets an error
// that says what to change.
func TestParse_AdminAndAudit(t *testing.T) {
	ok := minimal + "admin: {listen: 127.0.0.1:9187, user: steward, password: \"plain:pw\"}\naudit: {path: audit.log, max_size_mb: 50}\n"
	c, err := Parse([]byte(ok), "c.yaml")
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	if c.Admin == nil || c.Admin.User != "steward" || c.Audit == nil || c.Audit.MaxSizeMB != 50 {
		t.Fatalf("admin/audit = %+v %+v", c.Admin, c.Audit)
	}
	if c, err := Parse([]byte(minimal), "c.yaml"); err != nil || c.Admin != nil || c.Audit != nil {
		t.Fatalf("admin and audit must be off by default: %+v %+v %v", c.Admin, c.Audit, err)
	}
	tests := []struct{ name, doc, want string }{
		{"no listen", "admin: {user: steward, password: \"plain:pw\"}", "admin.listen: give host:port"},
		{"bad listen", "admin: {listen: nowhere, user: steward, password: \"plain:pw\"}", `admin.listen: "nowhere" is not host:port`},
		{"public without TLS", "admin: {listen: 0.0.0.0:9187, user: steward, password: \"plain:pw\"}", "admin.tls (cert and key) is required"},
		{"same as pgwire", "listen: 127.0.0.1:6432\nadmin: {listen: 127.0.0.1:6432, user: steward, password: \"plain:pw\"}", "must differ from listen"},
		{"no user", "admin: {listen: 127.0.0.1:9187, password: \"plain:pw\"}", "admin.user: name the steward"},
		{"analyst's credentials", "admin: {listen: 127.0.0.1:9187, user: alice, password: \"plain:alice\"}", "alice is an analyst"},
		{"clear password", "admin: {listen: 127.0.0.1:9187, user: steward, password: hunter2}", "dpproxy passwd steward"},
		{"empty plain", "admin: {listen: 127.0.0.1:9187, user: steward, password: \"plain:\"}", "admin.password"},
		{"half TLS", "admin: {listen: 0.0.0.0:9187, user: steward, password: \"plain:pw\", tls: {cert: c.pem}}", "admin.tls: both cert and key"},
		{"unknown admin key", "admin: {listen: 127.0.0.1:9187, user: steward, pasword: x}", `unknown key "pasword"`},
		{"audit without path", "audit: {max_backups: 3}", "audit.path: name the audit log file"},
		{"negative rotation", "audit: {path: a.log, max_age_days: -1}", "must not be negative"},
		{"analyst named like a team", "analysts:\n  \"team:x\": {password: \"plain:x\"}", "reserved for teams"},
		{"analyst named like a steward's budget", "analysts:\n  \"steward:x\": {password: \"plain:x\"}", "reserved for stewards' budgets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := minimal + tt.doc + "\n"
			if strings.HasPrefix(tt.doc, "analysts:") {
				doc = strings.Replace(minimal, "analysts:\n", tt.doc+"\n", 1)
			}
			_, err := Parse([]byte(doc), "c.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := Parse([]byte(minimal+"admin: {listen: \"[::]:9187\", user: steward, password: \"plain:pw\", tls: {cert: c.pem, key: k.pem}}\n"), "c.yaml"); err != nil {
		t.Errorf("admin on all interfaces with TLS: %v", err)
	}
}
