// Privacy-critical: needs DP review.

package release

import (
	"math/big"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/dpplan"
)

// firstK keeps, of the groups partition selection passes, the first limit
// by key (lessKeys), whatever order they come in: a heap whose top is the
// largest kept key, replaced when a smaller one comes. Which groups are
// kept is a function of the selected set alone (post-processing of the
// selection), and only kept groups are measured, so an answer's
// measurements are bounded before its charge (dpplan.MaxSelectedGroups).
// passed counts every group offered.
type firstK[T any] struct {
	keys   []dpplan.Key
	limit  int
	passed int
	kept   []keyed[T]
	heap   []int // indices into kept; heap[0] holds the largest key
}

// keyed is one kept group: its keys (with their numbers parsed once, for
// the comparisons) and what the caller keeps of it.
type keyed[T any] struct {
	key []string
	num []*big.Rat // a numeric key's value, nil when not a number
	v   T
}

// parseKeys parses the numeric keys of key (lessKeys' order).
func parseKeys(keys []dpplan.Key, key []string) []*big.Rat {
	num := make([]*big.Rat, len(keys))
	for i, k := range keys {
		if k.Type.Numeric() {
			if x, ok := new(big.Rat).SetString(key[i]); ok {
				num[i] = x
			}
		}
	}
	return num
}

// lessParsed is lessKeys over keys parsed by parseKeys: numbers
// numerically (equal numbers by their text), everything else by text.
func lessParsed(a, b []string, an, bn []*big.Rat) bool {
	for i := range a {
		c := 0
		if an[i] != nil && bn[i] != nil {
			c = an[i].Cmp(bn[i])
		}
		if c == 0 {
			c = strings.Compare(a[i], b[i])
		}
		if c != 0 {
			return c < 0
		}
	}
	return false
}

func newFirstK[T any](plan *dpplan.Plan) *firstK[T] {
	return &firstK[T]{keys: plan.Keys, limit: dpplan.MaxSelectedGroups(plan)}
}

// offer takes a selected group: its value is made (make) and kept when the
// group is among the first limit by key so far.
func (f *firstK[T]) offer(key []string, make func() (T, error)) error {
	f.passed++
	num := parseKeys(f.keys, key)
	slot := len(f.kept)
	if slot >= f.limit {
		top := f.kept[f.heap[0]]
		if !lessParsed(key, top.key, num, top.num) {
			return nil // selected, but after the first limit by key
		}
		slot = f.heap[0]
	}
	v, err := make()
	if err != nil {
		return err
	}
	if slot == len(f.kept) {
		f.kept = append(f.kept, keyed[T]{key, num, v})
		f.heap = append(f.heap, slot)
		f.up(len(f.heap) - 1)
		return nil
	}
	f.kept[slot] = keyed[T]{key, num, v}
	f.down(0)
	return nil
}

// sorted returns the kept groups in key order; a key kept twice (the
// same texts) is an internal error.
func (f *firstK[T]) sorted() ([]keyed[T], error) {
	out := append([]keyed[T](nil), f.kept...)
	sort.Slice(out, func(a, b int) bool { return lessParsed(out[a].key, out[b].key, out[a].num, out[b].num) })
	for i := 1; i < len(out); i++ {
		if !lessParsed(out[i-1].key, out[i].key, out[i-1].num, out[i].num) {
			return nil, errGroupTwice()
		}
	}
	return out, nil
}

// larger reports whether heap entry i's key is after entry j's.
func (f *firstK[T]) larger(i, j int) bool {
	a, b := f.kept[f.heap[j]], f.kept[f.heap[i]]
	return lessParsed(a.key, b.key, a.num, b.num)
}

func (f *firstK[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !f.larger(i, parent) {
			return
		}
		f.heap[i], f.heap[parent] = f.heap[parent], f.heap[i]
		i = parent
	}
}

func (f *firstK[T]) down(i int) {
	for {
		big := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(f.heap) && f.larger(c, big) {
				big = c
			}
		}
		if big == i {
			return
		}
		f.heap[i], f.heap[big] = f.heap[big], f.heap[i]
		i = big
	}
}
