package ledger

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
)

// TestCompose_RunsEqualOneByOne: composing a row's consecutive charges of
// one method in one Compose call (chargeSet.compose) gives the very bytes
// that one call per charge gives, as Reserve composed them, for every
// method, across method changes, with every kind of event the release path
// charges; and a charge that does not compose is named while the others
// are composed.
func TestCompose_RunsEqualOneByOne(t *testing.T) {
	methods := []string{policy.AccountantPLD, policy.AccountantPLD, policy.AccountantRDP, policy.AccountantPure,
		policy.AccountantAdvanced, policy.AccountantZCDP, policy.AccountantPLD}
	kinds := []func(i int) []accountant.Event{
		func(i int) []accountant.Event { return []accountant.Event{laplace(0.01 + float64(i%7)*0.001)} },
		func(i int) []accountant.Event {
			return []accountant.Event{laplace(0.05), {Mechanism: "partition_threshold", Delta: 1e-9}}
		},
		func(i int) []accountant.Event { return []accountant.Event{gaussian(3+float64(i%3), 0.2, 1e-8)} },
		func(i int) []accountant.Event {
			return []accountant.Event{{Mechanism: "exponential", Epsilon: 0.02}, laplace(1.0 / 3)}
		},
	}
	cs := &chargeSet{byRow: map[[2]string][]*verifyCharge{}, byDataset: map[string][]*verifyCharge{}}
	var id int64
	for r, m := range methods {
		for i := 0; i < 40+r; i++ {
			id++
			c := &verifyCharge{id: id, dataset: "d", analyst: "a", accountant: m, events: kinds[(i+r)%len(kinds)](i)}
			if id == 77 {
				c.events = []accountant.Event{{Mechanism: "laplace", Epsilon: -1}} // does not compose
			}
			cs.byRow[[2]string{"d", "a"}] = append(cs.byRow[[2]string{"d", "a"}], c)
			cs.byDataset["d"] = append(cs.byDataset["d"], c)
		}
	}
	for _, row := range []string{"a", accountant.GlobalAnalyst} {
		methodOf := rowMethodOf(row)
		for _, after := range []int64{0, 13, 150} {
			resets := map[[2]string]int64{{"d", row}: after}
			got, n, errs := cs.compose("d", row, resets, methodOf)
			var want []byte
			var wantN int64
			for _, c := range cs.byRow[[2]string{"d", "a"}] {
				if c.id <= after {
					continue
				}
				m, err := methodOf(c.accountant)
				if err != nil {
					t.Fatal(err)
				}
				st, err := m.Compose(want, c.events)
				if err != nil {
					continue
				}
				want, wantN = st, wantN+1
			}
			if !bytes.Equal(got, want) || n != wantN {
				t.Errorf("row %q after %d: %d charges composed in runs, %d one by one; states equal: %v", row, after, n, wantN, bytes.Equal(got, want))
			}
			wantErrs := 0
			if after < 77 {
				wantErrs = 1
			}
			if len(errs) != wantErrs || (wantErrs == 1 && errs[0][:len("charge 77:")] != "charge 77:") {
				t.Errorf("row %q after %d: errors %q, want charge 77's only", row, after, fmt.Sprint(errs))
			}
		}
	}
}
