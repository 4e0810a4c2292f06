package accountant

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/policy"
)

func mustCompose(t *testing.T, m Method, st []byte, events ...Event) []byte {
	t.Helper()
	out, err := m.Compose(st, events)
	if err != nil {
		t.Fatalf("Compose: %v", err)
	}
	return out
}

func TestPure_ExactDecimal(t *testing.T) {
	m, err := MethodByName(policy.AccountantPure)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		events   []float64
		limit    float64
		wantFits bool
		wantEps  float64
	}{
		{"30 × 0.1 on 3", repeat(0.1, 30), 3, true, 3},
		{"31 × 0.1 on 3", repeat(0.1, 31), 3, false, 3.1},
		{"0.1 + 0.2 on 0.3", []float64{0.1, 0.2}, 0.3, true, 0.3},
		{"0.1 + 0.2 + 1e-17 on 0.3", []float64{0.1, 0.2, 1e-17}, 0.3, false, 0.3},
		{"tiny overspend of 1e-300", []float64{1, 1e-300}, 1, false, 1},
		{"7 × 1/7 shortest decimals", repeat(1.0/7, 7), 1, true, 1}, // 7 × 0.14285714285714285 = 0.99999999999999995 ≤ 1
		{"10 × 0.3 on 3", repeat(0.3, 10), 3, true, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st []byte
			for _, e := range tc.events {
				st = mustCompose(t, m, st, Event{Epsilon: e})
			}
			got, err := m.Fits(st, Spent{Epsilon: tc.limit})
			if err != nil || got != tc.wantFits {
				t.Fatalf("Fits = %v, %v; want %v", got, err, tc.wantFits)
			}
			s, err := m.Spent(st, 0)
			if err != nil || s.Epsilon != tc.wantEps || s.Delta != 0 {
				t.Fatalf("Spent = %+v, %v; want ε=%v", s, err, tc.wantEps)
			}
		})
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

func TestPure_Delta(t *testing.T) {
	m, _ := MethodByName("")
	st := mustCompose(t, m, nil, Event{Mechanism: policy.MechanismGaussian, Epsilon: 0.5, Delta: 1e-7, NoiseMultiplier: 3},
		Event{Epsilon: 0.25, Delta: 2e-7})
	s, _ := m.Spent(st, 1e-6)
	if s != (Spent{0.75, 3e-7}) {
		t.Fatalf("Spent = %+v, want (0.75, 3e-7)", s)
	}
	for _, tc := range []struct {
		limit Spent
		want  bool
	}{
		{Spent{0.75, 3e-7}, true},
		{Spent{0.75, math.Nextafter(3e-7, 0)}, false},
		{Spent{math.Nextafter(0.75, 0), 1}, false},
		{Spent{math.Inf(1), 3e-7}, true},
		{Spent{1, math.Inf(1)}, true},
	} {
		if got, err := m.Fits(st, tc.limit); err != nil || got != tc.want {
			t.Errorf("Fits(%+v) = %v, %v; want %v", tc.limit, got, err, tc.want)
		}
	}
}

func TestStatus_Remaining(t *testing.T) {
	s := Status{Spent: Spent{2.9, 1e-7}, Limit: Spent{3, 1e-6}}
	if got, want := s.Remaining(), (Spent{0.1, 9e-7}); got != want {
		t.Fatalf("Remaining = %+v, want %+v", got, want)
	}
	s = Status{Spent: Spent{4, 0}, Limit: Spent{3, 0}}
	if got := s.Remaining(); got != (Spent{}) {
		t.Fatalf("Remaining when overspent = %+v, want zero", got)
	}
}

func TestMethodByName(t *testing.T) {
	if _, err := MethodByName("magic"); err == nil {
		t.Fatal("MethodByName(magic) did not fail")
	}
	m, err := MethodByName("")
	if err != nil || m.Name() != "pure" {
		t.Fatalf("MethodByName(\"\") = %v, %v; want pure", m, err)
	}
}

func TestComposeEpsilon_Pure(t *testing.T) {
	got, err := ComposeEpsilon("pure", []Event{laplace(0.1), laplace(0.2)}, 0)
	if err != nil || got != 0.3 {
		t.Fatalf("ComposeEpsilon = %v, %v; want 0.3", got, err)
	}
	got, _ = ComposeEpsilon("pure", []Event{{Epsilon: 0.1, Delta: 1e-6}}, 0)
	if !math.IsInf(got, 1) {
		t.Fatalf("ComposeEpsilon with δ over the target = %v, want +Inf", got)
	}
	if _, err := ComposeEpsilon("pure", nil, math.NaN()); err == nil {
		t.Fatal("ComposeEpsilon(δ=NaN) did not fail")
	}
}
