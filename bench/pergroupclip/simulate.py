#!/usr/bin/env python3
"""Could per-group clamping bounds, chosen by DP, make the demo's per-department
AVG(cost) useful at its default epsilon without losing coverage?  (issue 29)

A simulation on the demo's real histogram, not a test.  Input: the weighted
histogram of cost per department, one unit's rows weighing one row together
(the plan dp.contribution = auto makes for averages), written by

  psql "$DATA_DSN" -At -F, -c "WITH r AS (SELECT department d, cost x,
    1.0/count(*) OVER (PARTITION BY patient_id) w FROM visits)
    SELECT d, width_bucket(x, array[78.125,156.25,312.5,625,1250,2500,5000,
    10000,20000]::numeric[]) b, sum(w), sum(w*x) FROM r GROUP BY 1,2" > hist.csv

Model (BENCHMARKS.md, "Per-group clamping bounds"): one unit's weights sum to
one over all departments and bins, so the histogram's L1 sensitivity is 1 and
Laplace noise of scale 1/eps_clip on every bin is eps_clip-DP.  Candidates
C = 20000/2^j.  The half-width at C scales the answer's measured half-width at
the declared 20000 by C/20000 and by the epsilon left to the answer.  Each
candidate's clamping bias is estimated from the noisy bins above it (bin
midpoints) plus `conf` standard deviations of that estimate's noise; the rule
picks the candidate with the least half-width plus estimated bias.  Coverage
of the truth is that of a normal error with the stated 95% half-width shifted
by the candidate's true bias (exact from the bins, which are cut at the
candidates).
"""
import csv, math, random, statistics, sys

EDGES = [78.125, 156.25, 312.5, 625, 1250, 2500, 5000, 10000, 20000]
LOWER = [0] + EDGES
CANDIDATES = [20000 / 2**j for j in range(8)]
# The demo's per-department 95% half-widths at the declared [0, 20000],
# epsilon 0.1, 0.045 for each of the normalized sum and the count (the NOTICE
# of SELECT department, AVG(cost) FROM visits GROUP BY 1 with clipping fixed).
HW_DECLARED = {'cardiology': 101.9, 'emergency': 87.07, 'neurology': 143.2, 'oncology': 126.1,
               'orthopedics': 107, 'pediatrics': 449.1, 'surgery': 92.86}
EPS_EACH_DECLARED = 0.045


def load(path):
    h = {}
    for d, b, w, wx in csv.reader(open(path)):
        h.setdefault(d, [[0.0, 0.0] for _ in range(10)])[int(b)] = [float(w), float(wx)]
    return h


def true_bias(bins, c):
    n = sum(w for w, _ in bins)
    return sum(wx - c * w for b, (w, wx) in enumerate(bins) if LOWER[b] >= c) / n


def laplace(scale):
    u = random.random() - 0.5
    return -scale * math.copysign(1, u) * math.log(1 - 2 * abs(u))


def phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def simulate(h, eps, eps_clip, conf, trials):
    eps_each = (0.9 * eps - eps_clip) / 2  # a tenth goes to the bias estimate
    out = {}
    for d, bins in h.items():
        widths, cover = [], []
        for _ in range(trials):
            noisy = [w + laplace(1 / eps_clip) for w, _ in bins]
            n = max(sum(noisy), 1)
            best = None
            for c in CANDIDATES:
                hw = HW_DECLARED[d] * c / 20000 * EPS_EACH_DECLARED / eps_each
                est, var = 0.0, 0.0
                for b, m in enumerate(noisy):
                    if LOWER[b] >= c:
                        mid = (LOWER[b] + EDGES[b]) / 2 if b < 9 else 20000
                        est += m * (mid - c)
                        var += 2 / eps_clip**2 * (mid - c) ** 2
                score = hw + max(est / n + conf * math.sqrt(var) / n, 0)
                if best is None or score < best[0]:
                    best = (score, c, hw)
            _, c, hw = best
            bias, sd = true_bias(bins, c), hw / 1.96
            widths.append(hw)
            cover.append(phi((hw - bias) / sd) - phi((-hw - bias) / sd))
        out[d] = (statistics.median(widths), sum(cover) / len(cover))
    return out


if __name__ == '__main__':
    random.seed(1)
    hist = load(sys.argv[1] if len(sys.argv) > 1 else 'hist.csv')
    print('eps  eps_clip conf  ' + '  '.join(f'{d[:5]:>13}' for d in HW_DECLARED))
    for eps, eps_clip in ((0.1, 0.01), (0.1, 0.03), (0.1, 0.045), (1, 0.1), (1, 0.3)):
        for conf in (0, 1, 2):
            r = simulate(hist, eps, eps_clip, conf, 1000)
            print(f'{eps:<4} {eps_clip:<8} {conf:<4} ' + '  '.join(f'±{r[d][0]:6.0f} {r[d][1]:.2f}' for d in HW_DECLARED))
    print('declared bounds, eps 0.1: ' + '  '.join(f'±{HW_DECLARED[d]:.0f}' for d in HW_DECLARED))
