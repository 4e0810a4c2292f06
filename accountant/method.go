// Privacy-critical: needs DP review.

package accountant

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/policy"
)

// Method is one composition rule: it folds releases (Events) into a running
// state and says what the state guarantees. Implementations are pure (no
// I/O, no logging, no global mutable state) and safe for concurrent use. The
// state is opaque JSON that the ledger stores in the budget row; nil or
// empty means nothing was spent.
//
// Every Method keeps, next to its own state, the exact decimal basic
// composition (Σεᵢ, Σδᵢ) of all events (see the rounding rule in decimal.go),
// and its figure is the better of the two, so no method charges more than
// pure composition. Events a method cannot represent tightly (no noise
// multiplier, or a mechanism it does not model) are composed with its tight
// part by basic composition: (ε_tight(δ′) + Σε_rest, δ′ + Σδ_rest).
type Method interface {
	// Name is the policy's budget.accountant value.
	Name() string
	// Compose returns the state after the events, given the state before.
	// A state written by another method (the steward changed
	// budget.accountant) is carried over conservatively: its events count
	// by basic composition.
	Compose(state []byte, events []Event) ([]byte, error)
	// Spent returns the tightest (ε, δ) the state guarantees with a total δ
	// of at most delta; if no such pair exists, the basic sum (Σεᵢ, Σδᵢ).
	// delta = +Inf means "at the basic δ sum".
	Spent(state []byte, delta float64) (Spent, error)
	// Fits reports whether the state's spending is within limit: there is a
	// guarantee (ε, δ) of the state with ε ≤ limit.Epsilon and δ ≤
	// limit.Delta. The basic part is compared in exact decimal. Either limit
	// may be +Inf (no cap on that coordinate).
	Fits(state []byte, limit Spent) (bool, error)
}

// methodNames are the supported method names in the policy's spelling.
var methodNames = []string{policy.AccountantPure, policy.AccountantAdvanced, policy.AccountantRDP, policy.AccountantZCDP, policy.AccountantPLD}

// MethodNames returns the names of the supported composition methods.
func MethodNames() []string { return append([]string(nil), methodNames...) }

// MethodByName returns the composition method named as in the policy's
// budget.accountant ("" means pure).
func MethodByName(name string) (Method, error) {
	switch name {
	case "", policy.AccountantPure:
		return composer{name: policy.AccountantPure}, nil
	}
	if t := tightByName(name); t != nil {
		return composer{name: name, tight: t}, nil
	}
	return nil, fmt.Errorf("unknown accountant %q; use one of pure, advanced, rdp, zcdp, pld", name)
}

// MethodWithMemo is [MethodByName], with the pld method remembering its
// intermediate distributions in memo (see [PLDMemo]: the same figures, a
// faster next charge). A nil memo is MethodByName.
func MethodWithMemo(name string, memo *PLDMemo) (Method, error) {
	if name == policy.AccountantPLD && memo != nil {
		return composer{name: name, tight: pldAccountant{memo: memo}}, nil
	}
	return MethodByName(name)
}

// tightAccountant is the float part of a method tighter than basic
// composition. raw is its own state (nil: nothing composed).
type tightAccountant interface {
	// absorb composes the events it can represent and returns the others.
	absorb(raw json.RawMessage, events []Event) (json.RawMessage, []Event, error)
	// epsilon returns an upper bound on ε at δ for the composed state
	// (+Inf if none), already rounded up.
	epsilon(raw json.RawMessage, delta float64) (float64, error)
	// delta returns an upper bound on δ at ε for the composed state (1 if
	// none), already rounded up. Only ComposeDelta (planning.go) asks it.
	delta(raw json.RawMessage, epsilon float64) (float64, error)
}

// state is the JSON stored in the ledger's budget.state column.
type state struct {
	Method string `json:"method"`
	Events int64  `json:"events"`
	// Exact decimal basic composition of all events.
	BasicEpsilon string `json:"basic_epsilon"`
	BasicDelta   string `json:"basic_delta"`
	// Exact decimal basic composition of the events the tight part did not
	// absorb.
	RestEpsilon string `json:"rest_epsilon,omitempty"`
	RestDelta   string `json:"rest_delta,omitempty"`
	// Tight is the method's own state.
	Tight json.RawMessage `json:"tight,omitempty"`
}

type composer struct {
	name  string
	tight tightAccountant // nil for pure
}

func (c composer) Name() string { return c.name }

func decodeState(b []byte) (state, error) {
	var s state
	if len(b) == 0 || string(b) == "null" || string(b) == "{}" {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decode ledger state: %w", err)
	}
	return s, nil
}

// CheckEvent rejects events no accountant can compose: ε not finite or
// negative, δ outside [0, 1), a noise multiplier not finite or negative,
// or no privacy parameter at all. Compose calls it on every event.
func CheckEvent(e Event) error {
	if math.IsNaN(e.Epsilon) || math.IsInf(e.Epsilon, 0) || e.Epsilon < 0 {
		return fmt.Errorf("event epsilon %v must be finite and ≥ 0", e.Epsilon)
	}
	if math.IsNaN(e.Delta) || e.Delta < 0 || e.Delta >= 1 {
		return fmt.Errorf("event delta %v must be in [0, 1)", e.Delta)
	}
	if math.IsNaN(e.NoiseMultiplier) || math.IsInf(e.NoiseMultiplier, 0) || e.NoiseMultiplier < 0 {
		return fmt.Errorf("event noise multiplier %v must be finite and ≥ 0", e.NoiseMultiplier)
	}
	if e.Epsilon == 0 && e.Delta == 0 && e.NoiseMultiplier == 0 {
		return fmt.Errorf("event has no privacy parameters (ε = δ = 0 and no noise multiplier)")
	}
	return nil
}

func (c composer) Compose(b []byte, events []Event) ([]byte, error) {
	p, err := c.parse(b)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if err := CheckEvent(e); err != nil {
			return nil, err
		}
	}
	s, be, bd, re, rd := p.s, p.be, p.bd, p.re, p.rd
	if p.foreign {
		// Written by another method: everything so far counts by basic
		// composition, which is valid whatever the method was.
		re.Set(be)
		rd.Set(bd)
		s.Tight = nil
	}
	s.Method = c.name
	rest := events
	if c.tight != nil {
		s.Tight, rest, err = c.tight.absorb(s.Tight, events)
		if err != nil {
			return nil, err
		}
	} else {
		rest = nil
	}
	for _, e := range events {
		be.Add(be, dec(e.Epsilon))
		bd.Add(bd, dec(e.Delta))
	}
	for _, e := range rest {
		re.Add(re, dec(e.Epsilon))
		rd.Add(rd, dec(e.Delta))
	}
	s.Events += int64(len(events))
	s.BasicEpsilon, s.BasicDelta = decString(be), decString(bd)
	if c.tight != nil {
		s.RestEpsilon, s.RestDelta = decString(re), decString(rd)
	} else {
		s.RestEpsilon, s.RestDelta = "", ""
	}
	return json.Marshal(s)
}

// parsed is a decoded state with its exact sums.
type parsed struct {
	s              state
	be, bd, re, rd *big.Rat
	foreign        bool // written by another method
}

func (c composer) parse(b []byte) (parsed, error) {
	var p parsed
	var err error
	if p.s, err = decodeState(b); err != nil {
		return p, err
	}
	for _, x := range []struct {
		dst **big.Rat
		s   string
	}{{&p.be, p.s.BasicEpsilon}, {&p.bd, p.s.BasicDelta}, {&p.re, p.s.RestEpsilon}, {&p.rd, p.s.RestDelta}} {
		if *x.dst, err = parseDec(x.s); err != nil {
			return p, err
		}
	}
	if p.s.Method != c.name && p.s.Events > 0 {
		p.foreign = true
	}
	return p, nil
}

// tightPair returns the tight guarantee (ε, δ) at total δ delta, or ok =
// false when the tight part cannot reach that δ.
func (c composer) tightPair(p parsed, delta float64) (Spent, bool, error) {
	if c.tight == nil || p.foreign || math.IsInf(delta, 0) || math.IsNaN(delta) {
		return Spent{}, false, nil
	}
	restDelta := ratFloatUp(p.rd)
	restEps := ratFloatUp(p.re)
	if len(p.s.Tight) == 0 {
		return Spent{Epsilon: restEps, Delta: restDelta}, restDelta <= delta, nil
	}
	// δ′ = δ − Σδ_rest, computed so that δ′ + Σδ_rest ≤ δ.
	dPrime := delta - restDelta
	if dPrime <= 0 {
		return Spent{}, false, nil
	}
	eps, err := c.tight.epsilon(p.s.Tight, dPrime)
	if err != nil {
		return Spent{}, false, err
	}
	if math.IsInf(eps, 1) {
		return Spent{}, false, nil
	}
	return Spent{Epsilon: roundUp(eps + restEps), Delta: delta}, true, nil
}

func (c composer) Spent(b []byte, delta float64) (Spent, error) {
	sp, _, err := c.evaluate(b, Spent{Epsilon: math.Inf(1), Delta: delta})
	return sp, err
}

func (c composer) Fits(b []byte, limit Spent) (bool, error) {
	_, fits, err := c.evaluate(b, limit)
	return fits, err
}

// evaluate computes Spent(b, limit.Delta) and Fits(b, limit) with one
// evaluation of the tight part.
func (c composer) evaluate(b []byte, limit Spent) (Spent, bool, error) {
	if math.IsNaN(limit.Epsilon) || math.IsNaN(limit.Delta) || limit.Epsilon < 0 || limit.Delta < 0 {
		return Spent{}, false, fmt.Errorf("bad budget limit (%v, %v)", limit.Epsilon, limit.Delta)
	}
	p, err := c.parse(b)
	if err != nil {
		return Spent{}, false, err
	}
	basic := Spent{Epsilon: ratFloat(p.be), Delta: ratFloat(p.bd)}
	delta := limit.Delta
	if math.IsInf(delta, 1) {
		delta = ratFloatUp(p.bd)
	}
	basicDeltaOK := p.bd.Cmp(dec(delta)) <= 0
	basicFits := basicDeltaOK && (math.IsInf(limit.Epsilon, 1) || p.be.Cmp(dec(limit.Epsilon)) <= 0)
	t, ok, err := c.tightPair(p, delta)
	if err != nil {
		return Spent{}, false, err
	}
	spent := basic
	if ok && (!basicDeltaOK || t.Epsilon < basic.Epsilon) {
		spent = t
	}
	tightFits := ok && t.Epsilon <= limit.Epsilon && t.Delta <= limit.Delta
	return spent, basicFits || tightFits, nil
}

// Evaluate returns m.Spent(st, limit.Delta) and m.Fits(st, limit) with one
// evaluation of the method's tight part (the ledger checks and records a
// charge with it).
func Evaluate(m Method, st []byte, limit Spent) (Spent, bool, error) {
	if c, ok := m.(composer); ok {
		return c.evaluate(st, limit)
	}
	sp, err := m.Spent(st, limit.Delta)
	if err != nil {
		return Spent{}, false, err
	}
	fits, err := m.Fits(st, limit)
	return sp, fits, err
}
