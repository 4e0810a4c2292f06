package pgsql

import (
	"strings"
	"testing"
	"time"
)

// TestReview81_QualifiedAttributeOfShadowFunction (review 81): PostgreSQL
// reads schema.table.f (and db.schema.table.f) as f(table's row) when the
// table has no column f (checked on PostgreSQL 15: SELECT
// public.patients.evil FROM public.patients called a volatile
// evil(anyelement)). checkAttribute skips every name with more than two
// parts, so a function the shadow server has (AddShadowFunctions: an
// extension's, or one a steward created) that takes a row, anyelement or
// "any" is called unchecked. PostgreSQL 15's own such functions are all
// harmless (concat, to_json, row_to_json, pg_column_size…), so this is
// open only for what AddShadowFunctions learns.
func TestReview81_QualifiedAttributeOfShadowFunction(t *testing.T) {
	AddShadowFunctions([]string{"review81_evil"})
	for _, sql := range []string{
		"SELECT t.review81_evil FROM public.patients t",                         // refused (2 parts)
		"SELECT public.patients.review81_evil FROM public.patients",             // 3 parts
		"SELECT hospital.public.patients.review81_evil FROM public.patients",    // 4 parts
		"SELECT public . patients /* x */ . review81_evil FROM public.patients", // spacing
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("accepted: %s", sql)
		}
	}
}

// TestReview81_TypeNamesAccepted: a qualified type after :: or AS calls
// nothing (review 81: '<a/>'::pg_catalog.xml was refused, xml being a
// volatile function's name too).
func TestReview81_TypeNamesAccepted(t *testing.T) {
	for _, sql := range []string{
		"SELECT '<a/>'::pg_catalog.xml",
		"SELECT CAST('<a/>' AS pg_catalog.xml)",
		"SELECT public.patients.birth_year FROM public.patients",
	} {
		if err := checkCatalog(t, sql); err != nil {
			t.Errorf("refused: %v\n%s", err, sql)
		}
	}
	if err := checkCatalog(t, "SELECT t.xml FROM pg_class t"); err == nil {
		t.Error("t.xml accepted: xml(text) is volatile")
	}
}

// TestReview81_LongDottedNameLinear: checking the last part of every
// dotted name looks back to the name's first part; a 1 MiB name of
// 300,000 parts must not cost each part a walk back (quadratic: minutes of
// the proxy's CPU before any refusal). A complexity guard, with a bound
// 50 times the linear cost measured (18 ms).
func TestReview81_LongDottedNameLinear(t *testing.T) {
	sql := "SELECT " + strings.Repeat("a.", 300000) + "b FROM pg_class a"
	toks, err := Lex(sql)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = CheckCatalog(sql, toks)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("CheckCatalog of a 300,000-part name took %v", d)
	}
}
