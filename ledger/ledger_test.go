package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testPolicy returns a dataset policy with the given per-analyst budget.
func testPolicy(name string, eps, delta float64, method string) *policy.Dataset {
	return &policy.Dataset{
		Name:     name,
		Budget:   policy.Budget{Epsilon: eps, Delta: delta, Accountant: method},
		Analysts: map[string]policy.Budget{},
		Version:  "v1",
	}
}

func laplace(eps float64) accountant.Event {
	return accountant.Event{Mechanism: policy.MechanismLaplace, Epsilon: eps, NoiseMultiplier: 1 / eps}
}

func gaussian(multiplier, eps, delta float64) accountant.Event {
	return accountant.Event{Mechanism: policy.MechanismGaussian, Epsilon: eps, Delta: delta, NoiseMultiplier: multiplier}
}

func charge(analyst string, ds *policy.Dataset, events ...accountant.Event) accountant.Charge {
	return accountant.Charge{Analyst: analyst, Dataset: ds.Name, Events: events, Fingerprint: "fp-" + analyst, PolicyVersion: ds.Version, Policy: ds}
}

func openLedger(t *testing.T, dsn string) *Ledger {
	t.Helper()
	ctx := context.Background()
	l, err := Open(ctx, dsn, zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func queryOne[T any](t *testing.T, dsn, sql string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var v T
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func wantCode(t *testing.T, err error, code string) *pgerr.Error {
	t.Helper()
	pe, ok := pgerr.As(err)
	if !ok {
		t.Fatalf("error %v is not a *pgerr.Error", err)
	}
	if pe.Code != code {
		t.Fatalf("error code = %s (%v), want %s", pe.Code, pe, code)
	}
	return pe
}

func TestLedger_ReserveReleaseStatus(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	core, logs := observer.New(zapcore.InfoLevel)
	ctx := context.Background()
	l, err := Open(ctx, dsn, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ds := testPolicy("hospital", 3, 1e-6, policy.AccountantPure)

	st, err := l.Status(ctx, "alice", ds)
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent != (accountant.Spent{}) || st.Limit != (accountant.Spent{Epsilon: 3, Delta: 1e-6}) || st.Accountant != "pure" || st.Dataset != "hospital" {
		t.Fatalf("Status before any charge = %+v", st)
	}
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.budget`); n != 0 {
		t.Fatalf("Status created %d budget rows, want none", n)
	}

	res, err := l.Reserve(ctx, charge("alice", ds, laplace(0.25), accountant.Event{Epsilon: 0.05, Delta: 1e-7}))
	if err != nil {
		t.Fatal(err)
	}
	if res.ID <= 0 || res.Cost != (accountant.Spent{Epsilon: 0.3, Delta: 1e-7}) {
		t.Fatalf("Reserve = %+v, want cost (0.3, 1e-7)", res)
	}
	if got, want := res.Status.Remaining(), (accountant.Spent{Epsilon: 2.7, Delta: 9e-7}); got != want {
		t.Fatalf("Remaining after charge = %+v, want %+v", got, want)
	}
	// Durable and visible to anyone before Reserve returned.
	if s := queryOne[string](t, dsn, `SELECT status FROM dpproxy_ledger.charge WHERE id = $1`, res.ID); s != "reserved" {
		t.Fatalf("ledger row status = %q, want reserved", s)
	}
	if s := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE dataset='hospital' AND analyst='alice'`); s != "0.3" {
		t.Fatalf("budget.spent_epsilon = %s, want 0.3", s)
	}

	answer := []byte(`{"columns":["count"],"rows":[[41]]}`)
	if err := l.Release(ctx, res, answer); err != nil {
		t.Fatal(err)
	}
	if s := queryOne[string](t, dsn, `SELECT status || ' ' || (answer->'rows'->0->>0) || ' ' || (released_at IS NOT NULL) FROM dpproxy_ledger.charge WHERE id = $1`, res.ID); s != "released 41 true" {
		t.Fatalf("ledger row after Release = %q", s)
	}
	wantCode(t, l.Release(ctx, res, answer), pgerr.InternalError) // twice
	wantCode(t, l.Release(ctx, &accountant.Reservation{ID: res.ID + 1000, Analyst: res.Analyst}, answer), pgerr.InternalError)
	wantCode(t, l.Release(ctx, res, []byte("not json")), pgerr.InternalError)

	got, ok, err := l.Cached(ctx, "hospital", "fp-alice", "v1")
	if err != nil || !ok || !jsonEqual(t, got, answer) {
		t.Fatalf("Cached = %s, %v, %v; want the released answer", got, ok, err)
	}
	if _, ok, err := l.Cached(ctx, "hospital", "fp-alice", "v2"); ok || err != nil {
		t.Fatalf("Cached under another policy version = %v, %v; want miss", ok, err)
	}

	st, err = l.Status(ctx, "alice", ds)
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent != (accountant.Spent{Epsilon: 0.3, Delta: 1e-7}) {
		t.Fatalf("Status.Spent = %+v, want (0.3, 1e-7)", st.Spent)
	}
	// Bob has his own budget.
	if st, _ := l.Status(ctx, "bob", ds); st.Spent != (accountant.Spent{}) {
		t.Fatalf("bob's accountant.Status = %+v, want nothing spent", st)
	}

	// Budget events are logged at Info with the figures, never the answer.
	var charged int
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if strings.Contains(fmt.Sprint(f.Interface, f.String), "41") || f.Key == "answer" {
				t.Errorf("log %q has field %s = %v%v: answers must not be logged", e.Message, f.Key, f.String, f.Interface)
			}
		}
		if e.Message == "privacy budget charged" {
			charged++
			m := e.ContextMap()
			if m["analyst"] != "alice" || m["dataset"] != "hospital" || m["epsilon"] != 0.3 || m["remaining_epsilon"] != 2.7 || m["fingerprint"] != "fp-alice" {
				t.Errorf("charge log fields = %v", m)
			}
		}
	}
	if charged != 1 {
		t.Errorf("%d 'privacy budget charged' logs, want 1", charged)
	}
}

func TestLedger_Exhausted(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 1, 0, policy.AccountantPure)
	for i := 0; i < 2; i++ {
		if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.4))); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	_, err := l.Reserve(ctx, charge("alice", ds, laplace(0.4)))
	pe := wantCode(t, err, pgerr.ConfigurationLimit)
	if !errors.Is(err, accountant.ErrBudgetExhausted) {
		t.Fatalf("refusal %v does not wrap accountant.ErrBudgetExhausted", err)
	}
	if !strings.Contains(pe.Message, "needs ε=0.4") || !strings.Contains(pe.Message, "remaining budget is ε=0.2, δ=0") {
		t.Fatalf("refusal message %q does not say what the query needs and what remains (ε=0.2)", pe.Message)
	}
	if !strings.Contains(pe.Hint, "dp.epsilon") || !strings.Contains(pe.Hint, "ε remaining: 0.2") || !strings.Contains(pe.Hint, "data steward") {
		t.Fatalf("refusal hint %q: want how to lower the cost, what remains and whom to ask", pe.Hint)
	}
	// The refusal charged nothing: 0.2 still fits exactly.
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.charge`); n != 2 {
		t.Fatalf("%d ledger rows after a refusal, want 2", n)
	}
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.2))); err != nil {
		t.Fatalf("the exact remainder 0.2 was refused: %v", err)
	}
	st, _ := l.Status(ctx, "alice", ds)
	if st.Remaining() != (accountant.Spent{}) || st.Spent.Epsilon != 1 {
		t.Fatalf("Status = %+v, want all spent", st)
	}
	// With nothing left, a smaller dp.epsilon cannot help: the hint says so.
	_, err = l.Reserve(ctx, charge("alice", ds, laplace(0.01)))
	if pe := wantCode(t, err, pgerr.ConfigurationLimit); strings.Contains(pe.Hint, "dp.epsilon") || !strings.Contains(pe.Hint, "nothing is left") {
		t.Errorf("refusal with nothing left: hint %q", pe.Hint)
	}

	// A Gaussian release with δ > 0 does not fit a δ = 0 budget.
	ds2 := testPolicy("clinic", 5, 0, policy.AccountantPure)
	_, err = l.Reserve(ctx, charge("alice", ds2, accountant.Event{Mechanism: policy.MechanismGaussian, Epsilon: 0.1, Delta: 1e-9, NoiseMultiplier: 40}))
	wantCode(t, err, pgerr.ConfigurationLimit)

	// The steward raises the budget by editing the policy: the new limit
	// applies on the next charge and is stored on the row.
	raised := testPolicy("hospital", 1.5, 0, policy.AccountantPure)
	if _, err := l.Reserve(ctx, charge("alice", raised, laplace(0.5))); err != nil {
		t.Fatalf("after raising the budget: %v", err)
	}
	if v := queryOne[float64](t, dsn, `SELECT limit_epsilon FROM dpproxy_ledger.budget WHERE analyst='alice' AND dataset='hospital'`); v != 1.5 {
		t.Fatalf("stored limit = %v, want 1.5", v)
	}
	// A per-analyst override from the policy's analysts section.
	raised.Analysts["bob"] = policy.Budget{Epsilon: 0.3}
	if _, err := l.Reserve(ctx, charge("bob", raised, laplace(0.4))); err == nil {
		t.Fatal("bob's override of 0.3 let a 0.4 charge through")
	}
}

// TestLedger_ThirtyTenths: 0.1 added 30 times in float64 is
// 3.0000000000000004 > 3; the ledger sums exact decimals.
func TestLedger_ThirtyTenths(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 3, 1e-6, policy.AccountantPure)
	var f float64
	for i := 0; i < 30; i++ {
		f += 0.1
		if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.1))); err != nil {
			t.Fatalf("charge %d of ε=0.1 on a budget of 3 refused: %v", i+1, err)
		}
	}
	if f <= 3 {
		t.Fatalf("float64 sum %v; the test no longer exercises rounding", f)
	}
	_, err := l.Reserve(ctx, charge("alice", ds, laplace(0.1)))
	pe := wantCode(t, err, pgerr.ConfigurationLimit)
	if !strings.Contains(pe.Message, "remaining budget is ε=0,") {
		t.Fatalf("31st refusal message %q, want ε=0 remaining", pe.Message)
	}
	if s := queryOne[string](t, dsn, `SELECT sum(cost_epsilon)::text FROM dpproxy_ledger.charge`); s != "3.0" && s != "3" {
		t.Fatalf("sum of charges = %s, want 3", s)
	}
}

// TestLedger_ConcurrentNoOverspend: 32 goroutines over two Ledger instances
// (two proxy processes) charge one analyst until refused.
func TestLedger_ConcurrentNoOverspend(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ledgers := []*Ledger{openLedger(t, dsn), openLedger(t, dsn)}
	ctx := context.Background()
	const eps = 0.07 // 3/0.07 is not an integer: 42 charges fit (2.94)
	ds := testPolicy("hospital", 3, 1e-6, policy.AccountantPure)
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
		mu       sync.Mutex
		ids      []int64
		errs     []error
	)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(l *Ledger) {
			defer wg.Done()
			for {
				res, err := l.Reserve(ctx, charge("alice", ds, laplace(eps)))
				if err != nil {
					if !errors.Is(err, accountant.ErrBudgetExhausted) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					return
				}
				accepted.Add(1)
				mu.Lock()
				ids = append(ids, res.ID)
				mu.Unlock()
			}
		}(ledgers[g%2])
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	if got := accepted.Load(); got != 42 {
		t.Fatalf("%d charges of 0.07 accepted on a budget of 3, want 42", got)
	}
	total := queryOne[float64](t, dsn, `SELECT sum(cost_epsilon)::float8 FROM dpproxy_ledger.charge WHERE analyst = 'alice'`)
	if total > 3 {
		t.Fatalf("total charged %v > budget 3", total)
	}
	n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.charge WHERE id = ANY($1) AND status = 'reserved'`, ids)
	if n != int64(len(ids)) {
		t.Fatalf("%d of %d accepted reservations have a committed row", n, len(ids))
	}
	if s := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE analyst='alice'`); s != "2.94" {
		t.Fatalf("budget spent = %s, want 2.94", s)
	}
}

func TestLedger_GlobalCap(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	ds := testPolicy("hospital", 1, 1e-6, policy.AccountantPure)
	ds.Budget.GlobalEpsilon = 1.5
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.9))); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, charge("bob", ds, laplace(0.6))); err != nil {
		t.Fatal(err)
	}
	// Bob has 0.4 left of his own budget but the dataset has none.
	_, err := l.Reserve(ctx, charge("bob", ds, laplace(0.1)))
	pe := wantCode(t, err, pgerr.ConfigurationLimit)
	if !strings.Contains(pe.Message, "global") || !strings.Contains(pe.Message, "ε=0,") || !strings.Contains(pe.Hint, "global_epsilon") {
		t.Fatalf("global refusal = %q (hint %q)", pe.Message, pe.Hint)
	}
	if !errors.Is(err, accountant.ErrBudgetExhausted) {
		t.Fatal("global refusal does not wrap accountant.ErrBudgetExhausted")
	}
	st, _ := l.Status(ctx, "bob", ds)
	if st.Remaining().Epsilon != 0.4 {
		t.Fatalf("bob's own remaining = %v, want 0.4 (the global refusal charged nothing)", st.Remaining().Epsilon)
	}
	// The global row tracks everyone even without a cap: adding one later
	// counts the past.
	if s := queryOne[string](t, dsn, `SELECT spent_epsilon::text FROM dpproxy_ledger.budget WHERE analyst=''`); s != "1.5" {
		t.Fatalf("global spent = %s, want 1.5", s)
	}
	// A global δ cap alone.
	ds2 := testPolicy("clinic", 5, 1e-5, policy.AccountantPure)
	ds2.Budget.GlobalDelta = 1.5e-6
	g := accountant.Event{Mechanism: policy.MechanismGaussian, Epsilon: 0.5, Delta: 1e-6, NoiseMultiplier: 5}
	if _, err := l.Reserve(ctx, charge("alice", ds2, g)); err != nil {
		t.Fatal(err)
	}
	_, err = l.Reserve(ctx, charge("bob", ds2, g))
	wantCode(t, err, pgerr.ConfigurationLimit)
}

// forwarder is a TCP relay in front of the test database; stopping it makes
// the ledger unreachable without touching the shared cluster.
type forwarder struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func (f *forwarder) start(t *testing.T) {
	t.Helper()
	addr := f.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	f.mu.Lock()
	f.ln, f.addr = ln, ln.Addr().String()
	f.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, u)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
}

func (f *forwarder) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
	}
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func TestLedger_UnavailableFailsClosedAndRecovers(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{target: fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)}
	f.start(t)
	defer f.stop()
	host, port, _ := net.SplitHostPort(f.addr)
	relayed := fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable&connect_timeout=2", cfg.User, host, port, cfg.Database)
	l := openLedger(t, relayed)
	ctx := context.Background()
	ds := testPolicy("hospital", 3, 1e-6, policy.AccountantPure)
	if _, err := l.Reserve(ctx, charge("alice", ds, laplace(0.5))); err != nil {
		t.Fatal(err)
	}

	f.stop() // the ledger database goes away
	_, err = l.Reserve(ctx, charge("alice", ds, laplace(0.5)))
	pe := wantCode(t, err, pgerr.SystemError)
	if pe.Message != "privacy ledger unavailable; DP queries are refused until it is back" {
		t.Fatalf("message = %q", pe.Message)
	}
	if !errors.Is(err, accountant.ErrLedgerUnavailable) {
		t.Fatalf("%v does not wrap accountant.ErrLedgerUnavailable", err)
	}
	for _, s := range []string{pe.Message, pe.Detail, pe.Hint, err.Error()} {
		if strings.Contains(s, port) || strings.Contains(s, cfg.User) || strings.Contains(s, "127.0.0.1") {
			t.Fatalf("error text %q reveals connection details", s)
		}
	}
	_, err = l.Status(ctx, "alice", ds)
	wantCode(t, err, pgerr.SystemError)
	wantCode(t, l.Release(ctx, &accountant.Reservation{ID: 1, Analyst: "alice"}, []byte(`{}`)), pgerr.SystemError)

	f.start(t) // back on the same address
	var res *accountant.Reservation
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err = l.Reserve(ctx, charge("alice", ds, laplace(0.5)))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Reserve after the ledger came back: %v", err)
	}
	// Exactly two charges committed: the one refused while down left nothing.
	if res.Status.Spent.Epsilon != 1 {
		t.Fatalf("spent after recovery = %v, want 1", res.Status.Spent.Epsilon)
	}
}

func TestOpen_ConcurrentMigrationIsIdempotent(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, err := Open(ctx, dsn, nil)
			if err == nil {
				l.Close()
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
	}
	l := openLedger(t, dsn) // and once more, sequentially
	if n := queryOne[int64](t, dsn, `SELECT count(*) FROM dpproxy_ledger.schema_version`); n != int64(SchemaVersion()) {
		t.Fatalf("%d schema_version rows, want %d", n, SchemaVersion())
	}
	if _, err := l.Reserve(ctx, charge("alice", testPolicy("hospital", 1, 0, ""), laplace(0.5))); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_BadDSNHidesIt(t *testing.T) {
	_, err := Open(context.Background(), "postgres://u:s3cret@[::1", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open(bad DSN) = %v; want an error without the password", err)
	}
	_, err = Open(context.Background(), "postgres://u:s3cret@127.0.0.1:1/x?connect_timeout=1", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open(closed port) = %v; want an error without the password", err)
	}
}

func TestLedger_RejectsBadCharges(t *testing.T) {
	l := openLedger(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	ds := testPolicy("hospital", 1, 0, policy.AccountantPure)
	for _, tc := range []struct {
		name string
		c    accountant.Charge
	}{
		{"no policy", accountant.Charge{Analyst: "a", Dataset: "hospital", Events: []accountant.Event{laplace(0.1)}}},
		{"no analyst", charge("", ds, laplace(0.1))},
		{"no events", charge("a", ds)},
		{"NaN epsilon", charge("a", ds, accountant.Event{Epsilon: math.NaN()})},
		{"negative epsilon", charge("a", ds, accountant.Event{Epsilon: -1})},
		{"delta 1", charge("a", ds, accountant.Event{Epsilon: 0.1, Delta: 1})},
		{"empty event", charge("a", ds, accountant.Event{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Reserve(ctx, tc.c)
			wantCode(t, err, pgerr.InternalError)
		})
	}
	// Another mechanism name is a generic (ε, δ) release, charged by its ε.
	res, err := l.Reserve(ctx, charge("a", ds, accountant.Event{Mechanism: "threshold", Epsilon: 0.1, Delta: 0}))
	if err != nil || res.Cost.Epsilon != 0.1 {
		t.Fatalf("Reserve(generic mechanism) = %+v, %v; want cost 0.1", res, err)
	}
}

// TestLedger_TightAccountants: the policy's budget.accountant selects the
// method; Reserve accepts exactly the charges whose composed ε (as
// ComposeEpsilon computes it) fits, e.g. 100 Laplace releases of ε = 0.1
// cost 5.07 under rdp (randomized response's curve), so about 98 fit in ε = 5 where pure
// composition stops at 50.
func TestLedger_TightAccountants(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l := openLedger(t, dsn)
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		event  accountant.Event
		budget float64
	}{
		{policy.AccountantRDP, laplace(0.1), 5},
		{policy.AccountantZCDP, laplace(0.1), 5},
		{policy.AccountantAdvanced, laplace(0.1), 5},
		{policy.AccountantPLD, gaussian(10, 0.5, 1e-8), 1},
		{policy.AccountantPLD, laplace(0.2), 4},
	} {
		t.Run(tc.method, func(t *testing.T) {
			ds := testPolicy("ds_"+tc.method+fmt.Sprint(tc.budget), tc.budget, 1e-6, tc.method)
			var events []accountant.Event
			want := 0 // charges that fit by the pure function
			for {
				e, err := accountant.ComposeEpsilon(tc.method, append(events, tc.event), 1e-6)
				if err != nil {
					t.Fatal(err)
				}
				if e > tc.budget {
					break
				}
				events = append(events, tc.event)
				want++
			}
			pureFit := int(tc.budget / tc.event.Epsilon)
			if want <= pureFit {
				t.Fatalf("%s fits %d charges, no more than pure (%d): the test shows nothing", tc.method, want, pureFit)
			}
			got := 0
			for {
				_, err := l.Reserve(ctx, charge("alice", ds, tc.event))
				if err != nil {
					wantCode(t, err, pgerr.ConfigurationLimit)
					break
				}
				got++
			}
			if got != want {
				t.Fatalf("%s: %d charges accepted, want %d", tc.method, got, want)
			}
			st, err := l.Status(ctx, "alice", ds)
			if err != nil {
				t.Fatal(err)
			}
			wantSpent, _ := accountant.ComposeEpsilon(tc.method, events, 1e-6)
			if st.Accountant != tc.method || st.Spent.Epsilon != wantSpent || st.Spent.Epsilon > tc.budget {
				t.Fatalf("Status = %+v, want %s spent %v", st, tc.method, wantSpent)
			}
		})
	}
}
