package numfmt

import (
	"math"
	"testing"
)

func TestFigure(t *testing.T) {
	sum := 0.0
	for range 16 {
		sum += 0.1 // 1.6000000000000003 in float64
	}
	for x, want := range map[float64]string{
		sum: "1.6", 3 - sum: "1.4", 0.1 + 0.2: "0.3", 1e-6: "1e-06", 3: "3", 0: "0",
		2.5e-7: "2.5e-07", math.Inf(1): "unlimited", 123456.789: "123456.789",
	} {
		if got := Figure(x); got != want {
			t.Errorf("Figure(%v) = %q, want %q", x, got, want)
		}
	}
}
