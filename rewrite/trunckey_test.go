package rewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestTruncKey_MatchesPostgres: date_trunc keys of a date column have
// PostgreSQL's type and text (timestamptz in the session's zone, its
// offset on each date; timestamp; date when cast), checked against
// PostgreSQL's own answers under several session zones.
func TestTruncKey_MatchesPostgres(t *testing.T) {
	ctx, conn := freshConn(t, 3*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	queries := []struct{ sql, typ string }{
		{"SELECT date_trunc('month', visit_date), COUNT(*) FROM visits GROUP BY 1", "timestamptz"},
		{"SELECT date_trunc('week', visit_date) AS w, COUNT(*) FROM visits WHERE visit_date >= '2024-03-01' GROUP BY 1", "timestamptz"},
		{"SELECT date_trunc('quarter', visit_date::timestamp), COUNT(*) FROM visits GROUP BY 1", "timestamp"},
		{"SELECT CAST(date_trunc('year', visit_date) AS date), COUNT(*) FROM visits GROUP BY 1", "date"},
		{"SELECT date_trunc('year', visit_date)::text, COUNT(*) FROM visits GROUP BY 1", "text"},
		{"SELECT date_trunc('month', visit_date)::timestamp, COUNT(*) FROM visits GROUP BY 1", "timestamp"},
		{"SELECT CAST(date_trunc('month', visit_date::timestamp) AS text), COUNT(*) FROM visits GROUP BY 1", "text"},
	}
	for _, zone := range []string{"UTC", "Europe/Paris", "Asia/Kolkata", "America/St_Johns", "Australia/Lord_Howe"} {
		if _, err := conn.Exec(ctx, "SET TIME ZONE '"+zone+"'"); err != nil {
			t.Fatal(err)
		}
		o := Options{TimeZone: zone, Location: mustLoc(t, zone)}
		if zone == "UTC" {
			o = Options{}
		}
		// Cube's time dimension and filter, AT TIME ZONE the session's
		// zone (attz.go).
		atz := []struct{ sql, typ string }{{
			"SELECT date_trunc('month', (visit_date::timestamptz AT TIME ZONE '" + zone + "')), COUNT(*) FROM visits WHERE visit_date::timestamptz AT TIME ZONE '" + zone +
				"' >= '2023-01-01T00:00:00.000'::timestamptz AND visit_date::timestamptz AT TIME ZONE '" + zone + "' <= '2023-06-30T23:59:59.999'::timestamptz GROUP BY 1",
			"timestamp"}}
		for _, q := range append(atz, queries...) {
			p, err := RewriteWith(ds, q.sql, o)
			if err != nil {
				t.Fatalf("%s under %s: %v", q.sql, zone, err)
			}
			if p.Outputs[0].PGType != q.typ {
				t.Errorf("%s: type %s, want %s", q.sql, p.Outputs[0].PGType, q.typ)
			}
			diffPostgres(t, ctx, conn, p, q.sql)
		}
	}
	// A zone whose clock skips a day's midnight, whatever the key's type
	// (PostgreSQL would truncate to 01:00); cast to date it is exact.
	havana := Options{TimeZone: "America/Havana", Location: mustLoc(t, "America/Havana")}
	for _, q := range []string{
		"SELECT date_trunc('day', visit_date), COUNT(*) FROM visits GROUP BY 1",
		"SELECT date_trunc('day', visit_date)::timestamp, COUNT(*) FROM visits GROUP BY 1",
	} {
		_, err := RewriteWith(ds, q, havana)
		if pe, ok := pgerr.As(err); !ok || !strings.Contains(pe.Message, "skips or repeats") || pe.Hint == "" {
			t.Errorf("America/Havana: %s: %v", q, err)
		}
	}
	if _, err := RewriteWith(ds, "SELECT date_trunc('day', visit_date)::date, COUNT(*) FROM visits GROUP BY 1", havana); err != nil {
		t.Errorf("America/Havana, cast to date: %v", err)
	}
}
