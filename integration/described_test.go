package integration

// Regression tests from an attack review of 2026-12-06 (answers in the
// described types, proxy/described.go; the float8 statistics of
// rewrite/regrstats.go). Each was a finding when written.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawBatch sends msgs and a Sync on a hijacked connection and returns the
// replies until ReadyForQuery, one line each.
func rawBatch(t *testing.T, fe *pgproto3.Frontend, msgs ...pgproto3.FrontendMessage) []string {
	t.Helper()
	for _, m := range msgs {
		fe.Send(m)
	}
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch x := m.(type) {
		case *pgproto3.ReadyForQuery:
			return out
		case *pgproto3.ErrorResponse:
			out = append(out, "E "+x.Code+" "+x.Message)
		case *pgproto3.DataRow:
			out = append(out, fmt.Sprintf("D %q", x.Values))
		case *pgproto3.RowDescription:
			s := "T"
			for _, f := range x.Fields {
				s += fmt.Sprintf(" %s:%d", f.Name, f.DataTypeOID)
			}
			out = append(out, s)
		default:
			out = append(out, fmt.Sprintf("%T", m))
		}
	}
}

// A portal described, then a session setting that changes the answer's
// columns (dp.error_columns) set in the same batch, then the portal
// executed: the Execute must not be charged unless it answers.
func TestDescribed_PortalThenSettingNotCharged(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, "dsc1")
	withAnalyst(t, cfgPath, "dsc2")
	p := startProxy(t, cfgPath, addr)
	for _, tc := range []struct {
		analyst, sql, setting string
		params                [][]byte
	}{
		{"dsc1", "SELECT COUNT(*) AS n FROM visits WHERE department = $1", "on", [][]byte{[]byte("oncology")}},
		{"dsc2", "SELECT COUNT(*) AS n FROM visits", "on", nil},
	} {
		c, err := pgconn.Connect(ctx, p.dsn(tc.analyst)+"&options=-c%20dp.epsilon%3D0.1")
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		before := chargeCount(t, ctx, tc.analyst)
		got := rawBatch(t, h.Frontend,
			&pgproto3.Parse{Name: "s1", Query: tc.sql},
			&pgproto3.Bind{DestinationPortal: "p1", PreparedStatement: "s1", Parameters: tc.params},
			&pgproto3.Describe{ObjectType: 'P', Name: "p1"},
			&pgproto3.Parse{Name: "s2", Query: "SET dp.error_columns = " + tc.setting},
			&pgproto3.Bind{DestinationPortal: "p2", PreparedStatement: "s2"},
			&pgproto3.Execute{Portal: "p2"},
			&pgproto3.Execute{Portal: "p1"})
		h.Conn.Close()
		answered := false
		for _, l := range got {
			answered = answered || strings.HasPrefix(l, "D ")
		}
		if charged := chargeCount(t, ctx, tc.analyst) - before; charged > 0 && !answered {
			t.Errorf("%s: charged %d time(s) without an answer: %q", tc.sql, charged, got)
		}
	}
}

// A float8 statistic in an expression that overflows float8: PostgreSQL
// refuses it (22003) before reading; through dpproxy with pgx (binary
// float8) it must not be charged without an answer.
func TestRegr_FloatOverflowAnswered(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, "rgovf")
	p := startProxy(t, cfgPath, addr)
	conn := connect(t, ctx, p.dsn("rgovf"))
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.1"); err != nil {
		t.Fatal(err)
	}
	var f float64
	err := conn.QueryRow(ctx, "SELECT regr_slope(cost, age) * 1e300 * 1e300 FROM visits").Scan(&f)
	if n := chargeCount(t, ctx, "rgovf"); err != nil && n > 0 {
		t.Errorf("charged %d time(s), answered with error %v", n, err)
	}
}

// float8 statistics as PostgreSQL prints them: regr_slope(age, cost) is
// about 1.24e-4 and /1e6 about 1.24e-10; at a large epsilon the answer
// must agree with PostgreSQL to a few significant digits.
func TestRegr_FloatPrecision(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfigPolicy(t, "../examples/policies/hospital.yaml", [2]string{"  epsilon: 3.0 ", "  epsilon: 1000000 "})
	withAnalyst(t, cfgPath, "rgprec")
	p := startProxy(t, cfgPath, addr)
	conn := connect(t, ctx, p.dsn("rgprec"))
	direct := connect(t, ctx, env.upstreamDSN)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 100000; SET dp.contribution = fixed"); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT regr_slope(age, cost), regr_slope(age, cost) / 1000000, covar_pop(age, cost) * 1e-9 FROM visits"
	var got, want [3]float64
	if err := conn.QueryRow(ctx, q).Scan(&got[0], &got[1], &got[2]); err != nil {
		t.Fatal(err)
	}
	if err := direct.QueryRow(ctx, q).Scan(&want[0], &want[1], &want[2]); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 0.01*math.Abs(want[i]) {
			t.Errorf("column %d: %v, PostgreSQL %v", i+1, got[i], want[i])
		}
	}
}

// TestDescribed_DateTruncParameter: date_trunc($1, visit_date) prepared by
// pgx (Describe statement first) is described by its plan with a unit
// standing in for $1, not by the shadow's guess: SUM of an integer column
// (numeric in a DP answer, int8 by the shadow) and dp.error_columns (not in
// the shadow's columns) were refused on every Execute.
func TestDescribed_DateTruncParameter(t *testing.T) {
	requireDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgPath, addr := extraConfig(t)
	withAnalyst(t, cfgPath, "dscdt")
	p := startProxy(t, cfgPath, addr)
	for _, tc := range []struct{ setup, sql string }{
		{"SET dp.epsilon = 0.1", "SELECT date_trunc($1, visit_date) AS m, SUM(age) AS s FROM visits GROUP BY 1"},
		{"SET dp.epsilon = 0.1; SET dp.error_columns = on", "SELECT date_trunc($1, visit_date) AS m, COUNT(*) AS n FROM visits GROUP BY 1"},
	} {
		conn := connect(t, ctx, p.dsn("dscdt"))
		if _, err := conn.Exec(ctx, tc.setup); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, tc.sql, "year")
		n := 0
		if err == nil {
			for rows.Next() {
				n++
			}
			err = rows.Err()
		}
		if err != nil || n == 0 {
			t.Errorf("%s (%s): %d rows, %v", tc.sql, tc.setup, n, err)
		}
	}
}
