package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// planned runs `dpproxy accountant …` in-process and returns the figure on
// the last line of stdout.
func planned(t *testing.T, args ...string) float64 {
	t.Helper()
	code, out, errOut := runCLI(t, "", append([]string{"accountant"}, args...)...)
	if code != 0 {
		t.Fatalf("dpproxy accountant %v: exit %d, stderr %q", args, code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	x, err := strconv.ParseFloat(lines[len(lines)-1], 64)
	if err != nil {
		t.Fatalf("dpproxy accountant %v: last line %q is not a number", args, lines[len(lines)-1])
	}
	return x
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.8g, want %.8g ± %g", what, got, want, tol)
	}
}

// Whole-workload figures of /work/shared/reference/ACCOUNTING.md ("Whole-
// workload figures"): k = 100 Laplace queries, ε₀ = 0.1 each (scale 10 over
// the L1 sensitivity), δ = 1e-6: pure 10.0, zCDP via ε²/2 5.2215, advanced
// at most the DRV figure 6.3082 (the Kairouz–Oh–Viswanath bound is
// tighter); the ordering pld ≤ rdp ≤ zcdp ≤ advanced ≤ pure. pld and rdp
// compose each release as randomized response, the loss of the discrete
// Laplace of one grid step (SECURITY.md gap 11): pld exactly 4.7746 (a
// binomial sum), not the continuous Laplace's published 4.690–4.695; rdp
// 5.0732 on its grid (randomized response's RDP under the improved
// conversion: 5.07311 on a fine grid, accountant's
// TestWorkload_Laplace100), not the continuous Laplace's published 4.9842.
func TestAccountantCLI_LaplaceWorkload(t *testing.T) {
	got := map[string]float64{}
	for _, m := range []string{"pure", "advanced", "rdp", "zcdp", "pld"} {
		got[m] = planned(t, "epsilon", "--method", m, "--delta", "1e-6", "--laplace", "10:100")
	}
	within(t, "pure", got["pure"], 10, 1e-12)
	within(t, "rdp", got["rdp"], 5.0732, 1e-4)
	within(t, "zcdp", got["zcdp"], 5.2215, 1e-4)
	if got["pld"] < 4.7740 || got["pld"] > 4.7750 {
		t.Errorf("pld = %v, want randomized response's exact 4.7746", got["pld"])
	}
	if got["advanced"] > 6.3082 {
		t.Errorf("advanced = %v, want at most the DRV figure 6.3082", got["advanced"])
	}
	order := []string{"pld", "rdp", "zcdp", "advanced", "pure"}
	for i := 1; i < len(order); i++ {
		if got[order[i-1]] > got[order[i]] {
			t.Errorf("%s = %v > %s = %v: ordering of ACCOUNTING.md broken", order[i-1], got[order[i-1]], order[i], got[order[i]])
		}
	}
	// Split runs compose like one run: 10:60 + 10:40 is 10:100.
	if s := planned(t, "epsilon", "--method", "rdp", "--delta", "1e-6", "--laplace", "10:60", "--laplace", "10:40"); s != got["rdp"] {
		t.Errorf("rdp of 10:60 + 10:40 = %v, want %v as for 10:100", s, got["rdp"])
	}
}

// ACCOUNTING.md, same section: k = 1000 Gaussian queries, ρ = 0.001 each
// (σ/Δ = √500 = 22.360679775), δ = 1e-6: naive (δ₀ = 1e-9 each) 231.71,
// RDP improved = zCDP tight 7.7662 (the continuous Gaussians' exact
// 7.2861 does not bound the discrete noise, so pld takes the RDP bound).
func TestAccountantCLI_GaussianWorkload(t *testing.T) {
	got := map[string]float64{}
	for _, m := range []string{"pure", "advanced", "rdp", "zcdp", "pld"} {
		got[m] = planned(t, "epsilon", "--method", m, "--delta", "1e-6", "--gaussian", "22.360679775:1000")
	}
	within(t, "pure (naive)", got["pure"], 231.71, 0.01)
	within(t, "zcdp", got["zcdp"], 7.7662, 1e-4)
	within(t, "rdp", got["rdp"], 7.7662, 1e-3)
	within(t, "pld", got["pld"], 7.7662, 1e-3)
	if !(got["pld"] <= got["rdp"]*(1+1e-6) && got["pld"] <= got["zcdp"]*(1+1e-5) && got["rdp"] <= got["advanced"] &&
		got["zcdp"] <= got["advanced"] && got["advanced"] <= got["pure"]) {
		t.Errorf("ordering pld ≤ rdp, zcdp ≤ advanced ≤ pure broken: %v", got)
	}
	// With δ₀ = 5e-10 per release the advanced bound has slack δ′ left and
	// beats naive composition (optimal (ε₀, δ₀) composition: 63.13 is a
	// lower bound for any (ε₀, δ₀) accountant).
	adv := planned(t, "epsilon", "--method", "advanced", "--delta", "1e-6", "--gaussian", "22.360679775:1000", "--gaussian-delta", "5e-10")
	if adv >= got["pure"] || adv < 63.13 {
		t.Errorf("advanced with δ₀ = 5e-10 = %v, want in [63.13, %v)", adv, got["pure"])
	}
}

// A method that cannot reach the target δ prints +Inf (still a number for
// strconv.ParseFloat): pure composition of one Gaussian release with δ₀ =
// 1e-5 is not (ε, 1e-6)-DP for any ε; rdp is, from the noise multiplier.
func TestAccountantCLI_Unreachable(t *testing.T) {
	if e := planned(t, "epsilon", "--method", "pure", "--delta", "1e-6", "--gaussian", "3:1", "--gaussian-delta", "1e-5"); !math.IsInf(e, 1) {
		t.Errorf("pure ε = %v, want +Inf", e)
	}
	if e := planned(t, "epsilon", "--method", "rdp", "--delta", "1e-6", "--gaussian", "3:1", "--gaussian-delta", "1e-5"); math.IsInf(e, 0) || e <= 0 {
		t.Errorf("rdp ε = %v, want finite", e)
	}
	// Laplace releases alone at δ = 0: basic composition.
	if e := planned(t, "epsilon", "--method", "pld", "--delta", "0", "--laplace", "10:5"); e != 0.5 {
		t.Errorf("pld ε of 5 × ε₀ = 0.1 at δ = 0 = %v, want 0.5", e)
	}
}

// ACCOUNTING.md known answer 3 (dp_accounting pld_privacy_accountant_test.py):
// Gaussian σ = √3, Δ = 1, composed 3×: δ(ε=1) = 0.126936 for continuous
// noise; the delta mode. pld bounds the discrete noise by the RDP bound,
// as rdp does: above the continuous figure, and equal to rdp's.
func TestAccountantCLI_Delta(t *testing.T) {
	p := planned(t, "delta", "--method", "pld", "--epsilon", "1", "--gaussian", "1.7320508075688772:3")
	r := planned(t, "delta", "--method", "rdp", "--epsilon", "1", "--gaussian", "1.7320508075688772:3")
	if p < 0.126936 || math.Abs(p-r) > 1e-6*r {
		t.Errorf("pld δ(1) = %v: want rdp's %v, above the continuous 0.126936", p, r)
	}
	// Pure: 10 Laplace releases of ε₀ = 0.1 are (1, 0)-DP and not (0.9, δ)
	// for any δ < 1 by basic composition.
	if d := planned(t, "delta", "--method", "pure", "--epsilon", "1", "--laplace", "10:10"); d != 0 {
		t.Errorf("pure δ at ε = 1 of 10 × ε₀ = 0.1 = %v, want 0", d)
	}
	if d := planned(t, "delta", "--method", "pure", "--epsilon", "0.9", "--laplace", "10:10"); d != 1 {
		t.Errorf("pure δ at ε = 0.9 of 10 × ε₀ = 0.1 = %v, want 1 (nothing provable)", d)
	}
	// Tighter methods prove a δ < 1 there.
	if d := planned(t, "delta", "--method", "pld", "--epsilon", "0.9", "--laplace", "10:10"); !(d > 0 && d < 0.1) {
		t.Errorf("pld δ at ε = 0.9 of 10 × ε₀ = 0.1 = %v, want in (0, 0.1)", d)
	}
}

func TestAccountantCLI_BadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"accountant"}, "name a subcommand"},
		{"unknown subcommand", []string{"accountant", "rho"}, `unknown subcommand "rho"`},
		{"no method", []string{"accountant", "epsilon", "--delta", "1e-6", "--laplace", "10:1"}, "--method is required"},
		{"unknown method", []string{"accountant", "epsilon", "--method", "moments", "--delta", "1e-6", "--laplace", "10:1"}, `unknown --method "moments"`},
		{"no delta", []string{"accountant", "epsilon", "--method", "pure", "--laplace", "10:1"}, "--delta D is required"},
		{"delta too big", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1", "--laplace", "10:1"}, "must be in [0, 1)"},
		{"negative delta", []string{"accountant", "epsilon", "--method", "pure", "--delta", "-1", "--laplace", "10:1"}, "must be in [0, 1)"},
		{"delta not a number", []string{"accountant", "epsilon", "--method", "pure", "--delta", "tiny", "--laplace", "10:1"}, "invalid value"},
		{"no workload", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6"}, "at least one --laplace"},
		{"no colon", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--laplace", "10"}, "is not SCALE:COUNT"},
		{"zero scale", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--laplace", "0:5"}, "must be a positive number"},
		{"negative scale", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--gaussian", "-2:5"}, "must be a positive number"},
		{"zero count", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--laplace", "10:0"}, "must be an integer from 1"},
		{"fractional count", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--laplace", "10:2.5"}, "must be an integer from 1"},
		{"too many", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--laplace", "10:1000000", "--laplace", "10:1"}, "at most 1000000"},
		{"gaussian at delta 0", []string{"accountant", "epsilon", "--method", "pure", "--delta", "0", "--gaussian", "3:1"}, "positive --delta"},
		{"epsilon flag in epsilon mode", []string{"accountant", "epsilon", "--method", "pure", "--epsilon", "1", "--laplace", "10:1"}, "flag provided but not defined: -epsilon"},
		{"no epsilon", []string{"accountant", "delta", "--method", "pure", "--laplace", "10:1"}, "--epsilon E is required"},
		{"negative epsilon", []string{"accountant", "delta", "--method", "pure", "--epsilon", "-1", "--laplace", "10:1"}, "finite number ≥ 0"},
		{"gaussian-epsilon without gaussian", []string{"accountant", "delta", "--method", "pure", "--epsilon", "1", "--laplace", "10:1", "--gaussian-epsilon", "1"}, "without --gaussian"},
		{"stray argument", []string{"accountant", "epsilon", "--method", "pure", "--delta", "1e-6", "--laplace", "10:1", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", tc.args...)
			if code == 0 {
				t.Fatalf("exit status 0, stdout %q; want a failure", out)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			first, _, _ := strings.Cut(errOut, "\n")
			if !strings.HasPrefix(first, "dpproxy: ") || !strings.Contains(first, tc.want) {
				t.Errorf("first stderr line = %q, want dpproxy: …%s…", first, tc.want)
			}
		})
	}
}
