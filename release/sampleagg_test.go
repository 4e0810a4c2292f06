package release

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// saRows builds upstream rows "k, S, n" for every level of the plan, with
// the same true average a for every level: S = k·(a − c).
func saRows(plan *rewrite.Plan, a float64, n int) [][]*string {
	var rows [][]*string
	for _, k := range plan.SampleAgg.Levels {
		row := []*string{s(strconv.Itoa(k))}
		for _, m := range plan.Measures {
			if m.Kind == rewrite.MeasureUnits {
				row = append(row, s(strconv.Itoa(n)))
				continue
			}
			row = append(row, s(strconv.FormatFloat(float64(k)*(a-rewrite.SampleMid(m.Lower, m.Upper)), 'f', -1, 64)))
		}
		rows = append(rows, row)
	}
	return rows
}

func TestRunSampleAgg_NoisyCountChoosesK(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT corr(cost, age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 7)
	// 40 000 units: ñ/32 = 1250 → k = 1024 unless the count noise
	// (Laplace scale 1/(0.1·1) = 10) moves ñ by more than 7 232, which
	// has probability below 1e-300.
	up := &fakeUpstream{rows: saRows(plan, 0.4, 40000)}
	res, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if len(up.calls) != 1 || up.calls[0] != plan.SQL {
		t.Fatalf("upstream got %d calls, want exactly the plan's SQL", len(up.calls))
	}
	if !strings.Contains(res.Notice, "sample-and-aggregate over k=1024 blocks (chosen from a noisy unit count") {
		t.Fatalf("notice %q does not name k=1024", res.Notice)
	}
	if !strings.Contains(res.Notice, " (corr, epsilon 0.9); ") {
		t.Fatalf("notice %q does not give corr's ε 0.9", res.Notice)
	}
	// Charged: count 0.1 + corr 0.9 = 1.
	ev := led.reserved[0].Events
	if len(ev) != 2 || math.Abs(ev[0].Epsilon-0.1) > 1e-12 || math.Abs(ev[1].Epsilon-0.9) > 1e-12 || ev[0].Epsilon+ev[1].Epsilon > 1 {
		t.Fatalf("events = %+v, want ε 0.1 (count) and 0.9 (corr) summing to at most 1", ev)
	}
	// Noise on the average: Laplace of scale (u−l)/(kε) = 2/(1024·0.9);
	// P(|Z| > 0.05) = e^{−0.05·460.8} < 1e-10.
	got, err := strconv.ParseFloat(*res.Rows[0][0], 64)
	if err != nil || math.Abs(got-0.4) > 0.05 || res.Columns[0].PGType != "float8" || res.Columns[0].Name != "corr" {
		t.Fatalf("corr = %v (%v), columns %+v; want float8 corr within 0.05 of 0.4", *res.Rows[0][0], err, res.Columns)
	}
	// Cached: the same answer, no new charge.
	again, err := r.Run(context.Background(), Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up})
	if err != nil || !again.Cached || *again.Rows[0][0] != *res.Rows[0][0] || len(led.reserved) != 1 ||
		!strings.Contains(again.Notice, "k=1024") {
		t.Fatalf("second Run = %+v, %v; want the cached answer naming k", again, err)
	}
}

func TestRunSampleAgg_SmallDataAndFixedK(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT regr_r2(cost, age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	// No rows at all (empty table): every level is 0 → the midpoint 0.5,
	// and k is the smallest level.
	r := newTestReleaser(t, &memLedger{limit: 3}, 3)
	res, err := r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: &fakeUpstream{}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.ParseFloat(*res.Rows[0][0], 64)
	if v < 0 || v > 1 || !strings.Contains(res.Notice, "k=2 blocks") {
		t.Fatalf("regr_r2 over no rows = %v, notice %q; want a value in [0, 1] with k=2", v, res.Notice)
	}

	// SET dp.sample_blocks = 64 for a correlation whose sums S say that
	// every block answered 5, beyond corr's range [−1, 1] (the SQL's clip
	// would not allow it: S ≤ k·(u − c) = 64): the released average, 5 plus
	// Gaussian noise of σ ≈ 0.33, is clamped to 1 (post-processing), except
	// with probability below 1e-30.
	plan, err = rewrite.RewriteWith(ds, "SELECT corr(cost, age) FROM visits", rewrite.Options{SampleBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Measures) != 1 || plan.SampleAgg.CountMeasure != -1 || len(plan.SampleAgg.Levels) != 1 {
		t.Fatalf("fixed-k plan = %+v", plan.SampleAgg)
	}
	led := &memLedger{limit: 3}
	r = newTestReleaser(t, led, 4)
	res, err = r.Run(context.Background(), Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: 0.5, Mechanism: policy.MechanismGaussian, Delta: 1e-6, Upstream: &fakeUpstream{rows: saRows(plan, 5, 100)}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := led.reserved[0].Events; len(ev) != 1 || ev[0].Epsilon != 0.5 || ev[0].Delta != 1e-6 || ev[0].Mechanism != "gaussian" {
		t.Fatalf("events = %+v, want one gaussian charge of the whole (0.5, 1e-6)", ev)
	}
	v, _ = strconv.ParseFloat(*res.Rows[0][0], 64)
	if v != 1 || !strings.Contains(res.Notice, "k=64 blocks (fixed by dp.sample_blocks") {
		t.Fatalf("corr = %v, notice %q", v, res.Notice)
	}
}

func TestExplainSampleAgg(t *testing.T) {
	ds := loadPolicy(t)
	plan, err := rewrite.Rewrite(ds, "SELECT corr(cost, age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	all := explainPlan(t, ds, plan, 1, 0, policy.MechanismLaplace)
	for _, want := range []string{"DP Sample-and-aggregate on hospital.visits", "Cost: epsilon=1 ", "noisy count of distinct units (epsilon=0.1",
		"clipped to [-1, 1]", "sensitivity (u−l)/k = 2/k", "sha256($2::bytea || sha256($1::bytea || "} {
		if !strings.Contains(all, want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, all)
		}
	}
	if leak := keyLeak(ds.SampleKey(), all); leak != "" {
		t.Errorf("EXPLAIN shows the key (%s):\n%s", leak, all)
	}
}

// keyPads returns the key and its HMAC pads K⊕ipad, K⊕opad (RFC 2104).
func keyPads(key []byte) [][]byte {
	out := [][]byte{key}
	for _, x := range []byte{0x36, 0x5c} {
		p := make([]byte, 64)
		copy(p, key)
		for i := range p {
			p[i] ^= x
		}
		out = append(out, p)
	}
	return out
}

// keyLeak reports which form of the key (raw bytes, hex, upper-case hex,
// base64 of the key or of a pad) text contains, or "".
func keyLeak(key []byte, text string) string {
	for i, p := range keyPads(key) {
		for _, form := range []string{string(p), hex.EncodeToString(p), strings.ToUpper(hex.EncodeToString(p)),
			base64.StdEncoding.EncodeToString(p), hex.EncodeToString(p[:8])} {
			if strings.Contains(text, form) {
				return fmt.Sprintf("form of key/pad %d", i)
			}
		}
	}
	return ""
}

// TestSampleAgg_KeyOnlyAsBindParameter: the sample key reaches the
// upstream as the bind parameters $1, $2 (its HMAC pads) and nowhere
// else: not in the SQL text, the fingerprint, the cache key, the ledger's
// charge and stored answer, the NOTICE or the rows.
func TestSampleAgg_KeyOnlyAsBindParameter(t *testing.T) {
	ds := loadPolicy(t)
	key := ds.SampleKey()
	if len(key) < 32 {
		t.Fatalf("the test policy has a %d-byte key", len(key))
	}
	plan, err := rewrite.Rewrite(ds, "SELECT corr(cost, age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	led := &memLedger{limit: 3}
	r := newTestReleaser(t, led, 5)
	up := &fakeUpstream{rows: saRows(plan, 0.3, 5000)}
	req := Request{Analyst: "alice", Dataset: ds, Plan: plan, Epsilon: 1, Mechanism: policy.MechanismLaplace, Upstream: up}
	res, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	pads := keyPads(key)
	if len(up.args) != 1 || len(up.args[0]) != 2 || !bytes.Equal(up.args[0][0].([]byte), pads[1]) || !bytes.Equal(up.args[0][1].([]byte), pads[2]) {
		t.Fatalf("upstream bind parameters = %v, want the key's HMAC pads ($1 = K⊕ipad, $2 = K⊕opad)", up.args)
	}
	if !strings.Contains(plan.SQL, "$1::bytea") || !strings.Contains(plan.SQL, "$2::bytea") {
		t.Fatalf("the plan's SQL does not take the key as $1, $2:\n%s", plan.SQL)
	}
	planJSON, _ := json.Marshal(plan)
	charge, _ := json.Marshal(led.reserved)
	var stored []string
	for _, a := range led.released {
		stored = append(stored, string(a))
	}
	for what, text := range map[string]string{
		"SQL": plan.SQL, "fingerprint": plan.Fingerprint, "plan (JSON)": string(planJSON), "plan (%+v)": fmt.Sprintf("%+v %+v", plan, *plan.SampleAgg),
		"cache key": cacheKey(req), "ledger charge": string(charge), "stored answer": strings.Join(stored, "\n"),
		"NOTICE": res.Notice, "result": fmt.Sprint(res.Rows),
	} {
		if leak := keyLeak(key, text); leak != "" {
			t.Errorf("%s holds the sample key (%s)", what, leak)
		}
	}
	// The fingerprint does not depend on the key: the same query under
	// another key hashes the same (so the key is not among its inputs).
	other, err := policy.Load("../internal/testdata/hospital.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.SampleKey(), key) && other.SampleKeyFromFile() == false {
		t.Fatal("two loads without sample_key_file drew the same key")
	}
	p2, err := rewrite.Rewrite(other, "SELECT corr(cost, age) FROM visits")
	if err != nil {
		t.Fatal(err)
	}
	if p2.Fingerprint != plan.Fingerprint || p2.SQL != plan.SQL {
		t.Errorf("fingerprint or SQL depends on the key")
	}
}

// TestRunSampleAgg_Neighbours checks the release side of the neighbour
// bound of sample-and-aggregate: for neighbouring databases D and D' (one
// unit added, which moves the one block it lies in from one end of the
// output range to the other, so S' = S + (u − l), the largest change
// rewrite/sampleagg_test.go allows), the released
// answers A(D), A(D') satisfy P[A(D) > t] ≤ e^ε·P[A(D') > t] and the
// reverse for every threshold t, estimated from n releases each. By the
// Dvoretzky–Kiefer–Wolfowitz inequality (Massart's constant) each empirical
// tail is within η = √(ln(2/α)/(2n)) of the true one for all t at once
// with probability 1 − α, so the test checks P̂ ≤ e^ε(P̂' + η) + η and
// falsely rejects with probability below 4α = 4·10⁻⁶. That the check has
// power is shown on non-neighbours: a change of 3(u − l) must violate it.
func TestRunSampleAgg_Neighbours(t *testing.T) {
	ds := loadPolicy(t)
	const k, epsilon, releases = 16, 1.0, 8000
	plan, err := rewrite.RewriteWith(ds, "SELECT corr(cost, age) FROM visits", rewrite.Options{SampleBlocks: k})
	if err != nil {
		t.Fatal(err)
	}
	o := plan.Outputs[0]
	width := o.Upper - o.Lower
	if o.Lower != -1 || o.Upper != 1 {
		t.Fatalf("output range [%v, %v], want corr's natural range [-1, 1]", o.Lower, o.Upper)
	}
	r := newTestReleaser(t, &memLedger{limit: 3}, 5)
	req := Request{Analyst: "a", Dataset: ds, Plan: plan, Epsilon: epsilon, Mechanism: policy.MechanismLaplace}
	_, stats, err := r.saMechanisms(req)
	if err != nil {
		t.Fatal(err)
	}
	mech := stats[0].mech
	if mech.Epsilon() > epsilon || stats[0].measure.LInf < width {
		t.Fatalf("mechanism ε %v, sensitivity %v; want ε ≤ %v and sensitivity ≥ u − l = %v", mech.Epsilon(), stats[0].measure.LInf, epsilon, width)
	}
	// D: 10 blocks at the upper end, 6 at the lower end (S in centred
	// units); D' moves one block from the lower end to the upper end.
	half := big.NewRat(int64(width/2), 1)
	sOf := func(up int) *big.Rat {
		s := new(big.Rat).Mul(half, big.NewRat(int64(up-(k-up)), 1))
		return s
	}
	draw := func(s *big.Rat) []float64 {
		out := make([]float64, releases)
		for i := range out {
			v, err := mech.AddNoise(s)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := sampleAggAnswer(v, k, o.Lower, o.Upper).Float64()
			out[i] = f
		}
		sort.Float64s(out)
		return out
	}
	eta := math.Sqrt(math.Log(2/1e-6) / (2 * releases))
	tail := func(xs []float64, t float64) float64 {
		return float64(len(xs)-sort.SearchFloat64s(xs, math.Nextafter(t, math.Inf(1)))) / float64(len(xs))
	}
	violates := func(a, b []float64) bool {
		for i := 0; i <= 200; i++ {
			th := o.Lower + width*float64(i)/200
			pa, pb := tail(a, th), tail(b, th)
			if pa > math.Exp(epsilon)*(pb+eta)+eta || (1-pa) > math.Exp(epsilon)*((1-pb)+eta)+eta {
				return true
			}
		}
		return false
	}
	d, d2 := draw(sOf(10)), draw(sOf(11))
	if violates(d, d2) || violates(d2, d) {
		t.Fatalf("neighbouring databases are told apart beyond e^ε = %v", math.Exp(epsilon))
	}
	far := draw(sOf(13)) // three blocks moved: not neighbours
	if !violates(far, d) && !violates(d, far) {
		t.Fatal("a change of 3(u − l) passed the e^ε check: the check has no power")
	}
}
