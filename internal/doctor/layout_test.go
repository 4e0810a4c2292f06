package doctor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
)

// layoutPolicy protects four tables by uid (plain, hashed, ranged, other)
// and declares one public table, which checkLayout leaves alone.
const layoutPolicy = `
dataset: layout
privacy_unit: person
budget: {epsilon: 1, delta: 1.0e-6, accountant: pure}
defaults: {epsilon: 0.1}
tables:
  plain:  {unit_column: uid, max_groups_per_unit: 1, max_rows_per_unit: 5, max_rows: 100, columns: {d: {type: date, lower: 2020-01-01, upper: 2024-12-31}}}
  hashed: {unit_column: uid, max_groups_per_unit: 1, max_rows_per_unit: 5, max_rows: 100, columns: {d: {type: date, lower: 2020-01-01, upper: 2024-12-31}}}
  ranged: {unit_column: uid, max_groups_per_unit: 1, max_rows_per_unit: 5, max_rows: 100, columns: {d: {type: date, lower: 2020-01-01, upper: 2024-12-31}}}
  other:  {unit_column: uid, max_groups_per_unit: 1, max_rows_per_unit: 5, max_rows: 100, columns: {d: {type: date, lower: 2020-01-01, upper: 2024-12-31}}}
  wards:  {public: true, columns: {ward: {type: int}}}
`

func parseLayoutPolicy(t *testing.T) *policy.Dataset {
	t.Helper()
	ds, err := policy.Parse(strings.NewReader(layoutPolicy), "layout")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// findingFor returns the one finding that names table t.
func findingFor(t *testing.T, r *Report, table string) Finding {
	t.Helper()
	var out []Finding
	for _, f := range r.Findings {
		if strings.HasPrefix(f.Message, "table "+table+" ") {
			out = append(out, f)
		}
	}
	if len(out) != 1 {
		t.Fatalf("findings for table %s: %v, want one (all: %v)", table, out, r.Findings)
	}
	return out[0]
}

func TestCheckLayout(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgtest.Exec(ctx, dsn,
		"CREATE TABLE plain (uid bigint, d date)",
		"CREATE TABLE hashed (uid bigint, d date) PARTITION BY HASH (uid)",
		"CREATE TABLE hashed_0 PARTITION OF hashed FOR VALUES WITH (MODULUS 4, REMAINDER 0)",
		"CREATE TABLE hashed_1 PARTITION OF hashed FOR VALUES WITH (MODULUS 4, REMAINDER 1)",
		"CREATE TABLE hashed_2 PARTITION OF hashed FOR VALUES WITH (MODULUS 4, REMAINDER 2)",
		"CREATE TABLE hashed_3 PARTITION OF hashed FOR VALUES WITH (MODULUS 4, REMAINDER 3)",
		"CREATE TABLE ranged (uid bigint, d date) PARTITION BY RANGE (d)",
		"CREATE TABLE ranged_all PARTITION OF ranged DEFAULT",
		"CREATE TABLE other (uid bigint, d date) PARTITION BY HASH (d)",
		"CREATE TABLE other_0 PARTITION OF other FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
		"CREATE TABLE other_1 PARTITION OF other FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
		"CREATE TABLE wards (ward int)",
	); err != nil {
		t.Fatal(err)
	}
	r := &Report{}
	if err := checkLayout(ctx, r, "layout", dsn, parseLayoutPolicy(t)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table string
		ok    bool
		want  string
	}{
		{"plain", true, "is a plain table on one node: the per-unit stage of each DP query is one aggregate over the whole table"},
		{"hashed", true, "is hash-partitioned by its unit column uid into 4 partitions"},
		{"ranged", false, "is partitioned by d (range), not hash-partitioned by its unit column uid alone"},
		{"other", false, "is partitioned by d (hash), not hash-partitioned by its unit column uid alone"},
	}
	for _, tc := range tests {
		f := findingFor(t, r, tc.table)
		if f.OK != tc.ok || !strings.Contains(f.Message, tc.want) {
			t.Errorf("table %s: %v, want ok=%v with %q", tc.table, f, tc.ok, tc.want)
		}
	}
	if len(r.Findings) != len(tests) {
		t.Errorf("%d findings, want %d (none for the public table): %v", len(r.Findings), len(tests), r.Findings)
	}
}

// TestDoctor_CitusLayout (make test-citus) distributes the tables of
// layoutPolicy on a Citus cluster: by the unit (ok, one colocation group),
// as a reference table, by another column, one left local, and one by the
// unit in a second colocation group.
func TestDoctor_CitusLayout(t *testing.T) {
	if os.Getenv("DPPROXY_CITUS") != "1" {
		t.Skip("DPPROXY_CITUS is not 1: the Citus tests run under make test-citus")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := citus.Start(ctx, citus.Options{Workers: 1, NoFsync: true, Settings: map[string]string{"citus.shard_count": "4"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.CreateDatabase(ctx, "layout"); err != nil {
		t.Fatal(err)
	}
	dsn := c.Coordinator.DSN("layout")
	if err := pgtest.Exec(ctx, dsn,
		"CREATE TABLE plain (uid bigint, d date)",
		"CREATE TABLE hashed (uid bigint, d date)",
		"CREATE TABLE ranged (uid bigint, d date)",
		"CREATE TABLE other (uid int, d date)",
		"SELECT create_distributed_table('hashed', 'uid')",
		"SELECT create_reference_table('ranged')",
		"SELECT create_distributed_table('plain', 'd')",
		// int, not bigint: a colocation group of its own.
		"SELECT create_distributed_table('other', 'uid')",
	); err != nil {
		t.Fatal(err)
	}
	r := &Report{}
	if err := checkLayout(ctx, r, "layout", dsn, parseLayoutPolicy(t)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table string
		ok    bool
		want  string
	}{
		{"hashed", true, "is distributed by its unit column uid (Citus, hash, colocation group"},
		{"ranged", false, "is a Citus reference table"},
		{"plain", false, "is distributed by d (Citus, method h), not by its unit column uid"},
		{"other", true, "is distributed by its unit column uid"},
	}
	for _, tc := range tests {
		f := findingFor(t, r, tc.table)
		if f.OK != tc.ok || !strings.Contains(f.Message, tc.want) {
			t.Errorf("table %s: %v, want ok=%v with %q", tc.table, f, tc.ok, tc.want)
		}
	}
	last := r.Findings[len(r.Findings)-1]
	if last.OK || !strings.Contains(last.Message, "in 2 Citus colocation groups (hashed in group") {
		t.Errorf("last finding %v, want the colocation warning", last)
	}
}
