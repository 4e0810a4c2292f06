package accountant

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

// BenchmarkReserveCompose measures what Reserve computes for one more
// charge on a budget row that already holds 10,000 charges: Compose, then
// Spent and Fits at the limit (through evaluate, as Reserve does).
// Workloads: identical Laplace charges, a mix of Laplace ε values and
// Gaussians, and 1,000 Laplace charges (where pld still computes its
// distribution). Each iteration charges one more event onto the state the
// previous one produced, with the method as a Ledger holds it (pld with its
// memo, warmed by evaluating the starting state, as the previous charge
// would have); "pld-cold" is pld without the memo (every charge composes
// from scratch).
func BenchmarkReserveCompose(b *testing.B) {
	workloads := map[string]func(i int) Event{
		"laplace": func(int) Event { return laplace(0.01) },
		// 1,000 charges of 0.1: small enough for the PLD to be computed.
		"laplace1000": func(int) Event { return laplace(0.1) },
		"mixed": func(i int) Event {
			if i%2 == 0 {
				return gaussian(20, 0.3, 1e-9)
			}
			return laplace([]float64{0.005, 0.01, 0.02, 0.05}[i%4/2+2*(i%8/4)])
		},
	}
	for _, wname := range []string{"laplace", "mixed", "laplace1000"} {
		for _, name := range append(MethodNames(), "pld-cold") {
			b.Run(wname+"/"+name, func(b *testing.B) {
				var m Method
				var err error
				if name == "pld-cold" {
					m, err = MethodByName(policy.AccountantPLD)
				} else {
					m, err = MethodWithMemo(name, NewPLDMemo(DefaultPLDMemoPoints))
				}
				if err != nil {
					b.Fatal(err)
				}
				var events []Event
				n := 10000
				if wname == "laplace1000" {
					n = 1000
				}
				for i := 0; i < n; i++ {
					events = append(events, workloads[wname](i))
				}
				st, err := m.Compose(nil, events)
				if err != nil {
					b.Fatal(err)
				}
				limit := Spent{Epsilon: math.Inf(1), Delta: 1e-6}
				if _, _, err := Evaluate(m, st, limit); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if st, err = m.Compose(st, []Event{workloads[wname](n + i)}); err != nil {
						b.Fatal(err)
					}
					if _, _, err := Evaluate(m, st, limit); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
