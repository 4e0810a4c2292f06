package pgemit

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dpplan"
)

// TestJoinFromSQL_UnitCut: in a unit join every protected table but the
// first is read through its per-unit cut (at most C_T rows per unit, in a
// hash order of the row, rows without a unit dropped), with only the
// columns the join reads; the first table and public tables are read as
// they are (dpplan/join.go, "Work of a unit join").
func TestJoinFromSQL_UnitCut(t *testing.T) {
	j := &dpplan.Join{
		Shape: dpplan.JoinUnit,
		Tables: []dpplan.JoinTable{
			{Name: "visits", Schema: "public", Unit: "patient_id"},
			{Name: "visits", Schema: "public", Unit: "patient_id", On: []dpplan.JoinOn{{Table: 0, Column: "patient_id", Other: "patient_id"}}},
			{Name: "wards", Schema: "public", Public: true, On: []dpplan.JoinOn{{Table: 0, Column: "ward_id", Other: "ward_id"}}},
		},
		Columns: []dpplan.JoinColumn{
			{Name: "visits#1.patient_id", Table: 0, Column: "patient_id"},
			{Name: "cost", Table: 1, Column: "cost"},
			{Name: "wing", Table: 2, Column: "wing"},
		},
		RowsPerUnit: []int{0, 20, 0},
		Fanout:      20,
	}
	got := joinFromSQL(j)
	want := `FROM "public"."visits" AS dp_t0 JOIN (SELECT "cost", "patient_id" FROM (SELECT "cost", "patient_id", ROW_NUMBER() OVER (PARTITION BY "patient_id" ORDER BY hashtextextended(ROW("cost", "patient_id")::text, ` + selectSalt + `), "cost", "patient_id") AS dp_cut FROM "public"."visits" WHERE "patient_id" IS NOT NULL) AS dp_cut_rows WHERE dp_cut <= 20) AS dp_t1 ON dp_t0."patient_id" = dp_t1."patient_id" JOIN "public"."wards" AS dp_t2 ON dp_t0."ward_id" = dp_t2."ward_id"`
	if !strings.Contains(got, want) {
		t.Fatalf("joinFromSQL =\n%s\nwant it to contain\n%s", got, want)
	}
	if n := strings.Count(got, "dp_cut <="); n != 1 {
		t.Fatalf("%d cuts, want one (the second protected table)", n)
	}
	// Not a unit join: no cut, whatever RowsPerUnit holds.
	j.Shape = dpplan.JoinPublic
	if got := joinFromSQL(j); strings.Contains(got, "dp_cut") {
		t.Fatalf("a public join is cut:\n%s", got)
	}
}

// TestQuote: identifiers and strings are quoted as PostgreSQL reads them
// (a backslash in the E” form, whatever standard_conforming_strings).
func TestQuote(t *testing.T) {
	for in, want := range map[string]string{`visits`: `"visits"`, `we"ird`: `"we""ird"`, ``: `""`} {
		if got := QuoteIdent(in); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{`O'Brien`: `'O''Brien'`, `a\b`: `E'a\\b'`} {
		if got := QuoteString(in); got != want {
			t.Errorf("QuoteString(%q) = %s, want %s", in, got, want)
		}
	}
}
