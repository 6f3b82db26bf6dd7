"""Before/after the warm-up: the old fixed default steps against ``step_size="auto"``.

Bayesian logistic regression on breast_cancer (the gold standard of
``tests/gold_standard.py``: 31 parameters, n = 569, minibatches of 64) at
T = 1, 0.1, 0.01, against its NUTS reference. Every chain starts at the MAP
point (the "SGD, then sample" workflow), K = 64 chains; the first fifth of
each run is discarded. The runs are long enough for the auto step to reach
equilibrium from the MAP (several relaxation times ``0.1/(h²λ_min)`` or
``1/(hλ_min)`` of the prior-dominated directions, λ_min ≈ 1). "before" is the
step each sampler took when none was given until now (ATMC 1e-3, SGHMC
1e-4, SGLD 1e-4); "auto" is the warm-up's choice.

    python benchmarks/warmup_before_after.py [--temperatures 1 0.1 0.01]

Prints a Markdown table for the README.
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import numpy as np  # noqa: E402

from keras_bnn import samplers  # noqa: E402
import gold_standard as gs  # noqa: E402
from sampler_harness import run_chains  # noqa: E402
from test_warmup_gold import _minibatch_gradient  # noqa: E402

CHAINS = 64
STEPS = {1.0: 6_000, 0.1: 20_000, 0.01: 150_000}
#: The defaults of the samplers before ``step_size="auto"``.
OLD_DEFAULTS = {"ATMC": 1e-3, "SGHMC": 1e-4, "SGLD": 1e-4}


def run(name, step_size, temperature, seed=0):
    """One K-chain run from the MAP; returns ``(h, r, sd ratio, |sd err|, |mean err|)``."""
    x, y = gs.breast_cancer_blr()
    sampler = getattr(samplers, name)(step_size=step_size, seed=seed)
    sampler.configure(train_size=len(x), temperature=temperature)
    start = np.tile(gs.laplace_approximation()[0], (CHAINS, 1)).astype(np.float32)
    steps = STEPS[temperature]
    samples, _ = run_chains(sampler, start, _minibatch_gradient(x, y, 1, seed, CHAINS), steps,
                            burn_in=steps // 5, thin=10)
    mean, sd = gs.nuts_reference(temperature)
    sd_ratio = np.median(samples.reshape(-1, gs.NUM_PARAMS).std(axis=0) / sd)
    return (sampler.step_size_value, float(sampler.gradient_noise_ratio()), sd_ratio,
            *gs.posterior_errors(samples, mean, sd))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperatures", type=float, nargs="+", default=list(STEPS),
                        choices=list(STEPS))
    temperatures = parser.parse_args().temperatures
    print("| sampler | T | steps | step | h | `gradient_noise_ratio` | sd ratio | "
          "\\|sd err\\| | \\|mean err\\| |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, old in OLD_DEFAULTS.items():
        for temperature in temperatures:
            for label, step_size in (("before", old), ("auto", "auto")):
                h, ratio, sd_ratio, sd_err, mean_err = run(name, step_size, temperature)
                print(f"| {name} | {temperature:g} | {STEPS[temperature]} | {label} | {h:.3g} | "
                      f"{ratio:.3g} | {sd_ratio:.3f} | {sd_err:.3f} | {mean_err:.3f} |",
                      flush=True)


if __name__ == "__main__":
    main()
