// Privacy-critical: needs DP review.

// Package noise adds calibrated, secure noise to measurements: the discrete
// Laplace and discrete Gaussian mechanisms, their calibration, confidence
// half-widths and DP partition-selection thresholds.
//
// # Role and imports
//
// noise is the only package that draws random noise. It imports only the
// standard library, does no I/O apart from reading its entropy source, does
// no logging and holds no mutable package state (the one package-level
// variable, the table of bounds of e^{−k}, is computed at initialisation
// and only read afterwards). Errors describe parameters, never data.
// The release path builds one Mechanism per measurement
// (NewLaplace/NewGaussian), calls AddNoise per cell and reports HalfWidth,
// Epsilon, Delta and NoiseMultiplier.
//
// # Why discrete noise
//
// Textbook floating-point samplers (−b·log(u), Box–Muller) produce a set of
// outputs full of holes that depends on the input, so one release can
// reveal it (Mironov 2012, "On Significance of the Least Significant Bits
// for Differential Privacy"; Jin et al. 2022 also for timing). This package
// never samples floats. It samples exactly, over integers and rationals:
//
//   - Bernoulli(e^{−γ}) for rational γ, discrete Laplace and discrete
//     Gaussian by the algorithms of Canonne, Kamath and Steinke 2020, "The
//     Discrete Gaussian for Differential Privacy" (CKS), Algorithms 1–3;
//     the geometric part of Algorithm 2 is drawn by an exact inversion
//     against rigorous bounds of e^{−k} (expneg.go).
//   - Real-valued measurements follow Google's secure-noise approach
//     ("Secure Noise Generation", Google differential-privacy library):
//     round x to a power-of-two grid r tied to the noise scale
//     (s/2⁴⁰ < r ≤ s/2³⁹, see granularityBits), charge the rounding as
//     extra sensitivity (Δ + r per changed cell) and add discrete noise in
//     grid units, so every released value is an exact multiple of r.
//
// # Guarantees (add/remove-one-unit neighbours)
//
//   - NewLaplace: ε-DP if the L1 sensitivity is ≤ Params.Sensitivity
//     (integer mode: discrete Laplace of scale Δ₁/ε; real mode: scale
//     (Δ₁ + Cells·r)/(r·ε) grid steps).
//   - NewGaussian: (ε, δ)-DP if the L2 sensitivity is ≤ Params.Sensitivity.
//     One cell: σ is the smallest for which the discrete Gaussian's own
//     privacy curve (CKS Theorem 7), bounded above numerically with
//     explicit error terms, is ≤ δ at ε. Several cells: ρ-zCDP with
//     ρ = Δ²/(2σ²) and the CKS/Balle et al. 2020 conversion to (ε, δ).
//   - Partition selection (threshold.go): (ε, δ) or (ε, δ_noise + δ),
//     following Wilson et al. 2020 and Desfontaines et al. 2022.
//   - NewExponential (exponential.go): ε-DP selection among candidates
//     whose utilities have sensitivity ≤ Δu (McSherry–Talwar 2007), sampled
//     exactly by rejection with Bernoulli(e^{−γ}) trials.
//   - HalfWidth is the exact quantile of the discrete noise actually added
//     (plus r/2 rounding in real mode), so the stated coverage is true.
//
// # Timing
//
// The work of one sample does not depend on the noise drawn: rejection
// loops repeat a number of times independent of the accepted value, and
// within the accepted trial every data-dependent loop of CKS runs a fixed
// number of rounds (continuing exactly, past the fixed rounds, only with
// probability below 2⁻⁷⁹); big-integer operands are kept non-zero and of
// fixed length. TestTiming_NoiseMagnitudeIndependent measures the Spearman
// correlation between |noise| and AddNoise time (see BENCHMARKS.md).
// Not covered: rounding x to the grid and building the big.Rat result take
// time that depends on x and on the released value. The released value is
// public; x's influence is of the same kind as the upstream query's own
// data-dependent running time, which only response-time padding (SECURITY.md
// G5, "Time") addresses.
//
// # Bounded work
//
// Every loop over floats terminates for every float64 argument (NaN, ±Inf,
// zero, negative, denormal, huge): closed forms settled by a capped number
// of whole steps, capped bisections, and pmf sums that stop at the first
// term that underflows. A noise scale beyond what float64 handles exactly
// (above MaxGridScale = 2⁴⁸ grid steps, an integer-mode sensitivity above
// 2⁵³, a real scale above 2¹⁰⁰⁰) is refused by the constructors with
// ErrScale, before the release path charges any budget (bounded.go).
//
// # Concurrency
//
// Mechanisms are immutable after construction and safe for concurrent use.
// Each AddNoise call buffers its own random bytes; a test reader given in
// Params.Rand is serialised by a mutex. Production uses crypto/rand.
package noise
