"""Coverage of the A1 sample-mean slope interval on many corpora (a one-off measurement).

    python benchmarks/bench_a1_coverage.py [--params params.yaml] [--seeds 1000]

Runs :func:`geolib.theory.collapse.slope_coverage` at the ``variance_collapse`` section's size
(``n_types``, ``n_tokens``, ``dim``, ``n_replicates``, ``ci_level``) with ``--seeds`` corpora in
each design — the chapter's counts fixed (fresh noise per corpus) and counts redrawn per corpus —
and reports the coverage of −1 with its Clopper–Pearson interval, the slope bias, the ratio of
the slopes' spread to the mean OLS standard error, E[z²], the residuals' lag-1 autocorrelation
and heteroscedasticity. About 0.07 s per corpus at the default size with one thread
(``OMP_NUM_THREADS=1``).

Then whether the simulation's per-type dispersion follows its exact law: n·dispersion·m/σ²
against χ²_m (Kolmogorov–Smirnov, types of ``--ks-corpora`` corpora pooled); and the same
coverage under the exact model of the simulation, far more precisely: each type's
dispersion is σ²/n · χ²_m/m (m = n_replicates·dim), so ``--model-corpora`` corpora of log
dispersions −log n + log(χ²_m/m) are drawn directly and fitted with :func:`fit_loglog` (the
fixed counts, and counts redrawn: 200 Zipf draws sharing the corpora). This measures the OLS
interval's own coverage for this design and error law, without the simulation's cost.
Writes ``benchmarks/results/bench_a1_coverage.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

from geolib.config import stage_params
from geolib.measure.stats import fit_loglog, proportion_ci
from geolib.theory import collapse as th

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--seeds", type=int, default=4000, help="corpora per design")
    parser.add_argument("--seed", type=int, default=12345, help="root seed of the corpora")
    parser.add_argument(
        "--model-corpora", type=int, default=100_000, help="corpora per design, exact model"
    )
    parser.add_argument("--ks-corpora", type=int, default=100, help="corpora of the KS check")
    args = parser.parse_args()
    P = stage_params(args.params, "variance_collapse")
    counts = th.zipf_counts(P["n_types"], P["n_tokens"], P["zipf_exponent"], seed=P["seed"])
    common = dict(n_seeds=args.seeds, dim=P["dim"], noise=P["noise"], level=P["ci_level"])
    common["n_replicates"] = P["n_replicates"]
    designs = {
        "fixed counts": dict(counts=counts, seed=args.seed),
        "counts redrawn": dict(
            zipf=(P["n_types"], P["n_tokens"], P["zipf_exponent"]), seed=args.seed + 1
        ),
    }
    out: dict = {
        "size": {k: P[k] for k in ("n_types", "n_tokens", "dim", "n_replicates", "ci_level")},
        "seeds": args.seeds,
        "designs": {},
    }
    total = 0
    for name, kwargs in designs.items():
        t0 = time.perf_counter()
        c = th.slope_coverage(**kwargs, **common)
        sec = time.perf_counter() - t0
        k = c.coverage
        total += k.successes
        res = {
            "covered": k.successes,
            "corpora": k.n,
            "coverage": k.fraction,
            "clopper_pearson": [k.low, k.high],
            "bias": [c.bias.value, c.bias.low, c.bias.high],
            "slope_sd_over_rms_stderr": float(
                np.std(c.slopes, ddof=1) / np.sqrt(np.mean(c.stderrs**2))
            ),
            "z2": [c.z2.value, c.z2.low, c.z2.high],
            "lag1": [c.lag1.value, c.lag1.low, c.lag1.high],
            "lag1_ols_expected": -2.0 / float(c.n_types.mean() - 2),
            "het": [c.het.value, c.het.low, c.het.high],
            "misses_below_above": [
                int(np.sum(c.slopes[~c.covered] < c.target)),
                int(np.sum(c.slopes[~c.covered] > c.target)),
            ],
            "seconds_per_corpus": sec / args.seeds,
        }
        out["designs"][name] = res
        print(name, json.dumps(res))
    both = proportion_ci(total, 2 * args.seeds, P["ci_level"])
    out["pooled"] = {"covered": total, "corpora": 2 * args.seeds, "ci": [both.low, both.high]}
    print("pooled", out["pooled"])

    m, level = P["dim"] * P["n_replicates"], P["ci_level"]
    scaled = [
        th.sample_mean_dispersion(
            counts, dim=P["dim"], noise=P["noise"], n_replicates=P["n_replicates"], seed=s
        )
        * counts
        * m
        / P["noise"] ** 2
        for s in np.random.SeedSequence(args.seed + 3).spawn(args.ks_corpora)
    ]
    ks = stats.kstest(np.concatenate(scaled), stats.chi2(m).cdf)
    out["ks_chi2"] = {"values": int(counts.size * args.ks_corpora), "D": float(ks.statistic)}
    out["ks_chi2"]["p_value"] = float(ks.pvalue)
    print("per-type dispersion vs chi2_m:", out["ks_chi2"])
    rng = np.random.default_rng(args.seed + 2)
    redrawn = [
        th.zipf_counts(P["n_types"], P["n_tokens"], P["zipf_exponent"], seed=rng)
        for _ in range(200)
    ]
    out["exact_model"] = {}
    for name, designs in (("fixed counts", [counts]), ("counts redrawn", redrawn)):
        t0 = time.perf_counter()
        per = args.model_corpora // len(designs)
        covered = 0
        for c in designs:
            logs = np.log(rng.chisquare(m, size=(per, c.size)) / m)
            for row in logs:
                covered += fit_loglog(c, np.exp(-np.log(c) + row), level).contains(-1.0)
        k = proportion_ci(covered, per * len(designs), level)
        res = {
            "covered": k.successes,
            "corpora": k.n,
            "coverage": k.fraction,
            "clopper_pearson": [k.low, k.high],
            "seconds": time.perf_counter() - t0,
        }
        out["exact_model"][name] = res
        print("exact model,", name, json.dumps(res))
    dest = ROOT / "benchmarks" / "results" / "bench_a1_coverage.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
