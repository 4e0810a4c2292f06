package rewrite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The emitted SQL on Citus (make test-citus, DPPROXY_CITUS=1): every shape
// the planner accepts must run on a coordinator and two workers with each
// protected table distributed by its unit column (colocated) and each
// public table a reference table, and its per-unit stage must run inside
// the shards. A shape Citus cannot push down fails there after the charge
// (an incident), so a failure here is a bug of the emitter.

// citusEnabled reports whether the Citus tests run (DPPROXY_CITUS=1, as
// make test-citus sets it). Without it they skip: make test does not need
// Citus.
func citusEnabled(t *testing.T) {
	t.Helper()
	if os.Getenv("DPPROXY_CITUS") != "1" {
		t.Skip("DPPROXY_CITUS is not 1: the Citus tests run under make test-citus")
	}
	if err := citus.Check(""); err != nil {
		// make test-citus builds Citus first; a missing one is never a
		// skip there.
		t.Fatal(err)
	}
}

// explainCitus returns EXPLAIN (VERBOSE, COSTS OFF) of a plan's SQL, with its
// bind parameters.
func explainCitus(ctx context.Context, conn *pgx.Conn, p *Plan, ds *policy.Dataset) (string, error) {
	rows, err := conn.Query(ctx, "EXPLAIN (VERBOSE, COSTS OFF) "+p.SQL, append([]any{pgx.QueryExecModeExec}, p.QueryArgs(ds)...)...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		b.Write(rows.RawValues()[0])
		b.WriteByte('\n')
	}
	return b.String(), rows.Err()
}

// unitNames are the names a unit column may carry in a plan over ds: each
// protected table's unit column, and the emitter's aliases dp_unit and
// dp_ju (a join input's unit).
func unitNames(ds *policy.Dataset) []string {
	out := []string{"dp_unit", "dp_ju"}
	for _, t := range ds.Tables {
		if !t.Public && t.UnitColumn != "" {
			out = append(out, t.UnitColumn)
		}
	}
	return out
}

// citusDB is one database of a throwaway Citus cluster with every policy of
// totalPolicies in its own schema, filled with the hostile table set.
type citusDB struct {
	conn *pgx.Conn
	port int                        // the coordinator's
	sets map[string]*policy.Dataset // by policy version: the policy moved to its schema
	dss  []*policy.Dataset          // as written, in order
}

func startCitusDB(t *testing.T, ctx context.Context) *citusDB {
	t.Helper()
	c, err := citus.Start(ctx, citus.Options{Workers: 2, NoFsync: true,
		// Fewer shards than the default 32: this test distributes over a
		// hundred tables, and the shard count changes no plan shape.
		Settings: map[string]string{"citus.shard_count": "4"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	if err := c.CreateDatabase(ctx, "dp"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.Coordinator.DSN("dp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "SET statement_timeout = '60s'"); err != nil {
		t.Fatal(err)
	}
	db := &citusDB{conn: conn, port: c.Coordinator.Port, sets: map[string]*policy.Dataset{}}
	rng := rand.New(rand.NewPCG(5, 1<<62))
	for k, ds := range totalPolicies(t) {
		sds := inSchema(ds, fmt.Sprintf("p%d", k))
		if err := loadCitusTables(ctx, conn, sds, rng); err != nil {
			t.Fatalf("policy %s: %v", ds.Name, err)
		}
		db.sets[ds.Version] = sds
		db.dss = append(db.dss, ds)
	}
	return db
}

// loadCitusTables creates every table of ds, distributes the protected
// ones by their unit column (tables whose unit columns have one type are
// colocated, Citus's default) and makes the public ones reference tables,
// then inserts the hostile rows (but those with a NULL unit) through the
// coordinator.
func loadCitusTables(ctx context.Context, conn *pgx.Conn, ds *policy.Dataset, rng *rand.Rand) error {
	var names []string
	for name := range ds.Tables {
		names = append(names, name)
	}
	sort.Strings(names)
	var tables []*auditTable
	for _, name := range names {
		a := newTotalTable(ds.Tables[name])
		if a == nil {
			continue
		}
		tables = append(tables, a)
		if _, err := conn.Exec(ctx, a.createSQL()); err != nil {
			return fmt.Errorf("%s: %w", a.createSQL(), err)
		}
		qual := pgemit.QuoteIdent(a.t.Schema) + "." + pgemit.QuoteIdent(a.t.Name)
		var err error
		if a.t.Public {
			_, err = conn.Exec(ctx, "SELECT create_reference_table($1)", qual)
		} else {
			_, err = conn.Exec(ctx, "SELECT create_distributed_table($1, $2)", qual, a.t.UnitColumn)
		}
		if err != nil {
			return fmt.Errorf("distribute %s: %w", qual, err)
		}
	}
	for _, a := range tables {
		rows := a.hostileRows(rng)
		if !a.t.Public {
			// A distributed table holds no NULL in its distribution
			// column (Citus refuses the INSERT).
			kept := rows[:0]
			for _, r := range rows {
				if r[0] != "NULL" {
					kept = append(kept, r)
				}
			}
			rows = kept
		}
		for _, ins := range a.insertSQL(rows) {
			if _, err := conn.Exec(ctx, ins); err != nil {
				return fmt.Errorf("%s: %w", ins, err)
			}
		}
	}
	return nil
}

// citusCase is one analyst query over one policy.
type citusCase struct {
	name  string
	ds    *policy.Dataset // as written
	query string
	opts  Options
}

// citusCases are the goldens, the totality queries, the corpus and
// generated queries of the totality fuzzer's grammar (n of them, from a
// fixed seed).
func citusCases(t *testing.T, dss []*policy.Dataset, n int) []citusCase {
	t.Helper()
	var out []citusCase
	for _, gc := range loadGolden(t) {
		out = append(out, citusCase{name: "golden/" + gc.name, ds: gc.ds, query: gc.query})
	}
	fds, err := policy.Parse(strings.NewReader(totalPolicy), "totalPolicy")
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range totalQueries {
		out = append(out, citusCase{name: fmt.Sprintf("total/%d", i), ds: fds, query: q})
	}
	hospital := loadHospital(t)
	for _, q := range loadCorpus(t) {
		out = append(out, citusCase{name: fmt.Sprintf("corpus/line%d", q.line), ds: hospital, query: q.sql})
	}
	for i := 0; i < n; i++ {
		rng := rand.New(rand.NewPCG(11, uint64(i)))
		ds := dss[rng.IntN(len(dss))]
		q, opts := newQueryGen(rng, ds).query()
		out = append(out, citusCase{name: fmt.Sprintf("generated/%d", i), ds: ds, query: q, opts: opts})
	}
	return out
}

// TestEmittedSQL_Citus runs every plan variant (fuzzVariants: the plan, its
// automatic-bounds profile and smallest candidate, its clipping histogram
// and a replanned clip, each quantile method) of every accepted case on
// Citus. Any error fails the test, with the failures grouped by SQLSTATE
// and message.
func TestEmittedSQL_Citus(t *testing.T) {
	citusEnabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	db := startCitusDB(t, ctx)
	setup := time.Since(start)

	// The check can fail: a per-unit GROUP BY over rows pulled to the
	// coordinator (a LIMIT subquery is planned apart, then read back).
	pulled, err := explainCitus(ctx, db.conn, &Plan{SQL: `SELECT patient_id, count(*) FROM (SELECT patient_id FROM "p0"."visits" LIMIT 100000) AS s GROUP BY patient_id`}, db.dss[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := citus.CheckPushDown(pulled, db.port, unitNames(db.sets[db.dss[0].Version])); err == nil {
		t.Fatalf("CheckPushDown accepted a per-unit GROUP BY on the coordinator:\n%s", pulled)
	}

	type failure struct {
		c       citusCase
		variant string
		sql     string
		err     error
	}
	classes := map[string][]failure{}
	accepted, runs, pushed := 0, 0, 0
	variants := map[string]int{}
	for _, c := range citusCases(t, db.dss, 400) {
		sds := db.sets[c.ds.Version]
		if sds == nil {
			continue
		}
		p, err := RewriteWith(sds, c.query, c.opts)
		if err != nil {
			continue // refused before any data is read (or names another schema)
		}
		if tb, ok := sds.Tables[p.Table]; !ok || tb.Public {
			continue
		}
		accepted++
		rng := rand.New(rand.NewPCG(7, uint64(accepted)))
		for _, v := range fuzzVariants(p, sds, c.query, c.opts, rng) {
			runs++
			variants[v.name]++
			err := v.run(ctx, db.conn)
			if err == nil {
				// The per-unit stage must run in the shards.
				var plan string
				if plan, err = explainCitus(ctx, db.conn, v.plan, sds); err == nil {
					pushed++
					_, err = citus.CheckPushDown(plan, db.port, unitNames(sds))
					if err != nil {
						err = fmt.Errorf("%w\n%s", err, plan)
					}
				}
				if err != nil {
					err = fmt.Errorf("push-down: %w", err)
				}
			}
			if err != nil {
				class := err.Error()
				if i := strings.IndexByte(class, '\n'); i > 0 {
					class = class[:i]
				}
				var pe *pgconn.PgError
				if errors.As(err, &pe) {
					class = pe.Code + " " + pe.Message
				}
				classes[class] = append(classes[class], failure{c, v.name, v.plan.SQL, err})
			}
		}
	}
	var keys []string
	for k := range classes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fs := classes[k]
		byVariant := map[string]int{}
		for _, f := range fs {
			byVariant[f.variant]++
		}
		f := fs[0]
		if dir := os.Getenv("DPPROXY_CITUS_FAILURES"); dir != "" {
			for i, f := range fs {
				os.WriteFile(fmt.Sprintf("%s/%s-%d.txt", dir, strings.NewReplacer("/", "_", " ", "_", ":", "").Replace(k[:min(len(k), 40)]), i),
					[]byte(f.c.query+"\n\n"+f.sql+"\n\n"+f.err.Error()), 0o644)
			}
		}
		t.Errorf("on Citus, %d runs failed with %s (by variant: %v); first: %s [%s]\n  query: %s\n  SQL: %s\n  error: %v",
			len(fs), k, byVariant, f.c.name, f.variant, f.c.query, f.sql, f.err)
	}
	if accepted < 300 {
		t.Errorf("only %d accepted cases ran on Citus, want ≥ 300", accepted)
	}
	t.Logf("Citus: %d accepted cases, %d runs (%v), %d EXPLAINed with the per-unit stage checked, %d failure classes; setup %v, runs %v",
		accepted, runs, variants, pushed, len(keys), setup.Round(time.Millisecond), time.Since(start.Add(setup)).Round(time.Millisecond))
}
