package rewrite

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// corpusFile is the differential corpus: analyst queries over the hospital
// policy, each of which must be accepted and answered exactly (noise off).
const corpusFile = "testdata/corpus.sql"

// minCorpus is issue 5's floor on the number of corpus queries.
const minCorpus = 200

// corpusQuery is one query of the corpus and its 1-based first line.
type corpusQuery struct {
	line int
	sql  string
}

// loadCorpus splits the corpus file into queries: blocks of lines separated
// by blank lines; a block whose lines all start with "--" is a comment.
func loadCorpus(t testing.TB) []corpusQuery {
	t.Helper()
	data, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusQuery
	var block []string
	first := 0
	flush := func() {
		comment := true
		for _, l := range block {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				comment = false
			}
		}
		if len(block) > 0 && !comment {
			out = append(out, corpusQuery{line: first, sql: strings.Join(block, "\n")})
		}
		block = nil
	}
	for i, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if len(block) == 0 {
			first = i + 1
		}
		block = append(block, l)
	}
	flush()
	return out
}

// TestRewrite_Corpus is issue 5's differential test: every query of
// testdata/corpus.sql is rewritten over the hospital policy, and on a real
// PostgreSQL loaded with data within the policy's bounds and contribution
// limits (loadWithinLimits), the emitted SQL released without noise must
// return exactly what PostgreSQL returns for the query itself (see
// diffPostgres). A refused corpus query fails the test, and so does a
// corpus of fewer than 200 queries.
func TestRewrite_Corpus(t *testing.T) {
	queries := loadCorpus(t)
	if len(queries) < minCorpus {
		t.Fatalf("%s has %d queries, want at least %d", corpusFile, len(queries), minCorpus)
	}
	seen := map[string]int{}
	for _, q := range queries {
		if l, dup := seen[q.sql]; dup {
			t.Errorf("%s:%d repeats the query of line %d", corpusFile, q.line, l)
		}
		seen[q.sql] = q.line
	}
	ctx, conn := freshConn(t, 3*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	loadWithinLimits(t, ctx, conn, ds)
	accepted, quantiles := 0, 0
	for _, q := range queries {
		t.Run(fmt.Sprintf("line%d", q.line), func(t *testing.T) {
			p, err := Rewrite(ds, q.sql)
			if err != nil {
				t.Fatalf("%s:%d: Rewrite(%q): %v", corpusFile, q.line, q.sql, err)
			}
			accepted++
			if p.SampleAgg != nil {
				diffSampleAgg(t, ctx, conn, ds, p, q.sql) // sampleagg_group_test.go
				return
			}
			diffPostgres(t, ctx, conn, p, q.sql)
			if hasQuantileOutput(p) && p.Having == nil && p.Limit < 0 && p.Offset == 0 {
				// diffPostgres leaves quantiles out: compare their
				// histograms with PostgreSQL's value too.
				emitted, err1 := queryText(ctx, conn, p.SQL)
				direct, err2 := queryText(ctx, conn, q.sql)
				if err1 != nil || err2 != nil {
					t.Fatalf("%v, %v", err1, err2)
				}
				checkQuantileRows(t, p, emitted, direct)
				quantiles++
			}
		})
	}
	if accepted < minCorpus {
		t.Errorf("only %d corpus queries were accepted, want at least %d", accepted, minCorpus)
	}
	if quantiles < 10 {
		t.Errorf("only %d corpus queries had their quantiles compared with PostgreSQL, want at least 10", quantiles)
	}
}

func hasQuantileOutput(p *Plan) bool {
	for _, o := range p.Outputs {
		if o.Kind == OutputQuantile {
			return true
		}
	}
	return false
}

// TestRewrite_PostgresParses checks on a real PostgreSQL the half of
// FuzzRewrite's invariant that needs a server: the emitted SQL of every
// accepted seed (fuzzRewriteSeeds, the fuzzer's committed inputs under
// testdata/fuzz/FuzzRewrite, the hospital goldens and the corpus) is
// accepted by PostgreSQL's parser and analyzer. PREPARE parses and
// analyzes without running anything, so the tables may be empty.
func TestRewrite_PostgresParses(t *testing.T) {
	seeds := append([]string(nil), fuzzRewriteSeeds...)
	for _, gc := range loadGolden(t) {
		if _, own := gc.ar.files["policy.yaml"]; !own {
			seeds = append(seeds, gc.query)
		}
	}
	for _, q := range loadCorpus(t) {
		seeds = append(seeds, q.sql)
	}
	paths, _ := filepath.Glob("testdata/fuzz/FuzzRewrite/*")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// go test fuzz v1 files: a header line, then string("…").
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "string(") {
			t.Fatalf("%s: not a one-string fuzz input", p)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		seeds = append(seeds, s)
	}
	ctx, conn := freshConn(t, 2*time.Minute)
	if _, err := conn.Exec(ctx, hospitalSchema); err != nil {
		t.Fatal(err)
	}
	ds := loadHospital(t)
	accepted := 0
	for _, q := range seeds {
		p, err := Rewrite(ds, q)
		if err != nil {
			continue
		}
		accepted++
		if _, err := conn.Exec(ctx, "PREPARE dp_check AS "+p.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Errorf("PostgreSQL refuses the emitted SQL of %q: %v\n%s", q, err, p.SQL)
			continue
		}
		if _, err := conn.Exec(ctx, "DEALLOCATE dp_check", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	if accepted < minCorpus {
		t.Errorf("only %d seeds were accepted, want at least %d", accepted, minCorpus)
	}
}
