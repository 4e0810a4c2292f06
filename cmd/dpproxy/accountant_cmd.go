package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/policy"
)

// maxPlannedReleases bounds the releases one planning command composes.
const maxPlannedReleases = 1_000_000

// releaseFlag collects repeated --laplace B:K or --gaussian S:K values.
type releaseFlag struct {
	name string
	runs []releaseRun
}

type releaseRun struct {
	scale float64 // noise scale over sensitivity: b/Δ₁ or σ/Δ₂
	count int
}

func (f *releaseFlag) String() string { return "" }

func (f *releaseFlag) Set(v string) error {
	s, k, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("%q is not SCALE:COUNT (e.g. 10:100)", v)
	}
	scale, err := strconv.ParseFloat(s, 64)
	if err != nil || !(scale > 0) || math.IsInf(scale, 0) {
		return fmt.Errorf("scale %q in %q must be a positive number (noise scale over sensitivity)", s, v)
	}
	n, err := strconv.Atoi(k)
	if err != nil || n < 1 || n > maxPlannedReleases {
		return fmt.Errorf("count %q in %q must be an integer from 1 to %d", k, v, maxPlannedReleases)
	}
	f.runs = append(f.runs, releaseRun{scale: scale, count: n})
	return nil
}

func (f *releaseFlag) total() int {
	n := 0
	for _, r := range f.runs {
		n += r.count
	}
	return n
}

// cmdAccountant is the planning tool: what a workload costs under each
// composition method, with the figures the ledger would record.
//
//	dpproxy accountant epsilon --method M --delta D [--laplace B:K]... [--gaussian S:K]...
//	dpproxy accountant delta --method M --epsilon E [--laplace B:K]... [--gaussian S:K]...
//
// A Laplace release of scale B (over its L1 sensitivity) is ε₀ = 1/B, δ = 0.
// A Gaussian release of σ/Δ₂ = S is composed exactly by rdp, zcdp and pld
// from S; pure and advanced need an (ε₀, δ₀) pair on its exact curve
// (Balle–Wang): in epsilon mode δ₀ = --gaussian-delta (default D divided by
// the number of Gaussian releases, the naive split of ACCOUNTING.md), in
// delta mode ε₀ = --gaussian-epsilon (default: what E leaves after the
// Laplace releases, shared equally).
func cmdAccountant(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("accountant: name a subcommand (epsilon or delta)")
	}
	mode := args[0]
	if mode != "epsilon" && mode != "delta" {
		return usagef("accountant: unknown subcommand %q (want epsilon or delta)", mode)
	}
	fs := flag.NewFlagSet("accountant "+mode, flag.ContinueOnError)
	method := fs.String("method", "", "composition method: "+strings.Join(accountant.MethodNames(), ", "))
	lap := &releaseFlag{name: "laplace"}
	gau := &releaseFlag{name: "gaussian"}
	fs.Var(lap, "laplace", "B:K — K Laplace releases of scale B over their L1 sensitivity (ε₀ = 1/B); repeatable")
	fs.Var(gau, "gaussian", "S:K — K Gaussian releases of σ over their L2 sensitivity = S; repeatable")
	var target, per *float64
	if mode == "epsilon" {
		target = fs.Float64("delta", math.NaN(), "total δ at which to report ε")
		per = fs.Float64("gaussian-delta", math.NaN(), "δ₀ of each Gaussian release for pure/advanced (default: --delta / number of Gaussian releases)")
	} else {
		target = fs.Float64("epsilon", math.NaN(), "total ε at which to report δ")
		per = fs.Float64("gaussian-epsilon", math.NaN(), "ε₀ of each Gaussian release for pure/advanced (default: what --epsilon leaves after the Laplace releases, shared equally)")
	}
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if *method == "" {
		return usagef("%s: --method is required (one of %s)", fs.Name(), strings.Join(accountant.MethodNames(), ", "))
	}
	if !slices.Contains(accountant.MethodNames(), *method) {
		return usagef("%s: unknown --method %q (want one of %s)", fs.Name(), *method, strings.Join(accountant.MethodNames(), ", "))
	}
	nL, nG := lap.total(), gau.total()
	if nL+nG == 0 {
		return usagef("%s: describe the workload with at least one --laplace B:K or --gaussian S:K", fs.Name())
	}
	if nL+nG > maxPlannedReleases {
		return usagef("%s: %d releases in all; at most %d", fs.Name(), nL+nG, maxPlannedReleases)
	}
	lapEps := 0.0
	events := make([]accountant.Event, 0, nL+nG)
	for _, r := range lap.runs {
		e := accountant.Event{Mechanism: policy.MechanismLaplace, Epsilon: 1 / r.scale, NoiseMultiplier: r.scale}
		for range r.count {
			events = append(events, e)
			lapEps += e.Epsilon
		}
	}

	if mode == "epsilon" {
		delta := *target
		if math.IsNaN(delta) {
			return usagef("%s: --delta D is required (the total δ, e.g. 1e-6)", fs.Name())
		}
		if delta < 0 || delta >= 1 || math.IsInf(delta, 0) {
			return usagef("%s: --delta %v must be in [0, 1)", fs.Name(), delta)
		}
		d0 := *per
		if math.IsNaN(d0) {
			d0 = 0
			if nG > 0 {
				d0 = delta / float64(nG)
			}
		} else if nG == 0 {
			return usagef("%s: --gaussian-delta given without --gaussian releases", fs.Name())
		} else if !(d0 > 0) || d0 >= 1 {
			return usagef("%s: --gaussian-delta %v must be in (0, 1)", fs.Name(), d0)
		}
		if nG > 0 && d0 == 0 {
			return usagef("%s: --delta 0 leaves nothing for the Gaussian releases; give a positive --delta", fs.Name())
		}
		for _, r := range gau.runs {
			e := accountant.Event{Mechanism: policy.MechanismGaussian, Epsilon: accountant.GaussianEpsilon(r.scale, d0), Delta: d0, NoiseMultiplier: r.scale}
			for range r.count {
				events = append(events, e)
			}
		}
		eps, err := accountant.ComposeEpsilon(*method, events, delta)
		if err != nil {
			return fmt.Errorf("accountant epsilon: %w", err)
		}
		fmt.Fprintf(stdout, "%s composition of %d Laplace and %d Gaussian releases at δ = %s: ε\n",
			*method, nL, nG, strconv.FormatFloat(delta, 'g', -1, 64))
		fmt.Fprintln(stdout, formatFigure(eps))
		return nil
	}

	eps := *target
	if math.IsNaN(eps) {
		return usagef("%s: --epsilon E is required (the total ε, e.g. 1)", fs.Name())
	}
	if eps < 0 || math.IsInf(eps, 0) {
		return usagef("%s: --epsilon %v must be a finite number ≥ 0", fs.Name(), eps)
	}
	e0 := *per
	if math.IsNaN(e0) {
		e0 = 0
		if nG > 0 && eps > lapEps {
			e0 = (eps - lapEps) / float64(nG)
		}
	} else if nG == 0 {
		return usagef("%s: --gaussian-epsilon given without --gaussian releases", fs.Name())
	} else if e0 < 0 || math.IsInf(e0, 0) {
		return usagef("%s: --gaussian-epsilon %v must be a finite number ≥ 0", fs.Name(), e0)
	}
	for _, r := range gau.runs {
		d0 := accountant.GaussianDelta(r.scale, e0)
		if d0 >= 1 {
			return usagef("%s: a Gaussian release with σ/Δ = %v has no δ < 1 at ε₀ = %v", fs.Name(), r.scale, e0)
		}
		e := accountant.Event{Mechanism: policy.MechanismGaussian, Epsilon: e0, Delta: d0, NoiseMultiplier: r.scale}
		for range r.count {
			events = append(events, e)
		}
	}
	d, err := accountant.ComposeDelta(*method, events, eps)
	if err != nil {
		return fmt.Errorf("accountant delta: %w", err)
	}
	fmt.Fprintf(stdout, "%s composition of %d Laplace and %d Gaussian releases at ε = %s: δ\n",
		*method, nL, nG, strconv.FormatFloat(eps, 'g', -1, 64))
	fmt.Fprintln(stdout, formatFigure(d))
	return nil
}

// formatFigure writes a figure so that strconv.ParseFloat reads it back
// exactly ("+Inf" when the method cannot reach the target).
func formatFigure(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
