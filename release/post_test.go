package release

import (
	"math/big"
	"strconv"
	"testing"
)

func TestRoundRat(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0", "0"}, {"7", "7"}, {"-7", "-7"},
		{"1/2", "1"}, {"-1/2", "-1"}, {"3/2", "2"}, {"-3/2", "-2"},
		{"128857676190476174687/1000000000000000", "128858"},
		{"4999999/10000000", "0"}, {"5000001/10000000", "1"}, {"-5000001/10000000", "-1"},
		{"20000000000000000000001/2", "10000000000000000000001"},
	} {
		x, _ := new(big.Rat).SetString(c.in)
		want, _ := new(big.Rat).SetString(c.want)
		if got := roundRat(x); got.Cmp(want) != 0 {
			t.Errorf("roundRat(%s) = %s, want %s", c.in, got.RatString(), c.want)
		}
		if x.RatString() != c.in && x.String() != c.in+"/1" {
			t.Errorf("roundRat modified its argument: %s", x.RatString())
		}
	}
}

func TestPerGroupText(t *testing.T) {
	groups := [][]string{{"cardiology"}, {"emergency"}, {""}}
	if got, want := perGroupText([]float64{1.5, 20, 300}, groups), "per group: cardiology ±1.5, emergency ±20, '' ±300"; got != want {
		t.Errorf("perGroupText = %q, want %q", got, want)
	}
	var hs []float64
	var many [][]string
	for i := 0; i < 20; i++ {
		hs = append(hs, float64(10+i))
		many = append(many, []string{"d" + strconv.Itoa(i), "2024"})
	}
	hs[7] = 3
	if got, want := perGroupText(hs, many), "per group ±3 (d7/2024) to ±29 (d19/2024) over 20 groups"; got != want {
		t.Errorf("perGroupText = %q, want %q", got, want)
	}
}
