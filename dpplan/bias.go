// Privacy-critical: needs DP review.

package dpplan

import (
	"github.com/dpproxy/dpproxy/policy"
)

// SummedColumns are the plain columns with numeric bounds that the plan's
// sums, averages and variances clamp (not those of expressions), once
// each, in the order the measures first use them: the columns whose
// clamped rows the bias estimate counts, and the candidates of auto
// clipping (rewrite/autoclip.go).
func SummedColumns(t *policy.Table, p *Plan) []*policy.Column {
	var out []*policy.Column
	seen := map[string]bool{}
	for _, m := range p.Measures {
		if (m.Kind != MeasureSum && m.Kind != MeasureSumSq) || m.Expr != nil || m.Column == "" || seen[m.Column] {
			continue
		}
		c, ok := t.Columns[m.Column]
		if !ok || !c.HasBounds || (c.Type != policy.TypeInt && c.Type != policy.TypeNumeric && c.Type != policy.TypeFloat) {
			continue
		}
		seen[m.Column] = true
		out = append(out, c)
	}
	return out
}

// WeightsOnly reports whether the plan bounds contributions by weights
// alone (bounds.go): no join, no sample-and-aggregate, no private keys,
// no quantiles. Only such plans carry a bias estimate or auto bounds.
func WeightsOnly(p *Plan) bool {
	return p.Join == nil && p.SampleAgg == nil && !p.PrivateGroups() && !p.HasQuantile()
}

// HasQuantile reports whether one of p's measures is a quantile.
func (p *Plan) HasQuantile() bool {
	for _, m := range p.Measures {
		if m.Kind == MeasureQuantile {
			return true
		}
	}
	return false
}

// HasBias reports whether the plan carries a bias estimate; its measure is
// then the last one.
func (p *Plan) HasBias() bool {
	return len(p.Measures) > 0 && p.Measures[len(p.Measures)-1].Kind == MeasureRemoved
}
