package proxy

import (
	"testing"
	"time"
)

// TestAttack73_HugeLiteralOverAggregateAmplifies (attack round 73,
// severity high: rule 1, the proxy's memory and CPU after the charge, the
// ledger's disk, all unbounded by anything public; an 8-byte literal
// becomes a megabyte per answer cell).
//
// A numeric constant combined with an aggregate in the select list is
// planned by rewrite.arith (rewrite/expr.go:30) with one check: that
// big.Rat can parse it. Go's big.Rat accepts decimal exponents up to 10⁶,
// so `COUNT(*) * 1e999999` is planned; the bounds of constants
// (30 significant digits, magnitude 10⁻³⁰…10³⁰, intervals within ±10¹⁰⁰:
// SECURITY.md G5, dpplan/value.go) hold only inside aggregates. After the
// charge release evaluates the expression on the noisy count in big.Rat
// (release/post.go outputRow, Expr.Eval) and prints it in full
// (v.num.FloatString / trimZeros): a 1,000,004-byte cell per group. None
// of it is foreseen before the charge: checkAnswerCells and
// release.AnswerBytes count an expression cell at 64 bytes, so the answer
// passes the 16 MiB answer bound, the analyst's memory account, and the
// ledger stores it whole (SECURITY.md gap 8: "at most 16 MiB over public
// keys"). Each literal mentioned again adds a million digits to the
// product (64 operations allowed), and printing a number of n digits costs
// superlinear CPU on the proxy after the charge (round 73's probe: seven
// cells of COUNT(*) * 1e999999 * 1e999999 took 6.1 s, 14 MB; one cell of
// COUNT(*) times 1e999999 k times took 0.25, 0.6, 1.6 and 4.4 s for k = 1,
// 2, 4, 8, 1 MB of text per literal, all after the charge). A
// width_bucket of 1,000 buckets with one such literal makes a 1 GB answer
// from a 90-byte statement (not run here).
//
// Measured here: 22 groups (the noisy count is zero in some) × COUNT(*) * 1e999999 under a 16 MiB analyst
// bound: a 20–21 MB answer (and ledger row) for room estimated at a few KB.
//
// Asserted: the released answer is within the documented 16 MiB answer
// bound, or the statement is refused before its charge.
//
// Suggested fix: bound constants outside aggregates as inside them (30
// significant digits, |c| within 10⁻³⁰…10³⁰) and the interval of every
// expression over aggregates (from the measures' public bounds and the
// noise's scale, or simply the result's digits), refusing beyond it with
// 54000 or 22003 before the charge; count an expression cell by its
// bound's digits in AnswerBytes.
func TestAttack73_HugeLiteralOverAggregateAmplifies(t *testing.T) {
	const bound = 16 << 20
	r := startRealDP(t, func(c *Config) { c.MaxMemoryPerAnalyst = bound })
	pc := r.connect(t)
	const q = "SELECT width_bucket(age, 0, 110, 20) AS b, COUNT(*) * 1e999999 AS x FROM visits GROUP BY 1"
	n0 := len(r.charges(t))
	start := time.Now()
	res, err := execLong65(t, pc, q)
	took := time.Since(start)
	charged := len(r.charges(t)) - n0
	if err != nil {
		if charged != 0 {
			t.Fatalf("refused after its charge (%d): %s %v", charged, sqlstate(err), err)
		}
		t.Logf("refused before the charge: %s %v", sqlstate(err), err)
		return
	}
	size, cells := 0, 0
	for _, row := range res[0].Rows {
		for _, v := range row {
			size += len(v)
			cells++
		}
	}
	stored := 0
	if c := r.charges(t); len(c) > n0 {
		stored = len(c[len(c)-1].answer)
	}
	t.Logf("a %d-byte statement: %d cells, %d bytes of answer (%d stored in the ledger), %d charges, %v", len(q), cells, size, stored, charged, took)
	if size > 16<<20 {
		t.Errorf("a %d-byte statement released a %d MB answer (%d cells: %d bytes a cell), past the 16 MiB answer bound and alice's %d MiB memory bound; the ledger stores %d MB of it: a numeric literal outside aggregates is unbounded",
			len(q), size>>20, cells, size/cells, bound>>20, stored>>20)
	}
}
