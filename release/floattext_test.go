package release

import (
	"math/big"
	"testing"
)

// TestFloatText: float8 and float4 outputs print as PostgreSQL 15 prints
// them (the expected texts were read from PostgreSQL 15.20: SELECT
// 278683990.33000165::float8, 1e15::float8, …, 1234567::real).
func TestFloatText(t *testing.T) {
	for _, c := range []struct {
		in   string
		bits int
		want string
	}{
		{"278683990.33000165", 64, "278683990.33000165"},
		{"1e15", 64, "1e+15"},
		{"123456789012345680", 64, "1.2345678901234568e+17"},
		{"0.0001", 64, "0.0001"},
		{"0.00001", 64, "1e-05"},
		{"-0.00000025", 64, "-2.5e-07"},
		{"1393.41995165", 64, "1393.41995165"},
		{"100", 64, "100"},
		{"999999999999999", 64, "999999999999999"},
		{"0", 64, "0"},
		{"1234567", 32, "1.234567e+06"},
		{"123456", 32, "123456"},
		{"0.1", 32, "0.1"},
	} {
		r, _ := new(big.Rat).SetString(c.in)
		if got := floatText(r, c.bits); got != c.want {
			t.Errorf("floatText(%s, %d) = %s, want %s", c.in, c.bits, got, c.want)
		}
	}
}
