package rewrite

// shareSums releases SUM(x) from the normalized sums when the query also
// asks AVG(x) or a variance of x (same value, same FILTER): those already
// measure S_c = Σ (x − c) and C = COUNT(x), and
//
//	SUM(x) = S_c + c·C
//
// is post-processing of them, so the separate plain sum (L∞ max_rows·
// max(|lo|, |hi|)) is dropped and ε is split over one measurement fewer.
// Its noise is e_s + c·e_c, whose scales at a given ε are proportional to
// (hi − lo)/2 and |c| (the count's L∞ is max_rows, the normalized sum's
// max_rows·(hi − lo)/2), against max(|lo|, |hi|) for a plain sum at the
// same ε. Variances add, so its standard deviation is proportional to
// √((hi − lo)²/4 + c²) = √((lo² + hi²)/2) ≤ max(|lo|, |hi|): never worse,
// and the query's other measurements each get a larger share of ε. This
// is post-processing of released values; privacy is unaffected.
//
// Measures no longer referenced are removed and the indices renumbered.
func shareSums(p *Plan) {
	same := func(a, b Measure) bool {
		return a.Column == b.Column && sameValue(a.Expr, b.Expr) && samePred(a.Filter, b.Filter)
	}
	outs := func(f func(o *Output)) {
		for i := range p.Outputs {
			f(&p.Outputs[i])
		}
		for i := range p.Hidden {
			f(&p.Hidden[i])
		}
	}
	outs(func(o *Output) {
		if o.Kind != OutputSum {
			return
		}
		m := p.Measures[o.Measure]
		if m.Kind != MeasureSum || m.Centre != "" {
			return
		}
		sum, cnt := -1, -1
		for j, n := range p.Measures {
			switch {
			case n.Kind == MeasureSum && n.Centre != "" && same(n, m):
				sum = j
			case n.Kind == MeasureCount && n.Column != "" && n.Column == m.Column && same(n, m),
				n.Kind == MeasureCount && n.Expr != nil && same(n, m):
				cnt = j
			}
		}
		if sum >= 0 && cnt >= 0 {
			o.Measure, o.CountMeasure = sum, cnt
		}
	})
	// Renumber the measures still in use.
	old := p.Measures
	used := make([]bool, len(old))
	outs(func(o *Output) {
		for _, i := range measureRefs(o, old) {
			if *i >= 0 && *i < len(used) {
				used[*i] = true
			}
		}
	})
	newIndex := make([]int, len(old))
	var kept []Measure
	for i, m := range old {
		if used[i] {
			newIndex[i] = len(kept)
			kept = append(kept, m)
		}
	}
	if len(kept) == len(old) {
		return
	}
	outs(func(o *Output) {
		for _, i := range measureRefs(o, old) {
			if *i >= 0 && *i < len(newIndex) {
				*i = newIndex[*i]
			}
		}
	})
	p.Measures = kept
}

// measureRefs are the measure indices an output reads (ms: the plan's
// measures, to tell a sum derived from normalized sums).
func measureRefs(o *Output, ms []Measure) []*int {
	switch o.Kind {
	case OutputCount:
		return []*int{&o.Measure}
	case OutputSum:
		if ms[o.Measure].Centre != "" {
			return []*int{&o.Measure, &o.CountMeasure}
		}
		return []*int{&o.Measure}
	case OutputAvg:
		return []*int{&o.Measure, &o.CountMeasure}
	case OutputVariance:
		return []*int{&o.Measure, &o.CountMeasure, &o.SumSqMeasure}
	case OutputSampleAgg:
		return []*int{&o.Measure}
	case OutputKey, OutputExpr:
		return nil
	}
	// An output kind this function does not know: every index field may
	// be a reference (keeping a measure too many only costs accuracy).
	return []*int{&o.Measure, &o.CountMeasure, &o.SumSqMeasure}
}
