package rewrite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/jackc/pgx/v5"
)

// Attack round 113: PostgreSQL sorts with a quicksort without a fallback
// (src/include/lib/sort_template.h: Bentley–McIlroy three-way
// partitioning, a pivot from the median of three, or of three medians of
// three above 40 elements, and a check for sorted input at each level).
// McIlroy's "killer adversary" (Software—Practice and Experience 29(4),
// 1999) runs a copy of it with a comparison that decides the values
// lazily, and returns values whose order in the input makes it compare
// about n²/13 times (198 million for 50,000, against 830,000 for an
// ordinary order). The rows that a sort by (unit, value…) meets together
// are one person's, in the order they were stored: PostgreSQL reads them
// through an index on the unit in that order, and an incremental sort
// (presorted on the unit) sorts them alone. Since round 108 a private
// key's per-unit GROUP BY is such a sort (hash aggregation is off), and a
// quantile's ranks always were (ROW_NUMBER() OVER (PARTITION BY unit
// ORDER BY value)).
//
// The tests store one patient's visits with such values, within the
// demo's max_rows (250,000 declared, 200,000 present), and time the
// emitted SQL against the same values stored in a random order, the data
// server planning without parallel workers (a parallel scan splits the
// patient's rows between processes, which spoils the adversary's order
// only some of the time).

// TestAttack113_SortAdversaryGroupKeysTime: one patient's 50,000 visits
// with age 40 and the adversary's length_of_stay made `SELECT age,
// length_of_stay, COUNT(*) … GROUP BY age, length_of_stay` (a 2 s slot)
// run 2.2–4.5 s upstream against 0.25–0.37 s with the same values in a
// random order, and answer through the demo proxy at 8, 8, 16 and 8 s
// against 2 s (2 s with the random order, five times of five). The
// per-unit GROUP BY now sorts by a hash of the keys with a seed of the
// query's own after the unit (pgemit groupSaltSQL). The test fails when
// the fastest adversarial run is more than 500 ms slower than the fastest
// ordinary one.
func TestAttack113_SortAdversaryGroupKeysTime(t *testing.T) {
	const n = 50000
	dsn, conn, ctx, ds := demoHospital(t)
	p, err := RewriteWith(ds, "SELECT age, length_of_stay, COUNT(*) FROM visits GROUP BY age, length_of_stay", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.SQL, "GROUP BY dp_unit, ") {
		t.Fatalf("the per-unit stage no longer groups by the unit first:\n%s", p.SQL)
	}
	short, long := sortAdversaryTimes(t, ctx, dsn, conn, n, func(adv bool) string {
		return "INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay) " +
			"SELECT 90113000 + i, 90113, '2023-01-01', 'oncology', 'x', 40, 100, v FROM attack113 ORDER BY " + sortAdversaryOrder(adv)
	}, func() { sortAdversaryRun(t, ctx, dsn, upstream.ForPlan(ctx, p), p.SQL) })
	t.Logf("fastest run with the patient's %d visits' stays in a random order: %v, in the adversary's: %v", n, short, long)
	if long-short > 500*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's %d visits were stored in the order of McIlroy's adversary against PostgreSQL's quicksort (%v against %v): the per-unit GROUP BY sorts their keys in the order the patient chose", long-short, n, long, short)
	}
}

// TestAttack113_SortAdversaryQuantileTime: one patient's 46,000 visits
// whose costs are the adversary's made `SELECT percentile_cont(0.5)
// WITHIN GROUP (ORDER BY cost) FROM visits` (a 2 s slot) run 1.4–2.5 s
// upstream against 0.55–0.8 s, the ranks' window sorting the patient's
// costs in the order they were stored (through the proxy it answered at
// 2 s both ways on a quiet machine: the quantile's slot counts each row
// thrice; the sort's work grows as the square of the rows a person
// stores, the slot as their number). The ranks' rows are now read in a
// random order per unit (pgemit shuffledSQL). 45,000 visits, so that
// the sort stays in memory (past work_mem it sorts runs apart, which
// the adversary would have to know the length of); the test fails when
// the fastest adversarial run is more than 300 ms slower than the fastest
// ordinary one.
func TestAttack113_SortAdversaryQuantileTime(t *testing.T) {
	const n = 45000
	dsn, conn, ctx, ds := demoHospital(t)
	p, err := RewriteWith(ds, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FROM visits", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.SQL, "ROW_NUMBER() OVER (PARTITION BY ") {
		t.Fatalf("the quantile no longer ranks the values with ROW_NUMBER():\n%s", p.SQL)
	}
	short, long := sortAdversaryTimes(t, ctx, dsn, conn, n, func(adv bool) string {
		return "INSERT INTO visits (visit_id, patient_id, visit_date, department, diagnosis, age, cost, length_of_stay) " +
			"SELECT 90113000 + i, 90113, '2023-01-01', 'oncology', 'x', 40, v / 100.0, 3 FROM attack113 ORDER BY " + sortAdversaryOrder(adv)
	}, func() { sortAdversaryRun(t, ctx, dsn, upstream.ForPlan(ctx, p), p.SQL) })
	t.Logf("fastest run with the patient's %d visits' costs in a random order: %v, in the adversary's: %v", n, short, long)
	if long-short > 300*time.Millisecond {
		t.Errorf("the emitted SQL took %v longer when one patient's %d visits were stored in the order of McIlroy's adversary against PostgreSQL's quicksort (%v against %v): the quantile's ranks sort their values in the order the patient chose", long-short, n, long, short)
	}
}

func sortAdversaryOrder(adv bool) string {
	if adv {
		return "i"
	}
	return "random()"
}

// sortAdversaryTimes stores the adversary's n values in table attack113
// (i, v), then three times each alternately stores one patient's rows
// with them in the adversary's order and in a random one (insert(adv)),
// and returns the fastest run's time of each.
func sortAdversaryTimes(t *testing.T, ctx context.Context, dsn string, conn *pgx.Conn, n int, insert func(adv bool) string, run func()) (short, long time.Duration) {
	t.Helper()
	exec := execer(t, ctx, conn)
	// Plans without parallel workers, for every later connection.
	exec("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET max_parallel_workers_per_gather = 0', current_database()); END $$")
	exec("ALTER TABLE visits DROP CONSTRAINT IF EXISTS visits_patient_id_fkey")
	vals := antiQsortValues(n)
	v32 := make([]int32, n)
	for i, v := range vals {
		v32[i] = int32(v)
	}
	exec("CREATE TABLE attack113 AS SELECT ordinality AS i, v FROM unnest($1::int4[]) WITH ORDINALITY AS u(v)", v32)
	load := func(adv bool) {
		exec("DELETE FROM visits WHERE patient_id = 90113")
		exec("VACUUM visits") // the new rows go where the old ones were, in insertion order
		exec(insert(adv))
		exec("ANALYZE visits")
	}
	timed := func() time.Duration {
		start := time.Now()
		run()
		return time.Since(start)
	}
	load(false)
	run()
	short, long = time.Hour, time.Hour
	for range 3 {
		load(true)
		long = min(long, timed())
		load(false)
		short = min(short, timed())
	}
	return short, long
}

// sortAdversaryRun runs sql through an upstream.Pool on dsn, as the proxy
// does (ctx: upstream.ForPlan).
func sortAdversaryRun(t *testing.T, ctx context.Context, dsn string, planCtx context.Context, sql string) {
	t.Helper()
	pool, err := upstream.New(ctx, upstream.Config{DSN: dsn, StatementTimeout: 120 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Query(planCtx, sql); err != nil {
		t.Fatal(err)
	}
}

// antiQsortValues returns n distinct values 0…n-1, by position, that make
// pgQsort (PostgreSQL's quicksort) compare about n²/13 times when they
// are sorted in that order: McIlroy's adversary, whose values are "gas"
// until a comparison needs them and then frozen in increasing order, the
// gas element most recently compared with a frozen one being the pivot
// candidate; in the check for sorted input it freezes the later element
// first, which ends the check at once. The first 100 positions are frozen
// in increasing order beforehand: an incremental sort sorts a unit's
// first rows apart before it sorts the rest with them, which keeps them
// in order.
func antiQsortValues(n int) []int {
	const gas = 1 << 62
	val := make([]int, n)
	solid := 0
	for i := range val {
		val[i] = gas
		if i < 100 {
			val[i] = solid
			solid++
		}
	}
	candidate, presorting := -1, false
	cmp := func(x, y int) int {
		if val[x] == gas && val[y] == gas {
			switch {
			case presorting || x != candidate:
				val[y] = solid
			default:
				val[x] = solid
			}
			solid++
		}
		if val[x] == gas {
			candidate = x
		} else if val[y] == gas {
			candidate = y
		}
		switch {
		case val[x] < val[y]:
			return -1
		case val[x] > val[y]:
			return 1
		}
		return 0
	}
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	pgQsort(a, cmp, &presorting)
	for i := range val {
		if val[i] == gas {
			val[i] = solid
			solid++
		}
	}
	return val
}

// pgQsort is PostgreSQL's sort_template.h (14 and later) over a slice,
// with *presorting true during its check for sorted input.
func pgQsort(a []int, cmp func(x, y int) int, presorting *bool) {
	med3 := func(i, j, k int) int {
		if cmp(a[i], a[j]) < 0 {
			if cmp(a[j], a[k]) < 0 {
				return j
			}
			if cmp(a[i], a[k]) < 0 {
				return k
			}
			return i
		}
		if cmp(a[j], a[k]) > 0 {
			return j
		}
		if cmp(a[i], a[k]) < 0 {
			return i
		}
		return k
	}
	swapn := func(i, j, n int) {
		for x := range n {
			a[i+x], a[j+x] = a[j+x], a[i+x]
		}
	}
	var sort func(lo, n int)
	sort = func(lo, n int) {
		for {
			if n < 7 {
				for pm := lo + 1; pm < lo+n; pm++ {
					for pl := pm; pl > lo && cmp(a[pl-1], a[pl]) > 0; pl-- {
						a[pl], a[pl-1] = a[pl-1], a[pl]
					}
				}
				return
			}
			sorted := true
			*presorting = true
			for pm := lo + 1; pm < lo+n; pm++ {
				if cmp(a[pm-1], a[pm]) > 0 {
					sorted = false
					break
				}
			}
			*presorting = false
			if sorted {
				return
			}
			pm := lo + n/2
			pl, pn := lo, lo+n-1
			if n > 40 {
				d := n / 8
				pl = med3(pl, pl+d, pl+2*d)
				pm = med3(pm-d, pm, pm+d)
				pn = med3(pn-2*d, pn-d, pn)
			}
			pm = med3(pl, pm, pn)
			a[lo], a[pm] = a[pm], a[lo]
			pa, pb := lo+1, lo+1
			pc, pd := lo+n-1, lo+n-1
			for {
				for pb <= pc {
					r := cmp(a[pb], a[lo])
					if r > 0 {
						break
					}
					if r == 0 {
						a[pa], a[pb] = a[pb], a[pa]
						pa++
					}
					pb++
				}
				for pb <= pc {
					r := cmp(a[pc], a[lo])
					if r < 0 {
						break
					}
					if r == 0 {
						a[pc], a[pd] = a[pd], a[pc]
						pd--
					}
					pc--
				}
				if pb > pc {
					break
				}
				a[pb], a[pc] = a[pc], a[pb]
				pb++
				pc--
			}
			end := lo + n
			d1 := min(pa-lo, pb-pa)
			swapn(lo, pb-d1, d1)
			d1 = min(pd-pc, end-pd-1)
			swapn(pb, end-d1, d1)
			d1, d2 := pb-pa, pd-pc
			if d1 <= d2 {
				if d1 > 1 {
					sort(lo, d1)
				}
				if d2 <= 1 {
					return
				}
				lo, n = end-d2, d2
			} else {
				if d2 > 1 {
					sort(end-d2, d2)
				}
				if d1 <= 1 {
					return
				}
				n = d1
			}
		}
	}
	sort(0, len(a))
}

// TestAntiQsortValues checks the adversary against the copy of
// PostgreSQL's quicksort: its values sort to 0…n-1 and cost far more
// comparisons than a random order's.
func TestAntiQsortValues(t *testing.T) {
	const n = 5000
	vals := antiQsortValues(n)
	count := func(order []int) int {
		c := 0
		a := make([]int, n)
		for i := range a {
			a[i] = i
		}
		var presorting bool
		pgQsort(a, func(x, y int) int {
			c++
			return order[x] - order[y]
		}, &presorting)
		for i := range a {
			if order[a[i]] != i {
				t.Fatalf("position %d holds %d after the sort", i, order[a[i]])
			}
		}
		return c
	}
	adv := count(vals)
	shuffled := make([]int, n)
	for i := range shuffled {
		shuffled[i] = (i * 7919) % n // a permutation: 7919 is prime to 5000
	}
	ordinary := count(shuffled)
	t.Logf("%d values: %d comparisons in the adversary's order, %d in another", n, adv, ordinary)
	if adv < n*n/20 || adv < 20*ordinary {
		t.Errorf("the adversary's order costs %d comparisons, %d another: not the quadratic case", adv, ordinary)
	}
}
