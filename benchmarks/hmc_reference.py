"""Command-line runs against exact full-batch HMC, and their noise by direction.

README, "Right by default", "Noise by direction". For each run directory
(a bundled classification dataset; HMC, an SG-MCMC sampler or the SGD
baseline) prints:
the ensemble's test NLL, its test accuracy, ECE, Brier and mean confidence
(mean over test rows of the largest predicted probability), the mean over
members of each member's training NLL (all training rows: how well the
samples fit the data), the test row
with the largest ensemble NLL, with ``--baseline RUN_DIR`` the paired
difference of test NLL against that run (``kb.metrics.paired_difference``),
and, for an SG-MCMC run, the gradient-noise
ratio of the noisiest directions at its last sample
(:func:`keras_bnn.directional_noise.ratio_spectrum` on the per-example
gradients of every training row, at the run's batch size), how many
directions have a ratio above 1 and how many hold 95 % of R's trace. Each
variable's ratio coefficient ``c_v`` is the one the run's sampler applied
at its last step, stored in ``gradient_noise.json`` (``coefficient``; at
the default noise level ``D_v = -log(0.9)/h_v`` of ATMC and SGNHT it is
``h_v²/(2·T·(-log 0.9))``, at SGHMC's default friction ``γ_v = 0.1/h_v``
``h_v²/(0.2·T)``, ``h_v`` the frozen step times the variable's factor).

With ``--drift K`` each such run also says whether its noisiest directions
stay put: per variable, the top K eigenvectors of the block ``R_v`` at the
last sample, at the sample before it and at the first sample
(:func:`keras_bnn.directional_noise.top_directions`), and how much of the
last sample's noise (``Σ_v trace R_v``) each set holds (``Σ_j u_jᵀ·R_v·u_j``).
A fixed low-rank mass or preconditioner along the noisy directions helps
only if the earlier sets hold about as much as the last one's own.

With ``--relax HMC_RUN_DIR`` each SG-MCMC run is also continued by exact
HMC from its last sample (full batch, 20 leapfrog steps at HMC_RUN_DIR's
adapted step, ``--transitions`` of them) and the training NLL and
−log p(θ) are printed as means over sixths of the transitions: a chain
whose samples are too wide where the data decide relaxes to HMC's
training NLL at an unchanged −log p(θ).

Usage:
    python benchmarks/hmc_reference.py [--baseline SGD_RUN_DIR] [--relax HMC_RUN_DIR]
        [--transitions 300] [--drift K] RUN_DIR [RUN_DIR ...]
"""

import argparse
import dataclasses
import json
import math
import os

import numpy as np

import keras_bnn as kb
from keras_bnn import directional_noise
from keras_bnn.cli import int_at_least
from keras_bnn.runs.build import build_model, compile_model, load_info
from keras_bnn.runs.config import read_config


def _stored_coefficients(run_dir):
    """``{variable name: c_v}`` from the run's ``gradient_noise.json``; {} for a
    run without per-variable ratio coefficients (SGD, HMC, SGLD with a
    preconditioner)."""
    rows = json.load(open(os.path.join(run_dir, "gradient_noise.json")))
    if any("coefficient" not in row for row in rows):
        raise SystemExit(f"{run_dir}: gradient_noise.json has no ratio coefficients (a run "
                         "trained before 2026-11-27): train it again")
    return {row["name"]: row["coefficient"] for row in rows if row["coefficient"] is not None}


def _coefficients(run_dir, model):
    """The ratio coefficient of each parameter, ``[d]`` (module docstring)."""
    stored = _stored_coefficients(run_dir)
    coefficients = []
    for variable in model.trainable_variables:
        name = next(key for key in stored if variable.path.endswith(key))
        coefficients.append(np.full(math.prod(variable.shape), stored[name]))
    return np.concatenate(coefficients)


def _sample_model(run_dir, config):
    """The run's network, compiled, and its sample store."""
    model = build_model(config, load_info(config))
    compile_model(model, config, load_info(config))
    return model, kb.runs.RunDir(run_dir).store()


def drift(run_dir, num_directions):
    """Shares of the last sample's noise held by each variable's top directions
    at the last sample, the one before and the first (module docstring)."""
    config = read_config(run_dir)
    (x_train, y_train), _, _ = kb.data.bundled_arrays(config.dataset)
    model, store = _sample_model(run_dir, config)
    if len(store) < 2:
        raise SystemExit(f"{run_dir}: --drift needs at least 2 samples (has {len(store)})")
    sizes = [math.prod(v.shape) for v in model.trainable_variables]
    bounds = np.cumsum([0, *sizes])
    n = len(y_train)

    def blocks(index):
        model.set_weights(store[index].weights)
        gradients = directional_noise.per_example_gradients(model, x_train, y_train)
        coefficients = _coefficients(run_dir, model)
        return [(gradients[:, a:b], coefficients[a:b]) for a, b in zip(bounds, bounds[1:])]

    batch = min(config.batch_size, n)
    last = blocks(len(store) - 1)
    sets = {name: [directional_noise.top_directions(g, c, n, batch, num_directions)[0]
                   for g, c in block]
            for name, block in (("own", last), ("previous", blocks(len(store) - 2)),
                                ("first", blocks(0)))}
    total = sum(directional_noise.ratio_spectrum(g, c, n, batch)["mean"] * g.shape[1]
                for g, c in last)
    held = {name: sum(float(directional_noise.ratios_along(g, c, n, batch, vectors).sum())
                      for (g, c), vectors in zip(last, sets[name]))
            for name in sets}
    return {"drift_trace": round(total, 2),
            **{f"drift_held_{name}": round(value / total, 3) for name, value in held.items()}}


def _members(run_dir, x):
    """Every stored sample's predicted class probabilities on ``x``: [S, N, K]."""
    return kb.PosteriorEnsemble.from_store(kb.runs.RunDir(run_dir).store()).predict_members(x)


def _sixths(values):
    values = np.asarray(values, float)
    return [round(float(part.mean()), 4) for part in np.array_split(values, 6)]


def relax(run_dir, hmc_run_dir, transitions):
    """Exact HMC continued from ``run_dir``'s last sample: training NLL and prior by sixths."""
    config = read_config(run_dir)
    (x_train, y_train), _, _ = kb.data.bundled_arrays(config.dataset)
    step = json.load(open(os.path.join(hmc_run_dir, "history.json")))["step_size"][-1]
    hmc = dataclasses.replace(config, sampler="hmc", step_size=step, batch_size=len(y_train),
                              sampler_args={"num_leapfrog_steps": 20})
    model = build_model(hmc, load_info(hmc))
    compile_model(model, hmc, load_info(hmc))
    store = kb.runs.RunDir(run_dir).store()
    model.set_weights(store[len(store) - 1].weights)
    history = model.fit(x_train, y_train, batch_size=len(y_train), epochs=transitions,
                        verbose=0, shuffle=False).history
    return dict(relaxed_nll=_sixths(history["nll"]), relaxed_prior=_sixths(history["prior"]),
                relaxed_acceptance=round(float(np.mean(history["acceptance_rate"])), 3))


def report(run_dir, baseline=None):
    config = read_config(run_dir)
    if load_info(config)["task"] == "regression":
        raise SystemExit(f"{run_dir}: classification runs only; for a regression run use "
                         "keras-bnn evaluate --run-dir RUN --baseline-run-dir SGD_RUN")
    (x_train, y_train), (x_test, y_test), _ = kb.data.bundled_arrays(config.dataset)
    store = kb.runs.RunDir(run_dir).store()
    test = _members(run_dir, x_test).mean(0)
    test_nll = kb.metrics.nll_per_example(test, y_test)
    member_train = [kb.metrics.nll_per_example(member, y_train).mean()
                    for member in _members(run_dir, x_train)]
    worst = int(np.argmax(test_nll))
    row = dict(run=run_dir, sampler=config.sampler, samples=len(store),
               test={key: round(float(value), 4)
                     for key, value in kb.metrics.evaluate_probs(test, y_test).items()},
               confidence=round(float(test.max(-1).mean()), 4),
               member_train_nll=float(np.mean(member_train)),
               worst_row=worst, worst_nll=float(test_nll[worst]))
    if baseline:
        difference = kb.metrics.paired_difference(
            test_nll, kb.metrics.nll_per_example(_members(baseline, x_test).mean(0), y_test))
        row.update(delta_nll=round(difference["mean"], 4), delta_se=round(difference["se"], 4))
    if _stored_coefficients(run_dir):
        model, _ = _sample_model(run_dir, config)
        model.set_weights(store[len(store) - 1].weights)
        gradients = directional_noise.per_example_gradients(model, x_train, y_train)
        spectrum = directional_noise.ratio_spectrum(
            gradients, _coefficients(run_dir, model), len(y_train),
            min(config.batch_size, len(y_train)), num_directions=len(y_train))
        ratios = np.asarray(spectrum["top"])
        share = np.cumsum(ratios) / max(ratios.sum(), 1e-300)
        row.update(top_ratios=[round(r, 3) for r in ratios[:3]],
                   mean_ratio=round(spectrum["mean"], 5),
                   directions_above_1=int(np.sum(ratios > 1.0)),
                   directions_for_95pct=int(np.searchsorted(share, 0.95) + 1))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="run directory the test NLL is compared with")
    parser.add_argument("--relax", help="HMC run directory whose step continues each SG run")
    parser.add_argument("--transitions", type=int_at_least(1), default=300,
                        help="--relax: HMC transitions from each run's last sample")
    parser.add_argument("--drift", type=int_at_least(1), metavar="K",
                        help="also the share of the noise held by earlier top-K directions")
    parser.add_argument("run_dirs", nargs="+")
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        row = report(run_dir, args.baseline)
        if args.relax and row["sampler"] not in ("hmc", "sgd"):
            row.update(relax(run_dir, args.relax, args.transitions))
        if args.drift and _stored_coefficients(run_dir):
            row.update(drift(run_dir, args.drift))
        print(json.dumps(row))


if __name__ == "__main__":
    main()
