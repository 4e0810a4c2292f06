package proxy

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/catalog"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap/zaptest"
)

// Attack round 48: the privacy ledger against a running proxy with a real
// release (release.Releaser), a real PostgreSQL ledger (ledger.Open) and a
// real data database (internal/upstream) holding demo-shaped rows. Each
// released answer's NOTICE and SHOW dp.last_answer are compared with the
// charge rows of dpproxy_ledger.charge.

// realDP is a running proxy whose DP statements are released for real.
type realDP struct {
	*testServer
	ledgerDSN string
	led       *ledger.Ledger
	rel       *release.Releaser
}

// startRealDP starts the proxy of startServer with a real releaser, ledger
// and upstream: a data database with visits and patients (2,000 patients,
// 10,000 visits, deterministic), a shadow catalog, and a fresh ledger.
func startRealDP(t *testing.T, mutate func(*Config)) *realDP {
	t.Helper()
	return startRealDPOver(t, []string{
		`INSERT INTO patients SELECT p, 1930 + p % 90, CASE WHEN p % 2 = 0 THEN 'F' ELSE 'M' END,
			(ARRAY['north','south','east','west','central'])[1 + p % 5] FROM generate_series(1, 2000) p`,
		`INSERT INTO visits SELECT 1 + v % 2000, DATE '2020-01-01' + (v * 7) % 1800,
			(ARRAY['cardiology','emergency','neurology','oncology','orthopedics','pediatrics','surgery'])[1 + v % 7],
			'D' || (v % 13), 1 + v % 100, (v % 500) * 3.5, v % 10 FROM generate_series(1, 10000) v`,
	}, nil, mutate)
}

// realBackends are what a proxy over a real PostgreSQL needs: a data
// database filled by a seed, its upstream pool, a fresh ledger and a real
// releaser.
type realBackends struct {
	dataDSN, ledgerDSN string
	up                 *upstream.Pool
	led                *ledger.Ledger
	rel                *release.Releaser
}

// newRealBackends creates them (closed at the test's end).
func newRealBackends(t *testing.T, ctx context.Context, seed []string) realBackends {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a proxy over PostgreSQL (skipped under -short only)")
	}
	b := realBackends{dataDSN: shadowDB(t), ledgerDSN: pgtest.NewDatabase(t)}
	if err := pgtest.Exec(ctx, b.dataDSN, append(seed, `ANALYZE`)...); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.up, err = upstream.New(ctx, upstream.Config{DSN: b.dataDSN, StatementTimeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.up.Close)
	if b.led, err = ledger.Open(ctx, b.ledgerDSN, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.led.Close)
	if b.rel, err = release.New(release.Config{Ledger: b.led, Planner: rewrite.Replan}); err != nil {
		t.Fatal(err)
	}
	return b
}

// startRealDPOver is startRealDP over the data seed inserts; wrap, when
// not nil, wraps the upstream the datasets use (a meter).
func startRealDPOver(t *testing.T, seed []string, wrap func(release.Upstream) release.Upstream, mutate func(*Config)) *realDP {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := newRealBackends(t, ctx, seed)
	dataDSN, ledgerDSN, led, rel := b.dataDSN, b.ledgerDSN, b.led, b.rel
	var dsUp release.Upstream = b.up
	if wrap != nil {
		dsUp = wrap(b.up)
	}
	dataConn, err := pgx.Connect(ctx, dataDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer dataConn.Close(context.Background())
	ts := startServer(t, serverOpts{shadowDSN: shadowDB(t), mutate: func(c *Config) {
		c.Releaser, c.Ledger = rel, led
		for _, d := range c.Datasets {
			d.Upstream = dsUp
		}
		// As dpproxy serve does: the live column types the emitter
		// reads (numeric scales, citext) and the policy's fit to them.
		problems, err := catalog.Verify(ctx, dataConn, c.Datasets["hospital"].Policy)
		if err != nil || len(problems) > 0 {
			t.Fatalf("the data database does not fit the policy: %v %q", err, problems)
		}
		if mutate != nil {
			mutate(c)
		}
	}})
	return &realDP{testServer: ts, ledgerDSN: ledgerDSN, led: led, rel: rel}
}

// chargeRow is one row of dpproxy_ledger.charge.
type chargeRow struct {
	id                 int64
	analyst, status    string
	fingerprint        string
	costEps, costDelta float64
	events             string
	answer             string
}

// charges returns the ledger's charge rows, oldest first.
func (r *realDP) charges(t *testing.T) []chargeRow {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, r.ledgerDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(ctx, `SELECT id, analyst, status, fingerprint, cost_epsilon::float8, cost_delta::float8, events::text, coalesce(answer::text, '')
		FROM dpproxy_ledger.charge ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []chargeRow
	for rs.Next() {
		var c chargeRow
		if err := rs.Scan(&c.id, &c.analyst, &c.status, &c.fingerprint, &c.costEps, &c.costDelta, &c.events, &c.answer); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// since returns the charge rows after the first n (of analyst, if not "").
func since(all []chargeRow, n int, analyst string) []chargeRow {
	var out []chargeRow
	for _, c := range all[n:] {
		if analyst == "" || c.analyst == analyst {
			out = append(out, c)
		}
	}
	return out
}

var noticeEpsRE = regexp.MustCompile(`epsilon ([0-9.e+-]+)`)

// noticeEpsilons returns every "epsilon X" figure of a NOTICE text.
func noticeEpsilons(msg string) []float64 {
	var out []float64
	for _, m := range noticeEpsRE.FindAllStringSubmatch(msg, -1) {
		v, err := strconv.ParseFloat(strings.TrimRight(m[1], "."), 64)
		if err == nil {
			out = append(out, v)
		}
	}
	return out
}

// noticeCollector collects NOTICE messages of a connection.
type noticeCollector struct{ msgs []string }

func (n *noticeCollector) handler(_ *pgconn.PgConn, no *pgconn.Notice) {
	n.msgs = append(n.msgs, no.Message)
}

func (n *noticeCollector) take() []string { m := n.msgs; n.msgs = nil; return m }

// connectNotices connects as user with a NOTICE collector.
func (r *realDP) connectNotices(t *testing.T, user, password string) (*pgconn.PgConn, *noticeCollector) {
	t.Helper()
	nc := &noticeCollector{}
	cfg, err := pgconn.ParseConfig(r.dsn(user, password, "hospital"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = nc.handler
	pc, err := pgconn.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(context.Background()) })
	return pc, nc
}

// lastAnswer returns SHOW dp.last_answer as item → value.
func lastAnswerOf(t *testing.T, pc *pgconn.PgConn) map[string]string {
	t.Helper()
	res, err := execAll(t, pc, "SHOW dp.last_answer")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, row := range rows(res[0]) {
		out[row[0]] = row[1]
	}
	return out
}

// rawReply is what the proxy sent back for a batch of raw messages.
type rawReply struct {
	// results: one per CommandComplete/PortalSuspended, with the rows
	// before it and the NOTICEs sent since the previous one.
	results []rawResult
	errs    []string // SQLSTATE: message of each ErrorResponse
	ready   []byte   // ReadyForQuery transaction statuses
}

type rawResult struct {
	tag       string // "" for PortalSuspended
	suspended bool
	rows      [][]string
	notices   []string
}

// rawSend sends msgs (each a pgproto3 frontend message) and reads until
// as many ReadyForQuery messages as msgs held Sync or Query messages.
func rawSend(t *testing.T, pc *pgconn.PgConn, nc *noticeCollector, msgs ...pgproto3.FrontendMessage) rawReply {
	t.Helper()
	ctx := ctxT(t)
	fe := pc.Frontend()
	want := 0
	for _, m := range msgs {
		switch m.(type) {
		case *pgproto3.Sync, *pgproto3.Query:
			want++
		}
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var out rawReply
	var cur rawResult
	for len(out.ready) < want {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			row := make([]string, len(m.Values))
			for i, v := range m.Values {
				if v == nil {
					row[i] = "<null>"
				} else {
					row[i] = string(v)
				}
			}
			cur.rows = append(cur.rows, row)
		case *pgproto3.NoticeResponse:
			cur.notices = append(cur.notices, m.Message)
		case *pgproto3.CommandComplete:
			cur.tag = string(m.CommandTag)
			cur.notices = append(cur.notices, nc.take()...)
			out.results = append(out.results, cur)
			cur = rawResult{}
		case *pgproto3.PortalSuspended:
			cur.suspended = true
			cur.notices = append(cur.notices, nc.take()...)
			out.results = append(out.results, cur)
			cur = rawResult{}
		case *pgproto3.ErrorResponse:
			out.errs = append(out.errs, m.Code+": "+m.Message)
		case *pgproto3.ReadyForQuery:
			out.ready = append(out.ready, m.TxStatus)
		}
	}
	return out
}

// storedRows are the rows of a ledger answer: one answer, or a batch's
// list of answers.
func storedRows(answer string) [][][]string {
	if answer == "" {
		return nil
	}
	type one struct {
		Rows [][]*string `json:"rows"`
	}
	conv := func(o one) [][]string {
		var out [][]string
		for _, r := range o.Rows {
			row := make([]string, len(r))
			for i, v := range r {
				if v == nil {
					row[i] = "<null>"
				} else {
					row[i] = *v
				}
			}
			out = append(out, row)
		}
		return out
	}
	var single one
	if err := json.Unmarshal([]byte(answer), &single); err == nil {
		return [][][]string{conv(single)}
	}
	var many []one
	if err := json.Unmarshal([]byte(answer), &many); err == nil {
		var out [][][]string
		for _, o := range many {
			out = append(out, conv(o))
		}
		return out
	}
	return nil
}

// eventEpsilons are the ε of a charge's events.
func eventEpsilons(events string) []float64 {
	var evs []struct {
		Epsilon float64 `json:"epsilon"`
	}
	_ = json.Unmarshal([]byte(events), &evs)
	var out []float64
	for _, e := range evs {
		out = append(out, e.Epsilon)
	}
	return out
}

// chargeOf returns the ledger charge of analyst whose recorded answer has
// exactly these rows, or nil.
func chargeOf(all []chargeRow, analyst string, got [][]string) *chargeRow {
	for i := len(all) - 1; i >= 0; i-- {
		c := all[i]
		if c.analyst != analyst {
			continue
		}
		for _, rs := range storedRows(c.answer) {
			if reflect.DeepEqual(rs, got) {
				return &all[i]
			}
		}
	}
	return nil
}

// checkAnswer checks one released answer (its rows and its DP NOTICE)
// against the ledger: a charge of analyst records exactly these rows; a
// fresh (uncached) answer's NOTICE states that charge's cost, and the ε it
// states per column is the ε of one of the charge's events; wantEps, when
// > 0, is the ε the session had set for the statement. It returns the
// charge.
func checkAnswer(t *testing.T, r *realDP, analyst string, got [][]string, notices []string, wantEps float64) *chargeRow {
	t.Helper()
	all := r.charges(t)
	c := chargeOf(all, analyst, got)
	if c == nil {
		t.Errorf("released answer %v (NOTICE %q) is recorded on no charge of %s in the ledger", got, notices, analyst)
		return nil
	}
	var dp string
	for _, n := range notices {
		if strings.HasPrefix(n, "dp: ") {
			dp = n
		}
	}
	if dp == "" {
		t.Errorf("answer %v came with no dp NOTICE (%q)", got, notices)
		return c
	}
	if strings.HasPrefix(dp, "dp: cached answer") {
		return c
	}
	eps := noticeEpsilons(dp)
	if len(eps) == 0 {
		t.Errorf("NOTICE %q states no ε", dp)
		return c
	}
	if math.Abs(eps[0]-c.costEps) > 1e-9*math.Max(1, c.costEps) {
		t.Errorf("NOTICE states ε %v spent, the ledger charge %d of this answer records %v", eps[0], c.id, c.costEps)
	}
	if wantEps > 0 && math.Abs(c.costEps-wantEps) > 1e-9 {
		t.Errorf("the statement ran with dp.epsilon = %v, its answer's charge %d records %v", wantEps, c.id, c.costEps)
	}
	evs := eventEpsilons(c.events)
	for _, e := range eps[1:] {
		ok := false
		for _, ev := range evs {
			if math.Abs(ev-e) <= 0.0051*math.Max(ev, 1e-9) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("NOTICE states a measurement at ε %v; the charge %d has events at %v", e, c.id, evs)
		}
	}
	return c
}

// releasedKeys runs a DP query and returns its first column's texts.
func releasedKeys(t *testing.T, pc *pgconn.PgConn, q string) []string {
	t.Helper()
	res, err := execAll(t, pc, q)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, row := range res[0].Rows {
		keys = append(keys, string(row[0]))
	}
	return keys
}

// releasedValue runs a DP query and returns its second column in the row
// whose first column is key.
func releasedValue(t *testing.T, pc *pgconn.PgConn, q, key string) float64 {
	t.Helper()
	res, err := execAll(t, pc, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res[0].Rows {
		if string(row[0]) == key {
			n, err := strconv.ParseFloat(string(row[1]), 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s row in %v", key, rows(res[0]))
	return 0
}
