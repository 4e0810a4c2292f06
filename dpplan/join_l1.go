// Privacy-critical: needs DP review.

package dpplan

// The L1 bound of an elastic join (JoinKey, join.go).
//
// # Why L0·L∞ is loose
//
// join.go proves that adding or removing one unit x changes at most
// E = 2·(C_A·m_B + C_B·m_A)·Π m_T joined rows (the multiset symmetric
// difference of the joined relations of D and D′ has at most E elements),
// and that each joined row adds at most M to one group's measure (1 for a
// count or a quantile's bucket count, max(|l|, |u|) for a sum of values in
// [l, u], max(l², u²) for a sum of squares, the centred forms for normalized
// sums). The plan states L∞ = E·M and L0 = min(E, groups), so the generic
// bound L1 ≤ L0·L∞ = min(E, groups)·E·M counts every changed row once in
// every group it could have gone to.
//
// # The direct bound
//
// A joined row belongs to exactly one group (its key values are columns of
// that row), and a row that is in both D's and D′'s joined relation is in
// the same group in both. So the change of group g is a sum over the
// changed joined rows whose key is g, each term at most M in absolute
// value, and
//
//	Σ_g |Δ_g| ≤ Σ_{changed rows r} |value(r)| ≤ E·M ≤ L∞
//
// (L∞ ≥ E·M is what finishJoin cross-checks). Measure.L1 = L∞ states this
// bound; sensitivity.L1 then calibrates Laplace noise to min(L0·L∞, L1) =
// E·M, a factor min(E, groups) smaller than before, and sensitivity.L2
// uses √(L1·L∞) = E·M instead of √L0·E·M (Σ Δ_g² ≤ max|Δ_g|·Σ|Δ_g|). The
// per-group bound L∞ and the group bound L0 are unchanged and still hold.
//
// For a quantile measure the same argument bounds the total change of the
// exponential method's utilities: each changed value moves each utility of
// its group by at most 1 (release/quantile.go), so Σ_g max_j |Δu_{g,j}| ≤ E
// = L1, and the exponential mechanism of each group may use the measure's
// whole ε instead of ε/L0 (release/quantile.go, "Groups").
//
// The bound is checked on neighbouring databases by the audit
// (rewrite/join_test.go: the L1 change of every measure of every elastic golden is
// at most L1).

// SetElasticL1 states the direct L1 bound of every measure of an elastic
// join plan (see the file comment). Other plans keep L1 = 0.
func SetElasticL1(p *Plan) {
	if p.Join == nil || p.Join.Shape != JoinKey {
		return
	}
	for i := range p.Measures {
		p.Measures[i].L1 = p.Measures[i].LInf
	}
}
