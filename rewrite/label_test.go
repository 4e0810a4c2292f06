package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestRewrite_KeywordLabels: any keyword may be a label after AS, as in
// PostgreSQL (ColLabel), and is the output column's name (issue 17).
func TestRewrite_KeywordLabels(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for q, want := range map[string]string{
		"SELECT sex, AVG(birth_year) AS by FROM patients GROUP BY sex":                         "by",
		"SELECT sex, COUNT(*) AS order FROM patients GROUP BY sex":                             "order",
		"SELECT sex, COUNT(*) AS select FROM patients GROUP BY sex":                            "select",
		"SELECT sex, COUNT(*) AS with FROM patients GROUP BY sex":                              "with",
		"SELECT sex, COUNT(*) AS from FROM patients GROUP BY sex":                              "from",
		"SELECT sex, COUNT(*) AS Limit FROM patients GROUP BY sex ORDER BY 2 DESC LIMIT 1":     "limit",
		`SELECT department, SUM(cost) AS "sum" FROM visits AS group_ GROUP BY department`:      "sum",
		"SELECT department AS group, COUNT(*) AS n FROM visits GROUP BY department ORDER BY n": "n",
	} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Errorf("Rewrite(%q): %v", q, err)
			continue
		}
		found := false
		for _, o := range p.Outputs {
			found = found || o.Name == want
		}
		if !found {
			t.Errorf("Rewrite(%q): no output named %q", q, want)
		}
	}
}

// TestRewrite_FetchFirst: FETCH {FIRST|NEXT} [n] {ROW|ROWS} ONLY is LIMIT n
// (BI tools write it), and so is LIMIT n::integer (SQLAlchemy's asyncpg
// dialect binds LIMIT $1::integer); the plan equals the LIMIT one's.
func TestRewrite_FetchFirst(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	const base = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY n DESC"
	want, err := Rewrite(ds, base+" LIMIT 3")
	if err != nil {
		t.Fatal(err)
	}
	one, err := Rewrite(ds, base+" LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	for q, w := range map[string]*Plan{
		base + " FETCH FIRST 3 ROWS ONLY":              want,
		base + " LIMIT 3::integer":                     want,
		base + " LIMIT 3::int8 OFFSET 0::int4":         nil,
		base + " fetch next 3 row only":                want,
		base + " FETCH FIRST ROW ONLY":                 one,
		base + " OFFSET 0 ROWS FETCH NEXT 3 ROWS ONLY": nil,
	} {
		p, err := Rewrite(ds, q)
		if err != nil {
			t.Errorf("Rewrite(%q): %v", q, err)
			continue
		}
		if w != nil && p.Fingerprint != w.Fingerprint {
			t.Errorf("Rewrite(%q) plans differently from its LIMIT form", q)
		}
	}
	for q, code := range map[string]string{
		base + " FETCH FIRST 3 ROWS WITH TIES":    pgerr.FeatureNotSupported,
		base + " LIMIT 2 FETCH FIRST 3 ROWS ONLY": pgerr.SyntaxError,
		base + " FETCH FIRST 3 ROWS":              pgerr.SyntaxError,
		base + " FETCH FIRST three ROWS ONLY":     pgerr.FeatureNotSupported,
		base + " LIMIT 3::text":                   pgerr.FeatureNotSupported,
		base + " LIMIT 3.5::integer":              pgerr.FeatureNotSupported,
	} {
		_, err := Rewrite(ds, q)
		if pe, ok := pgerr.As(err); !ok || pe.Code != code || pe.Hint == "" {
			t.Errorf("Rewrite(%q) = %v, want %s with a hint", q, err, code)
		}
	}
}

// TestRewrite_SyntaxHintNamesJoins: the hint of a syntax error describes
// the shape dpproxy answers, joins included (not "one table" only).
func TestRewrite_SyntaxHintNamesJoins(t *testing.T) {
	t.Parallel()
	_, err := Rewrite(loadHospital(t), "SELECT department, COUNT(*) FROM visits GROUP BY department department")
	pe, ok := pgerr.As(err)
	if !ok || pe.Code != pgerr.SyntaxError || !strings.Contains(pe.Hint, "JOIN") || strings.Contains(pe.Hint, "one_table") {
		t.Fatalf("syntax error = %v, want 42601 whose hint names joins", err)
	}
}

// TestRewrite_HintsNameTheFix: a refusal's hint names what to write (new
// user's run 94): a GROUP BY position or alias of an expression lists the
// key expressions dpproxy groups by, as the expression itself does, and
// median() points to percentile_cont.
func TestRewrite_HintsNameTheFix(t *testing.T) {
	t.Parallel()
	ds := loadHospital(t)
	for q, want := range map[string]string{
		"SELECT age/10*10 AS decade, COUNT(*) FROM visits GROUP BY 1":      "width_bucket(col, low, high, count)",
		"SELECT age/10*10 AS decade, COUNT(*) FROM visits GROUP BY decade": "width_bucket(col, low, high, count)",
		"SELECT median(cost) FROM visits":                                  "percentile_cont(0.5) WITHIN GROUP (ORDER BY col)",
	} {
		_, err := Rewrite(ds, q)
		if pe, ok := pgerr.As(err); !ok || pe.Code != pgerr.FeatureNotSupported || !strings.Contains(pe.Hint, want) {
			t.Errorf("Rewrite(%q) = %v (hint %q), want 0A000 whose hint names %q", q, err, hintOf(err), want)
		}
	}
}

func hintOf(err error) string {
	if pe, ok := pgerr.As(err); ok {
		return pe.Hint
	}
	return ""
}
