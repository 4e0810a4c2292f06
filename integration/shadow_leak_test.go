package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The shadow catalog, where analysts' catalog statements run, lives in a
// cluster of its own: cluster-wide statistics read through the proxy (as
// alice, on the shadow connection) must know nothing of the data cluster —
// not its databases, not the rows loaded into or read from hospital, not
// its sizes, not its sessions. The statistics and activity views
// themselves are refused on the catalog route (pgsql.CheckCatalog: they
// would show the other analysts' sessions on the shared shadow cluster).

// proxyScalar runs sql through the proxy as alice with psql and returns the
// single unaligned value.
func proxyScalar(t *testing.T, sql string) string {
	t.Helper()
	out, errOut, code := psql(t, env.aliceDSN, "-A", "-t", "-c", sql)
	if code != 0 {
		t.Fatalf("psql through the proxy: %s: exit %d, stderr %q", sql, code, errOut)
	}
	return strings.TrimSpace(out)
}

// dataScalar runs sql on the data cluster as its superuser (the demo's
// upstream: line), to show what a leak would reveal.
func dataScalar(t *testing.T, sql string) string {
	t.Helper()
	out, errOut, code := psql(t, env.upstreamDSN, "-A", "-t", "-c", sql)
	if code != 0 {
		t.Fatalf("psql on the data cluster: %s: exit %d, stderr %q", sql, code, errOut)
	}
	return strings.TrimSpace(out)
}

// proxyRefused runs sql through the proxy as alice with psql and checks
// that it is refused with 42501.
func proxyRefused(t *testing.T, sql string) {
	t.Helper()
	_, errOut, code := psql(t, env.aliceDSN, "-A", "-t", "-c", sql)
	if code == 0 || !strings.Contains(errOut, "42501") {
		t.Errorf("through the proxy: %s: exit %d, stderr %q; want a 42501 refusal", sql, code, errOut)
	}
}

func mustInt(t *testing.T, what, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s = %q, not an integer", what, s)
	}
	return n
}

func TestShadowLeak_PgStatDatabase(t *testing.T) {
	requireDemo(t)
	// The data cluster does record the load of 200000 visits (and 50000
	// patients) into hospital: that is what must not be reachable. Backends
	// flush their statistics within about a second.
	deadline := time.Now().Add(15 * time.Second)
	for dataScalar(t, "SELECT tup_inserted >= 200000 FROM pg_stat_database WHERE datname = 'hospital'") != "t" {
		if time.Now().After(deadline) {
			t.Fatal("the data cluster's pg_stat_database does not show the loaded rows; the test below would prove nothing")
		}
		time.Sleep(200 * time.Millisecond)
	}

	proxyRefused(t, "SELECT coalesce(datname, ''), tup_inserted, tup_returned FROM pg_stat_database ORDER BY 1")
	// The data cluster's other database is not in the shadow cluster.
	if got := proxyScalar(t, "SELECT count(*) FROM pg_database WHERE datname IN ('dpproxy_ledger', 'hospital_shadow')"); got != "0" {
		t.Errorf("pg_database through the proxy lists %s databases of the data cluster", got)
	}
}

func TestShadowLeak_Sizes(t *testing.T) {
	requireDemo(t)
	dataDB := mustInt(t, "data pg_database_size", dataScalar(t, "SELECT pg_database_size('hospital')"))
	dataVisits := mustInt(t, "data pg_total_relation_size", dataScalar(t, "SELECT pg_total_relation_size('visits')"))

	// hospital, through the proxy, is the shadow's database: its size is
	// that of an empty database, smaller than the data's by at least the
	// real visits table.
	// Both sizes in one statement: dropped tables' files (the shadow build
	// of every extra proxy drops and recreates its tables) go at the next
	// checkpoint, which may fall between two statements.
	sizes := strings.Fields(proxyScalar(t, "SELECT pg_database_size('hospital') || ' ' || pg_database_size(current_database())"))
	if len(sizes) != 2 {
		t.Fatalf("pg_database_size through the proxy: %q", sizes)
	}
	got := mustInt(t, "pg_database_size", sizes[0])
	if cur := mustInt(t, "pg_database_size(current_database())", sizes[1]); got != cur {
		t.Errorf("pg_database_size('hospital') = %d through the proxy, but the connected database has %d: another cluster's hospital", got, cur)
	}
	if got > dataDB-dataVisits {
		t.Errorf("pg_database_size('hospital') through the proxy = %d, want at most %d (the data's %d less its visits table)", got, dataDB-dataVisits, dataDB)
	}
	// visits there is empty: at most the pages of its empty TOAST index.
	if v := mustInt(t, "pg_total_relation_size", proxyScalar(t, "SELECT pg_total_relation_size('visits')")); v > 16384 || v >= dataVisits {
		t.Errorf("pg_total_relation_size('visits') through the proxy = %d, want an empty table's (≤ 16384; the data's is %d)", v, dataVisits)
	}
}

func TestShadowLeak_TableStatistics(t *testing.T) {
	requireDemo(t)
	// The data's planner statistics exist (the demo runs ANALYZE) ...
	// (at least the demo's 200,000 visits: tests of this package add a
	// patient's rows for a while, and autovacuum may count them: 200,020
	// in one CI run).
	if got := mustInt(t, "data reltuples", dataScalar(t, "SELECT reltuples::bigint FROM pg_class WHERE relname = 'visits'")); got < 200000 {
		t.Fatalf("data cluster visits reltuples = %d, want at least the demo's 200000", got)
	}
	// ... the shadow's describe an empty (or never analysed) table.
	rt := proxyScalar(t, "SELECT reltuples FROM pg_class WHERE relname = 'visits'")
	if rt != "0" && rt != "-1" {
		t.Errorf("pg_class.reltuples of visits through the proxy = %q, want 0 or -1", rt)
	}
	if got := proxyScalar(t, "SELECT relpages FROM pg_class WHERE relname = 'visits'"); got != "0" {
		t.Errorf("pg_class.relpages of visits through the proxy = %s, want 0", got)
	}
	proxyRefused(t, "SELECT count(*) FROM pg_stats WHERE tablename = 'visits'")
	proxyRefused(t, "SELECT coalesce(sum(n_live_tup + n_tup_ins), 0) FROM pg_stat_user_tables")
}

func TestShadowLeak_Activity(t *testing.T) {
	requireDemo(t)
	// Keep a session open on the data cluster: it must not show.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sep := "?"
	if strings.Contains(env.upstreamDSN, "?") {
		sep = "&"
	}
	probe := connect(t, ctx, env.upstreamDSN+sep+"application_name=shadow_leak_probe")
	if _, err := probe.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	proxyRefused(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'shadow_leak_probe' OR usename IN ('dpproxy_reader', 'dpproxy_ledger') OR datname = 'dpproxy_ledger'")
}

func TestShadowLeak_DatabaseName(t *testing.T) {
	requireDemo(t)
	if got := proxyScalar(t, "SELECT current_database()"); got != "hospital" {
		t.Errorf("current_database() through the proxy = %q, want hospital", got)
	}
	out, errOut, code := psql(t, env.aliceDSN, "-A", "-t", "-c", `\l`)
	if code != 0 {
		t.Fatalf(`\l: exit %d, stderr %q`, code, errOut)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, _, _ := strings.Cut(line, "|")
		names[name] = true
	}
	if !names["hospital"] {
		t.Errorf(`\l through the proxy does not list hospital: %q`, out)
	}
	if names["dpproxy_ledger"] || names["hospital_shadow"] {
		t.Errorf(`\l through the proxy lists a database of the data cluster: %q`, out)
	}
}
