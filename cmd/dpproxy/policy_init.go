package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/upstream"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/jackc/pgx/v5"
)

// `dpproxy policy init` writes a policy skeleton for one table from the
// live schema. Column types map as follows: smallint/integer/bigint → int,
// numeric → numeric, real/double precision → float, date → date,
// boolean → bool (with public values true and false); text and every other
// type get `access: none` (text has no public values to group by, and the
// tool does not read values to find any). Identifier-like columns other
// than the unit (names ending in "id") also get `access: none`.
//
// Unit column guess (a heuristic; the skeleton marks it for review):
//  1. a column that is not the table's single-column primary key, whose
//     name ends in "_id" and contains a person-like word (person, patient,
//     user, customer, client, member, account, household, subject,
//     employee, student, citizen, respondent), first in column order;
//  2. else the first non-primary-key column whose name ends in "_id";
//  3. else the single-column primary key (each row is one unit).
//
// Bounds of numeric and date columns come from DP quantiles, never from
// exact minima and maxima: the exponential mechanism over data-independent
// candidates (numbers 0 and ±m·10^e with three significant digits m,
// 1.00 … 9.99, for e = −2…9, whole numbers only for int columns; dates the
// 1st, 11th and 21st of each month of 1900…2100) picks a lower bound with
// about 1% of the values below it and an upper bound with about 99% below
// it, over one value per unit, preferring the tightest candidate among
// those that fit the data equally well (release.BoundUtilities). The total
// --epsilon is split equally over the selections and charged to the
// steward's budget in the ledger (dataset --dataset, ledger row
// "steward:" + --steward (policy.StewardLedgerPrefix),
// limit --steward-epsilon, pure composition) before any value is read.

// initQuantiles are the quantiles whose DP estimates become lower and
// upper bounds: clipping about 1% of the values at each end.
var initQuantiles = []float64{0.01, 0.99}

// personWords make an "_id" column a likely privacy unit.
var personWords = []string{"person", "patient", "user", "customer", "client", "member", "account", "household",
	"subject", "employee", "student", "citizen", "respondent"}

// numberCandidates returns the candidate bounds of a numeric column,
// ascending: 0 and ±m·10^(e−2) for m = 100 … 999 and e = −2 … 9 (three
// significant digits, so neighbouring candidates are at most 1% apart:
// a birth year lands within 10 years, a cost of 15,000 within 100),
// whole numbers only for an int column.
func numberCandidates(integer bool) []float64 {
	var pos []float64
	for e := -2; e <= 9; e++ {
		for m := 100; m <= 999; m++ {
			v := roundCandidate(float64(m) * math.Pow(10, float64(e-2)))
			if integer && v != math.Trunc(v) {
				continue
			}
			pos = append(pos, v)
		}
	}
	out := make([]float64, 0, 2*len(pos)+1)
	for i := len(pos) - 1; i >= 0; i-- {
		out = append(out, -pos[i])
	}
	out = append(out, 0)
	return append(out, pos...)
}

// roundCandidate removes the binary noise of m·10^e (0.015 → 0.015).
func roundCandidate(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

// dateCandidates returns the 1st, 11th and 21st of every month of
// 1900 … 2100, ascending: a bound lands within about ten days.
func dateCandidates() []string {
	var out []string
	for y := 1900; y <= 2100; y++ {
		for m := 1; m <= 12; m++ {
			for _, d := range []int{1, 11, 21} {
				out = append(out, fmt.Sprintf("%04d-%02d-%02d", y, m, d))
			}
		}
	}
	return out
}

// initColumn is one column of the live schema.
type initColumn struct {
	name, pgType string
	pk           bool
}

func cmdPolicyInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("policy init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "DSN of the data database (a role that can read the table)")
	table := fs.String("table", "", "the table, [schema.]name")
	dataset := fs.String("dataset", "", "dataset name (default: the DSN's database)")
	cfgPath := fs.String("config", "", "dpproxy config whose ledger is charged")
	ledgerDSN := fs.String("ledger", "", "ledger DSN (instead of --config)")
	stewardName := fs.String("steward", "steward", "ledger name of the steward budget")
	stewardEps := fs.Float64("steward-epsilon", 1, "the steward budget's ε limit on this dataset")
	eps := fs.Float64("epsilon", 0.5, "total ε of the DP quantiles of this run")
	out := fs.String("out", "", "write the skeleton here (default: stdout)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *dsn == "" || *table == "" {
		return usagef("policy init: --dsn and --table are required")
	}
	if (*cfgPath == "") == (*ledgerDSN == "") {
		return usagef("policy init: give the ledger with exactly one of --config or --ledger")
	}
	if !(*eps > 0) || math.IsInf(*eps, 0) || !(*stewardEps > 0) || math.IsInf(*stewardEps, 0) {
		return usagef("policy init: --epsilon and --steward-epsilon must be positive numbers")
	}
	schema, name := "public", *table
	if i := strings.IndexByte(name, '.'); i >= 0 {
		schema, name = name[:i], name[i+1:]
	}
	pc, err := pgx.ParseConfig(*dsn)
	if err != nil {
		return fmt.Errorf("--dsn: %w", err)
	}
	if *dataset == "" {
		*dataset = pc.Database
	}
	o := &ops{}
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		*ledgerDSN = cfg.Ledger
		// The steward's charges and limit go to the config's audit log,
		// as an analyst's charges and a grant do.
		if o, err = openOps(cfg, nil, stderr); err != nil {
			return err
		}
		defer o.close()
	}
	cols, err := readColumns(ctx, *dsn, schema, name)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("table %s.%s not found or has no columns visible to this role", schema, name)
	}
	unit, why := guessUnit(cols)

	log, err := newLogger(stderr, "warn")
	if err != nil {
		return err
	}
	led, err := ledger.Open(ctx, *ledgerDSN, log)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	defer led.Close()
	up, err := upstream.New(ctx, upstream.Config{DSN: *dsn, StatementTimeout: 5 * time.Minute, MaxConns: 1})
	if err != nil {
		return err
	}
	defer up.Close()
	rel, err := release.New(release.Config{Ledger: o.store(led), Planner: rewrite.Replan})
	if err != nil {
		return err
	}
	// The steward budget: a dataset entry whose only purpose is the limit
	// of this charge (pure composition, no δ).
	budget := &policy.Dataset{Name: *dataset, Budget: policy.Budget{Epsilon: *stewardEps, Accountant: policy.AccountantPure}, Version: "policy-init"}
	o.audit.BudgetChange("steward-limit", *stewardName, *dataset, actor(), *stewardEps, 0)
	text, err := policySkeleton(ctx, rel, up, budget, *stewardName, *eps, schema, name, cols, unit, why)
	if err != nil {
		if e, ok := pgerr.As(err); ok && e.Code == pgerr.ConfigurationLimit {
			// The steward is the one running this: the budget's own hint
			// ("ask the data steward") points back at them.
			return e.WithHint("policy init spends the steward budget %q on dataset %s, whose limit is --steward-epsilon (this run: %s); run again with a larger one, e.g. --steward-epsilon %s",
				*stewardName, *dataset, fig(*stewardEps), fig(*stewardEps+*eps))
		}
		return err
	}
	if *out == "" {
		_, err = io.WriteString(stdout, text)
		return err
	}
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s; review every line marked REVIEW, then run dpproxy policy validate %s\n", *out, *out)
	return nil
}

// readColumns lists the table's columns (in order) with their types and
// whether each is the single-column primary key. Schema only: no values.
func readColumns(ctx context.Context, dsn, schema, table string) ([]initColumn, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
SELECT a.attname, format_type(a.atttypid, a.atttypmod),
       COALESCE((SELECT array_length(i.indkey::int2[], 1) = 1 AND a.attnum = ANY(i.indkey::int2[])
                 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), false)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, schema, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []initColumn
	for rows.Next() {
		var c initColumn
		if err := rows.Scan(&c.name, &c.pgType, &c.pk); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// guessUnit applies the documented heuristic and says which rule chose.
func guessUnit(cols []initColumn) (string, string) {
	for _, c := range cols {
		n := strings.ToLower(c.name)
		if c.pk || !strings.HasSuffix(n, "_id") {
			continue
		}
		for _, w := range personWords {
			if strings.Contains(n, w) {
				return c.name, "an _id column naming a person-like entity"
			}
		}
	}
	for _, c := range cols {
		if !c.pk && strings.HasSuffix(strings.ToLower(c.name), "_id") {
			return c.name, "the first _id column that is not the primary key"
		}
	}
	for _, c := range cols {
		if c.pk {
			return c.name, "the primary key (one row per unit)"
		}
	}
	return cols[0].name, "no _id column and no primary key: the first column, almost certainly wrong"
}

// unitIsKey reports whether unit is the table's whole primary key, so that
// each unit has one row.
func unitIsKey(cols []initColumn, unit string) bool {
	n, isUnit := 0, false
	for _, c := range cols {
		if c.pk {
			n++
			isUnit = isUnit || c.name == unit
		}
	}
	return n == 1 && isUnit
}

// policyType maps a PostgreSQL type to a policy type ("" when none fits).
func policyType(pgType string) policy.Type {
	t := pgType
	if i := strings.IndexByte(t, '('); i >= 0 {
		t = t[:i]
	}
	switch t {
	case "smallint", "integer", "bigint":
		return policy.TypeInt
	case "numeric":
		return policy.TypeNumeric
	case "real", "double precision":
		return policy.TypeFloat
	case "date":
		return policy.TypeDate
	case "boolean":
		return policy.TypeBool
	case "text", "character varying", "character":
		return policy.TypeText
	}
	return ""
}

// policySkeleton proposes bounds by DP quantiles (charged first) and writes
// the skeleton.
func policySkeleton(ctx context.Context, rel *release.Releaser, up release.Upstream, budget *policy.Dataset, steward string,
	eps float64, schema, table string, cols []initColumn, unit, why string) (string, error) {
	type bounded struct {
		col   initColumn
		typ   policy.Type
		cands []string
	}
	var probes []rewrite.BoundsProbe
	var bcols []bounded
	for _, c := range cols {
		typ := policyType(c.pgType)
		if c.name == unit || !(typ.Numeric() || typ == policy.TypeDate) || isIdentifier(c.name) {
			continue
		}
		var cands []string
		if typ == policy.TypeDate {
			cands = dateCandidates()
		} else {
			for _, v := range numberCandidates(typ == policy.TypeInt) {
				cands = append(cands, strconv.FormatFloat(v, 'f', -1, 64))
			}
		}
		probes = append(probes, rewrite.BoundsProbe{Schema: schema, Table: table, Unit: unit, Column: c.name, Date: typ == policy.TypeDate, Candidates: cands})
		bcols = append(bcols, bounded{col: c, typ: typ, cands: cands})
	}
	var picks [][]int
	each := 0.0
	if len(probes) > 0 {
		var err error
		picks, each, err = rel.ProposeQuantiles(ctx, release.QuantileRequest{Analyst: policy.StewardLedgerPrefix + steward, Dataset: budget, Epsilon: eps,
			Quantiles: initQuantiles, Probes: probes, Upstream: up})
		if err != nil {
			return "", err
		}
	}
	bounds := map[string][2]string{}
	for i, b := range bcols {
		lo, hi := picks[i][0], picks[i][1]
		if hi <= lo {
			hi = lo + 1 // an upper bound above the lower one
		}
		if hi >= len(b.cands) {
			lo, hi = len(b.cands)-2, len(b.cands)-1
		}
		l, u := b.cands[lo], b.cands[hi]
		if b.typ == policy.TypeDate {
			// The values are < the chosen date: end the day before.
			t, _ := time.Parse("2006-01-02", u)
			u = t.AddDate(0, 0, -1).Format("2006-01-02")
		}
		bounds[b.col.name] = [2]string{l, u}
	}

	var s strings.Builder
	fmt.Fprintf(&s, "# Policy skeleton written by `dpproxy policy init` for %s.%s on %s.\n", schema, table, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&s, "# Every line marked REVIEW is a proposal: check it before serving this policy.\n")
	if len(probes) > 0 {
		fmt.Fprintf(&s, "# Bounds come from DP quantiles (exponential mechanism, epsilon %s per bound, %s in all),\n", fig(each), fig(eps))
		fmt.Fprintf(&s, "# charged to the steward budget %q on dataset %q; they clip about 1%% of values at each end.\n", policy.StewardLedgerPrefix+steward, budget.Name)
	}
	fmt.Fprintf(&s, "dataset: %s\n", budget.Name)
	fmt.Fprintf(&s, "privacy_unit: %s   # REVIEW: the protected entity, for humans\n", strings.TrimSuffix(unit, "_id"))
	s.WriteString("budget:\n  epsilon: 1.0   # REVIEW: total ε per analyst\n  delta: 1.0e-6\n  accountant: pure\n")
	s.WriteString("defaults:\n  epsilon: 0.1\n  mechanism: laplace\n")
	s.WriteString("# sample_key_file: " + budget.Name + ".key   # REVIEW: openssl rand -hex 32 > " + budget.Name + ".key (see SECURITY.md)\n")
	s.WriteString("# min_units_per_cell: 11   # optional: release a cell's values only when its noisy count of units is at least 11 (docs/POLICY.md, \"Policy file reference\")\n")
	s.WriteString("tables:\n")
	fmt.Fprintf(&s, "  %s:\n", yamlKey(table))
	if schema != "public" {
		fmt.Fprintf(&s, "    schema: %s\n", yamlKey(schema))
	}
	fmt.Fprintf(&s, "    unit_column: %s   # REVIEW: guessed (%s)\n", yamlKey(unit), why)
	if unitIsKey(cols, unit) {
		// One row per unit: it can be in one group only (new user's run
		// 94: the patients table had been proposed 4 groups and 5 rows).
		s.WriteString("    max_groups_per_unit: 1   # the unit is the primary key: one row per unit, so one group\n")
		s.WriteString("    max_rows_per_unit: 1     # the unit is the primary key: one row per unit\n")
	} else {
		s.WriteString("    max_groups_per_unit: 4   # REVIEW: groups one unit may contribute to in one query\n")
		s.WriteString("    max_rows_per_unit: 5     # REVIEW: rows one unit may contribute to one group\n")
	}
	s.WriteString("    # max_rows: 1000000      # REVIEW: a public bound on the table's rows, with room to grow; with it every answer's work and time\n" +
		"    #                          # are bounded before its charge (docs/POLICY.md; dpproxy doctor checks it against the table)\n")
	s.WriteString("    columns:\n")
	for _, c := range cols {
		if c.name == unit {
			continue
		}
		typ := policyType(c.pgType)
		key := yamlKey(c.name)
		switch {
		case isIdentifier(c.name):
			fmt.Fprintf(&s, "      %s: {access: none}   # REVIEW: identifier-like (%s)\n", key, c.pgType)
		case typ == policy.TypeBool:
			fmt.Fprintf(&s, "      %s: {type: bool, public_values: [true, false]}\n", key)
		case typ.Numeric() || typ == policy.TypeDate:
			b := bounds[c.name]
			fmt.Fprintf(&s, "      %s: {type: %s, lower: %s, upper: %s}   # REVIEW: bounds proposed from DP quantiles\n", key, typ, b[0], b[1])
		case typ == policy.TypeText:
			fmt.Fprintf(&s, "      %s: {access: none}   # REVIEW: text without public values; to expose it write {type: text, public_values: [...]}\n", key)
		default:
			fmt.Fprintf(&s, "      %s: {access: none}   # REVIEW: type %s cannot be bounded\n", key, c.pgType)
		}
	}
	return s.String(), nil
}

// isIdentifier reports whether a column looks like a row or foreign
// identifier (never a useful aggregate input).
func isIdentifier(name string) bool {
	n := strings.ToLower(name)
	return n == "id" || strings.HasSuffix(n, "_id")
}

// yamlKey quotes a name for YAML when it is not a plain identifier.
func yamlKey(n string) string {
	for _, r := range n {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return strconv.Quote(n)
		}
	}
	return n
}
