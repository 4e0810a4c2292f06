package rewrite

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/policy"
)

// TestDateFold_MatchesPostgres checks datefold.go against PostgreSQL:
// for random timestamp literals in every supported spelling (untyped,
// TIMESTAMP, TIMESTAMPTZ, WITH TIME ZONE, casts, to_timestamp of an epoch
// and of a text), random operators and random session time zones
// (including one whose DST started at midnight, and a numeric offset),
// the folded date condition dpproxy emits has, on every date of a table
// around the literals (and NULL), the same value (true, false or NULL) as
// the analyst's condition evaluated by PostgreSQL under that TimeZone.
// A fold may be refused (0A000 or 22007 with a hint), never wrong.
// Deterministic (seeded).
func TestDateFold_MatchesPostgres(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	ds, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	anchors := []string{"2024-01-01", "2024-03-31", "2024-10-27", "2023-12-31", "2024-02-29", "2022-11-06", "2018-11-04", "2019-02-17"}
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE fold (visit_date date)`); err != nil {
		t.Fatal(err)
	}
	for _, a := range anchors {
		if _, err := conn.Exec(ctx, `INSERT INTO fold SELECT d::date FROM generate_series($1::date - 3, $1::date + 3, '1 day') d`, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO fold VALUES (NULL)`); err != nil {
		t.Fatal(err)
	}
	zones := []string{"UTC", "Europe/Paris", "America/Sao_Paulo", "Asia/Kolkata", "America/Havana", "+02", "Pacific/Chatham"}
	rng := rand.New(rand.NewPCG(17, 3))
	lit := func() string {
		a, _ := time.Parse("2006-01-02", anchors[rng.IntN(len(anchors))])
		d := a.AddDate(0, 0, rng.IntN(3)-1)
		var tod time.Duration
		switch rng.IntN(4) {
		case 0: // midnight
		case 1:
			tod = time.Duration(rng.IntN(24*3600)) * time.Second
		case 2:
			tod = 24*time.Hour - time.Duration(1+rng.IntN(3))*time.Second
		default:
			tod = time.Duration(rng.IntN(3*3600)) * time.Second
		}
		ts := d.Add(tod)
		text := ts.Format("2006-01-02 15:04:05")
		if rng.IntN(4) == 0 {
			text = ts.Format("2006-01-02T15:04:05") + fmt.Sprintf(".%03d", rng.IntN(1000))
		}
		zone := []string{"", "", "Z", "+05:30", "-03", "+0200", "-11:00"}[rng.IntN(7)]
		switch rng.IntN(9) {
		case 0:
			return "'" + text + zone + "'"
		case 1:
			return "TIMESTAMP '" + text + zone + "'"
		case 2:
			return "TIMESTAMPTZ '" + text + zone + "'"
		case 3:
			return "timestamp with time zone '" + text + zone + "'"
		case 4:
			return "'" + text + zone + "'::timestamptz"
		case 5:
			return "CAST('" + text + zone + "' AS timestamp)"
		case 6:
			return fmt.Sprintf("to_timestamp(%d)", ts.Add(-time.Duration(rng.IntN(15*3600))*time.Second+7*time.Hour).Unix())
		case 7:
			return "to_timestamp('" + ts.Format("2006-01-02 15:04:05") + "', 'YYYY-MM-DD HH24:MI:SS')"
		default:
			return "'" + ts.Format("2006-01-02") + "'::timestamp"
		}
	}
	folded, refused := 0, 0
	for i := 0; i < 600; i++ {
		zone := zones[rng.IntN(len(zones))]
		var opts Options
		if !UTCZone(zone) {
			opts.TimeZone = zone
			if !strings.HasPrefix(zone, "+") {
				if opts.Location, err = time.LoadLocation(zone); err != nil {
					t.Fatal(err)
				}
			}
		}
		var cond string
		switch k := rng.IntN(10); {
		case k < 6:
			op := []string{"=", "<>", "<", "<=", ">", ">="}[k]
			if rng.IntN(2) == 0 {
				cond = "visit_date " + op + " " + lit()
			} else {
				cond = lit() + " " + op + " visit_date"
			}
		case k < 8:
			not := []string{"", "NOT "}[rng.IntN(2)]
			cond = "visit_date " + not + "BETWEEN " + lit() + " AND " + lit()
		case k < 9:
			cond = "visit_date IS DISTINCT FROM " + lit()
		default:
			cond = "visit_date IN (" + lit() + ")"
		}
		q := "SELECT COUNT(*) FROM visits WHERE " + cond
		p, err := RewriteWith(ds, q, opts)
		if err != nil {
			pe, ok := pgerr.As(err)
			if !ok || pe.Hint == "" || pe.Code != pgerr.FeatureNotSupported && pe.Code != "22007" {
				t.Fatalf("%s (TimeZone %s): refused without SQLSTATE 0A000/22007 and hint: %v", q, zone, err)
			}
			refused++
			continue
		}
		folded++
		_, w := dpplan.SourceOf(p)
		got := pgemit.PredSQL(w)
		run := func(c string) string {
			var out string
			if _, err := conn.Exec(ctx, "SET TIME ZONE '"+zone+"'"); err != nil {
				t.Fatal(err)
			}
			err := conn.QueryRow(ctx, "SELECT string_agg(coalesce(visit_date::text, 'null') || '=' || coalesce(("+c+")::text, 'null'), ',' ORDER BY visit_date) FROM fold").Scan(&out)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			return out
		}
		if want, have := run(cond), run(got); want != have {
			t.Errorf("TimeZone %s: %s\n  folded to %s\n  PostgreSQL %s\n  folded     %s", zone, cond, got, want, have)
		}
	}
	t.Logf("%d conditions folded and equal to PostgreSQL's, %d refused", folded, refused)
	if folded < 300 {
		t.Errorf("only %d of 600 folded", folded)
	}
}
