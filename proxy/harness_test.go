package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// hospitalPolicy loads the example policy of the demo.
func hospitalPolicy(t testing.TB) *policy.Dataset {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	ds, err := policy.Load(filepath.Join(filepath.Dir(file), "..", "internal", "testdata", "hospital.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// fakeReleaser answers DP requests with fixed numbers built from the plan
// (no noise, no upstream), and records the requests.
type fakeReleaser struct {
	mu   sync.Mutex
	reqs []release.Request
	// err, when set, is returned instead of a result.
	err error
	// wait makes Run block until its context ends.
	wait bool
	// started is signalled when Run begins (if non-nil).
	started chan struct{}
	panics  bool
	// gate, when set, makes Run block until it is closed; Run then records
	// whether its context had ended (ctxEnded).
	gate     chan struct{}
	ctxEnded []bool
	// sorted records, for each Run, whether its context asked the data
	// server for sorted aggregation (upstream.SortedAggregation).
	sorted []bool
}

func (f *fakeReleaser) Run(ctx context.Context, req release.Request) (*release.Result, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.sorted = append(f.sorted, upstream.SortedAggregation(ctx))
	err, wait, started, panics, gate := f.err, f.wait, f.started, f.panics, f.gate
	f.mu.Unlock()
	if gate != nil {
		if started != nil {
			started <- struct{}{}
		}
		<-gate
		f.mu.Lock()
		f.ctxEnded = append(f.ctxEnded, ctx.Err() != nil)
		f.mu.Unlock()
		return fakeResult(req.Plan), nil
	}
	if started != nil {
		started <- struct{}{}
	}
	if panics {
		panic("fake releaser panic")
	}
	if wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return fakeResult(req.Plan), nil
}

func (f *fakeReleaser) requests() []release.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]release.Request(nil), f.reqs...)
}

// fakeResult returns one row per value of the plan's first key (or one row),
// with 42 for counts and 12.5 for sums and averages.
func fakeResult(p *rewrite.Plan) *release.Result {
	res := &release.Result{Notice: "dp: epsilon spent (fake)"}
	for _, o := range p.Outputs {
		res.Columns = append(res.Columns, release.Column{Name: o.Name, PGType: o.PGType})
	}
	nrows := 1
	if len(p.Keys) > 0 {
		nrows = len(p.Keys[0].Domain)
	}
	for r := 0; r < nrows; r++ {
		row := make([]*string, len(p.Outputs))
		for i, o := range p.Outputs {
			var v string
			switch o.Kind {
			case rewrite.OutputKey:
				v = p.Keys[o.Key].Domain[r]
			case rewrite.OutputCount:
				v = "42"
			default:
				v = "12.5"
			}
			row[i] = &v
		}
		res.Rows = append(res.Rows, row)
	}
	return res
}

// fakeStore is an in-memory accountant.Store for SHOW dp.budget.
type fakeStore struct {
	spent   map[string]accountant.Spent // by dataset
	granted accountant.Spent            // added to the policy's limit (a steward's grant)
	err     error
}

func (s *fakeStore) Reserve(context.Context, accountant.Charge) (*accountant.Reservation, error) {
	return nil, errors.New("fakeStore: Reserve not used by the proxy")
}

func (s *fakeStore) Release(context.Context, *accountant.Reservation, []byte) error {
	return errors.New("fakeStore: Release not used by the proxy")
}

func (s *fakeStore) RecordIncident(context.Context, *policy.Dataset, accountant.Incident) (accountant.IncidentResult, error) {
	return accountant.IncidentResult{}, errors.New("fakeStore: RecordIncident not used by the proxy")
}

// Cached is part of the ledger's answer cache; the proxy never calls it.
func (s *fakeStore) Cached(context.Context, string, string, string) ([]byte, bool, error) {
	return nil, false, nil
}

func (s *fakeStore) Status(_ context.Context, analyst string, ds *policy.Dataset) (accountant.Status, error) {
	if s.err != nil {
		return accountant.Status{}, s.err
	}
	b := ds.AnalystBudget(analyst)
	return accountant.Status{
		Dataset: ds.Name, Accountant: b.Accountant,
		Spent: s.spent[ds.Name],
		Limit: accountant.Spent{Epsilon: b.Epsilon + s.granted.Epsilon, Delta: b.Delta + s.granted.Delta},
	}, nil
}

// testServer is a running in-process proxy.
type testServer struct {
	srv      *Server
	addr     string
	releaser *fakeReleaser
	store    *fakeStore
	cancel   context.CancelFunc
	done     chan error
}

type serverOpts struct {
	shadowDSN string
	mutate    func(*Config)
	// router, when set, changes the server's rewrite functions before it
	// serves (e.g. a planner that never returns).
	router func(*router)
	// listener, when set, wraps the loopback listener the server serves.
	listener func(net.Listener) net.Listener
}

// startServer serves the hospital policy (and a second dataset "clinic"
// with the same policy) on a loopback port. Analysts: alice (plain
// password "alice", all datasets), bob (SCRAM verifier of "bob-secret",
// hospital only), carol (clinic only).
func startServer(t testing.TB, o serverOpts) *testServer {
	t.Helper()
	hosp := hospitalPolicy(t)
	clinic := *hosp
	clinic.Name = "clinic"
	bobVerifier, err := HashPassword("bob-secret")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{releaser: &fakeReleaser{}, store: &fakeStore{spent: map[string]accountant.Spent{
		"hospital": {Epsilon: 0.5, Delta: 0},
	}}}
	cfg := Config{
		Datasets: map[string]*Dataset{
			"hospital": {Policy: hosp, ShadowDSN: o.shadowDSN},
			"clinic":   {Policy: &clinic, ShadowDSN: o.shadowDSN},
		},
		Analysts: map[string]config.Analyst{
			"alice": {Password: "plain:alice"},
			"bob":   {Password: bobVerifier, Datasets: []string{"hospital"}},
			"carol": {Password: "plain:carol", Datasets: []string{"clinic"}},
		},
		Releaser:     ts.releaser,
		Ledger:       ts.store,
		Logger:       zaptest.NewLogger(t),
		DrainTimeout: 2 * time.Second,
	}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.router != nil {
		o.router(&srv.rt)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.listener != nil {
		ln = o.listener(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.srv, ts.addr, ts.cancel, ts.done = srv, ln.Addr().String(), cancel, make(chan error, 1)
	go func() { ts.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) stop() {
	ts.cancel()
	<-ts.done
	ts.done <- nil // later stops return at once
}

func (ts *testServer) dsn(user, password, database string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", user, password, ts.addr, database)
}

// connect opens a pgconn session as alice on hospital.
func (ts *testServer) connect(t *testing.T) *pgconn.PgConn {
	t.Helper()
	return ts.connectAs(t, "alice", "alice", "hospital")
}

func (ts *testServer) connectAs(t *testing.T, user, password, db string) *pgconn.PgConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := pgconn.Connect(ctx, ts.dsn(user, password, db))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { pc.Close(context.Background()) })
	return pc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// execAll runs a simple query and returns its results.
func execAll(t *testing.T, pc *pgconn.PgConn, sql string) ([]*pgconn.Result, error) {
	t.Helper()
	return pc.Exec(ctxT(t), sql).ReadAll()
}

// sqlstate returns the SQLSTATE of a PostgreSQL error, or "".
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// rows returns a result's values as strings (NULL as "<null>").
func rows(r *pgconn.Result) [][]string {
	var out [][]string
	for _, row := range r.Rows {
		var s []string
		for _, v := range row {
			if v == nil {
				s = append(s, "<null>")
			} else {
				s = append(s, string(v))
			}
		}
		out = append(out, s)
	}
	return out
}

// pgconnConnect connects with a DSN and closes the connection at the end
// of the test.
func pgconnConnect(t *testing.T, dsn string) (*pgconn.PgConn, error) {
	t.Helper()
	pc, err := pgconn.Connect(ctxT(t), dsn)
	if err == nil {
		t.Cleanup(func() { pc.Close(context.Background()) })
	}
	return pc, err
}

// runEach answers a batch leaf by leaf with run: the fakes' RunBatch.
func runEach(ctx context.Context, run func(context.Context, release.Request) (*release.Result, error), reqs []release.Request) ([]*release.Result, error) {
	out := make([]*release.Result, len(reqs))
	for i, req := range reqs {
		res, err := run(ctx, req)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

func (f *fakeReleaser) RunBatch(ctx context.Context, reqs []release.Request) ([]*release.Result, error) {
	return runEach(ctx, f.Run, reqs)
}
