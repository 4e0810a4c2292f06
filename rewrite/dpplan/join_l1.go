// Privacy-critical: needs DP review.

package dpplan

// setElasticL1 states the direct L1 bound of every measure of an elastic
// join plan (see the file comment). Other plans keep L1 = 0.
func SetElasticL1(p *Plan) {
	if p.Join == nil || p.Join.Shape != JoinKey {
		return
	}
	for i := range p.Measures {
		p.Measures[i].L1 = p.Measures[i].LInf
	}
}
