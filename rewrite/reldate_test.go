package rewrite

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgemit"
	"github.com/dpproxy/dpproxy/pgsql"
)

// relNow is the statement start of the relative-date tests: a Thursday,
// 10:38:20.123456789 UTC (11:38 in Paris, 05:38 in New York).
var relNow = time.Date(2024, 2, 29, 10, 38, 20, 123456789, time.UTC)

func relOpts(t *testing.T, tz string) Options {
	t.Helper()
	o := Options{Now: relNow}
	if tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Fatal(err)
		}
		o.TimeZone, o.Location = tz, loc
	}
	return o
}

func TestRelDate_Folded(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for _, tc := range []struct {
		tz, where, want string
	}{
		// now() is 2024-02-29 10:38:20.123456 UTC; compared with a date
		// column, a timestamp with a time of day folds to the next day
		// for >= (datefold.go).
		{"", "visit_date >= now() - interval '2 years'", `"visit_date" >= '2022-03-01'::date`},
		{"", "visit_date >= current_date - interval '2 years'", `"visit_date" >= '2022-02-28'::date`}, // Feb 29 - 2 years clamps to Feb 28
		{"", "visit_date >= current_date - 365", `"visit_date" >= '2023-03-01'::date`},                // 2024 is a leap year
		{"", "visit_date > current_date - 365 + 1", `"visit_date" > '2023-03-02'::date`},
		{"", "visit_date < current_date", `"visit_date" < '2024-02-29'::date`},
		{"", "visit_date >= current_timestamp - interval '30 days'", `"visit_date" >= '2024-01-31'::date`},
		{"", "visit_date >= localtimestamp - interval '1 month'", `"visit_date" >= '2024-01-30'::date`},
		{"", "visit_date <= now()", `"visit_date" <= '2024-02-29'::date`},
		{"", "visit_date >= CAST((now() + INTERVAL '-30 day') AS date)", `"visit_date" >= '2024-01-30'::date`},
		{"", "visit_date >= now()::date - 7", `"visit_date" >= '2024-02-22'::date`},
		{"", "visit_date >= date_trunc('month', now())", `"visit_date" >= '2024-02-01'::date`},
		{"", "visit_date >= date_trunc('year', current_date) - interval '1 year'", `"visit_date" >= '2023-01-01'::date`},
		{"", "visit_date >= '2024-01-31'::date + interval '1 month'", `"visit_date" >= '2024-02-29'::date`},
		{"", "visit_date >= DATE '2024-03-01' - interval '1 hour'", `"visit_date" >= '2024-03-01'::date`},
		{"", "visit_date > DATE '2024-03-01' - interval '1 hour'", `"visit_date" > '2024-02-29'::date`},
		{"", "visit_date BETWEEN now() - interval '1 year' AND now()", `"visit_date" BETWEEN '2023-03-01'::date AND '2024-02-29'::date`},
		{"", "visit_date >= now() - interval '2' year", `"visit_date" >= '2022-03-01'::date`},
		{"", "visit_date >= now() - interval '1 year 2 mons 3 days 04:00' ", ""}, // refused: hh:mm
		{"", "visit_date >= TIMESTAMP '2024-01-01 12:00' + interval '12 hours'", `"visit_date" >= '2024-01-02'::date`},
		// In Pacific/Kiritimati (UTC+14) it is already March 1st, 00:38.
		{"Pacific/Kiritimati", "visit_date = current_date", `"visit_date" = '2024-03-01'::date`},
		{"Pacific/Auckland", "visit_date = current_date", `"visit_date" = '2024-02-29'::date`},
		{"America/New_York", "visit_date = current_date", `"visit_date" = '2024-02-29'::date`},
		{"Pacific/Kiritimati", "visit_date >= now() - interval '1 day'", `"visit_date" >= '2024-03-01'::date`},
		{"Pacific/Kiritimati", "visit_date >= localtimestamp - interval '1 day'", `"visit_date" >= '2024-03-01'::date`},
		{"Pacific/Kiritimati", "visit_date >= date_trunc('day', now())", `"visit_date" >= '2024-03-01'::date`},
	} {
		p, err := RewriteWith(ds, "SELECT COUNT(*) FROM visits WHERE "+tc.where, relOpts(t, tc.tz))
		if tc.want == "" {
			pe, ok := pgerr.As(err)
			if !ok || pe.Hint == "" {
				t.Errorf("%s: got %v, want a refusal with a hint", tc.where, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s (%s): %v", tc.where, tc.tz, err)
			continue
		}
		if !strings.Contains(p.SQL, tc.want) {
			t.Errorf("%s (%s): SQL\n%s\nwant it to contain %s", tc.where, tc.tz, p.SQL, tc.want)
		}
	}
}

func TestRelDate_Refused(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for _, tc := range []struct {
		tz, where, code, msg string
	}{
		{"", "visit_date >= now() - interval '1 day' * 2", "0A000", "only + and -"},
		{"", "visit_date >= current_date - 1.5", "0A000", "plus or minus 1.5"},
		{"", "visit_date >= now() - interval '1.5 days'", "0A000", "interval"},
		{"", "visit_date >= now()::text", "0A000", "cast to this type"},
		{"", "visit_date >= current_timestamp(3)", "0A000", "precision"},
		{"+02", "visit_date >= now()", "0A000", "TimeZone"},
		{"", "visit_date >= now() - age", "0A000", "plus or minus"},
	} {
		o := Options{Now: relNow}
		if tc.tz != "" {
			o.TimeZone = tc.tz
		}
		_, err := RewriteWith(ds, "SELECT COUNT(*) FROM visits WHERE "+tc.where, o)
		pe, ok := pgerr.As(err)
		if !ok || pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) || pe.Hint == "" {
			t.Errorf("%s: got %v, want %s %q with a hint", tc.where, err, tc.code, tc.msg)
		}
	}
}

// The clock is read once per statement: the same Options.Now gives the
// same plan, a later one a later constant.
func TestRelDate_OneClockRead(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	q := "SELECT COUNT(*) FROM visits WHERE visit_date >= current_date - 30 AND visit_date < current_date"
	a, err := RewriteWith(ds, q, Options{Now: relNow})
	if err != nil {
		t.Fatal(err)
	}
	b, err := RewriteWith(ds, q, Options{Now: relNow.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := RewriteWith(ds, q, Options{Now: relNow.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint != b.Fingerprint || a.SQL != b.SQL {
		t.Errorf("same day, different plans")
	}
	if !strings.Contains(c.SQL, `'2024-03-01'::date`) || c.Fingerprint == a.Fingerprint {
		t.Errorf("a day later: SQL %s", c.SQL)
	}
	if !UsesClock(q) || UsesClock("SELECT COUNT(*) FROM visits WHERE \"now\" > 1 AND x = 'current_date'") {
		t.Errorf("UsesClock")
	}
}

// TestRelDate_MatchesPostgres folds random relative-date expressions and
// checks each value against PostgreSQL's for the same expression, the
// clock words replaced by the statement's instant.
func TestRelDate_MatchesPostgres(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	rng := rand.New(rand.NewPCG(31, 1))
	nowLit := "'" + relNow.Truncate(time.Microsecond).Format("2006-01-02 15:04:05.999999") + "+00'::timestamptz"
	bases := []struct{ ours, pg string }{
		{"now()", nowLit}, {"current_timestamp", nowLit},
		{"current_date", "(" + nowLit + ")::date"}, {"localtimestamp", "(" + nowLit + ")::timestamp"},
		{"DATE '2024-03-31'", ""}, {"TIMESTAMP '2024-10-27 01:30:00'", ""}, {"'2024-01-31 23:59:59.5'::timestamptz", ""},
		{"TIMESTAMPTZ '2024-03-10 12:00:00-05'", ""},
	}
	units := []string{"year", "years", "mons", "month", "days", "day", "week", "hours", "minutes", "seconds"}
	zones := []string{"UTC", "Europe/Paris", "America/Sao_Paulo", "Pacific/Chatham", "Asia/Kolkata"}
	checked := 0
	for i := 0; i < 400; i++ {
		zone := zones[rng.IntN(len(zones))]
		b := bases[rng.IntN(len(bases))]
		ours, pg := b.ours, b.pg
		if pg == "" {
			pg = ours
		}
		date := strings.Contains(ours, "DATE") || ours == "current_date"
		for n := rng.IntN(3); n >= 0; n-- {
			op := []string{" + ", " - "}[rng.IntN(2)]
			var term string
			if date && rng.IntN(2) == 0 {
				term = strconv.Itoa(rng.IntN(400))
			} else {
				term = fmt.Sprintf("interval '%d %s'", rng.IntN(40)-5, units[rng.IntN(len(units))])
				date = false
			}
			ours, pg = ours+op+term, pg+op+term
		}
		switch rng.IntN(5) {
		case 0:
			ours, pg = "("+ours+")::date", "("+pg+")::date"
		case 1:
			ours, pg = "CAST("+ours+" AS timestamptz)", "CAST("+pg+" AS timestamptz)"
		case 2:
			u := []string{"month", "week", "day", "year", "quarter", "hour"}[rng.IntN(6)]
			ours, pg = "date_trunc('"+u+"', "+ours+")", "date_trunc('"+u+"', "+pg+")"
		}
		o := relOpts(t, zone)
		stmt := "SELECT " + ours
		toks, err := pgsql.Lex(stmt)
		if err != nil {
			t.Fatal(err)
		}
		out, err := foldClock(stmt, toks, clockOf(o))
		if err != nil {
			if pe, ok := pgerr.As(err); !ok || pe.Hint == "" {
				t.Errorf("%s: %v", ours, err)
			}
			continue // refused (a zone transition near), not wrong
		}
		if len(out) != 4 || out[1].Kind != pgsql.TokString || !out[2].IsPunct("::") {
			t.Fatalf("%s: not folded to one literal: %v", ours, out)
		}
		if _, err := conn.Exec(ctx, "SET TIME ZONE '"+zone+"'"); err != nil {
			t.Fatal(err)
		}
		lit := pgemit.QuoteString(out[1].Val) + "::" + out[3].Val
		rows, err := queryText(ctx, conn, "SELECT ("+pg+")::text, ("+lit+")::text, pg_typeof("+pg+")::text")
		if err != nil {
			t.Fatalf("%s: %v", pg, err)
		}
		want, got, typ := *rows[0][0], *rows[0][1], *rows[0][2]
		if got != want {
			t.Errorf("TimeZone %s: %s folded to %s = %s, PostgreSQL: %s", zone, ours, lit, got, want)
		}
		if pgTypes := map[string]string{"date": "date", "timestamp": "timestamp without time zone", "timestamptz": "timestamp with time zone"}; pgTypes[out[3].Val] != typ {
			t.Errorf("%s: type %s, PostgreSQL: %s", ours, out[3].Val, typ)
		}
		checked++
	}
	if checked < 300 {
		t.Errorf("only %d of 400 expressions folded", checked)
	}
}
