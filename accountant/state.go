// Privacy-critical: needs DP review.

package accountant

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
)

// Reading composition states back: what the ledger records and verifies.
// A state is the JSON a [Method] returns from Compose; these functions read
// it without composing.

// BasicSums returns the exact decimal basic composition (Σεᵢ, Σδᵢ) of a
// state as decimal text ("0" for nothing spent). The ledger records it on a
// row without a cap, so that a cap added later counts the past.
func BasicSums(st []byte) (epsilon, delta string, err error) {
	s, err := decodeState(st)
	if err != nil {
		return "", "", err
	}
	return orZero(s.BasicEpsilon), orZero(s.BasicDelta), nil
}

// orZero is a state's decimal text, "0" for the empty text of nothing.
func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// LifetimeCovers checks that a lifetime state (window.go) holds at least
// the events and basic sums of the current window's state; "" when it
// does, else what differs.
func LifetimeCovers(lifetime, window []byte) string {
	lt, err1 := decodeState(lifetime)
	w, err2 := decodeState(window)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("unreadable (%v, %v)", err1, err2)
	}
	if lt.Events < w.Events {
		return fmt.Sprintf("has %d events, fewer than the window's %d", lt.Events, w.Events)
	}
	for _, p := range [][3]string{{"ε", lt.BasicEpsilon, w.BasicEpsilon}, {"δ", lt.BasicDelta, w.BasicDelta}} {
		a, b := orZero(p[1]), orZero(p[2])
		x, ok1 := new(big.Rat).SetString(a)
		y, ok2 := new(big.Rat).SetString(b)
		if !ok1 || !ok2 || x.Cmp(y) < 0 {
			return fmt.Sprintf("basic %s %s is below the window's %s", p[0], a, b)
		}
	}
	return ""
}

// CompareStates compares a stored state with a recomputed one: event
// counts, the exact basic and rest sums (to [SameDecimal]), the method and
// the method's own state as JSON values (jsonb normalises the text); ""
// when equal, else what differs. Ledger verification uses it.
func CompareStates(stored, recomputed []byte) string {
	s, err1 := decodeState(stored)
	r, err2 := decodeState(recomputed)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("unreadable state (%v, %v)", err1, err2)
	}
	if s.Events != r.Events {
		return fmt.Sprintf("%d events on the row, %d in the charges", s.Events, r.Events)
	}
	for _, p := range [][3]string{{"basic ε", s.BasicEpsilon, r.BasicEpsilon}, {"basic δ", s.BasicDelta, r.BasicDelta},
		{"rest ε", s.RestEpsilon, r.RestEpsilon}, {"rest δ", s.RestDelta, r.RestDelta}} {
		a, b := orZero(p[1]), orZero(p[2])
		if !SameDecimal(a, b) {
			return fmt.Sprintf("%s %s on the row, %s from the charges", p[0], a, b)
		}
	}
	if s.Events > 0 && s.Method != r.Method {
		return fmt.Sprintf("method %s on the row, %s from the charges", s.Method, r.Method)
	}
	var x, y any
	if len(s.Tight) > 0 {
		if err := json.Unmarshal(s.Tight, &x); err != nil {
			return "unreadable tight state on the row"
		}
	}
	if len(r.Tight) > 0 {
		if err := json.Unmarshal(r.Tight, &y); err != nil {
			return "unreadable recomputed tight state"
		}
	}
	if !reflect.DeepEqual(x, y) {
		return "the method's own state (" + s.Method + ") differs"
	}
	return ""
}
