"""PosteriorEnsemble, SampleStore and the serving-path modules under KERAS_BACKEND=jax.

Runs tests/workers/jax_ensemble_check.py in a subprocess (the Keras backend is
fixed at import time) and checks its predictions against a numpy reference
of the same MLP and weights, and that none of this package's serving-path
modules imports TensorFlow.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble_helpers import categorical_summary

pytest.importorskip("jax")
WORKER = Path(__file__).parent / "workers" / "jax_ensemble_check.py"
SERVING_PATH = ["keras_bnn." + m for m in (
    "durable", "shared_weights", "store", "runs.rundir", "export", "ensemble_weights",
    "ensemble", "serving", "predictive_checks", "cli")]
RUNS = ["keras_bnn.runs." + m for m in ("config", "build", "training", "evaluation", "sweeps")]
# Modules of the serving/runs layer: none of them may be the one that
# imports TensorFlow (other modules still may, until they are made TF-free).
OWN = {*SERVING_PATH, *RUNS, "keras_bnn.runs", "keras_bnn.plots", "keras_bnn.experiment"}
# float32 network and float32 log-sum-exp against a float64 reference: a few
# ulps of float32 (1.2e-7) relative, amplified by the 2-layer sums (~10 terms).
RTOL, ATOL = 2e-5, 1e-6


pytestmark = pytest.mark.slow  # one JAX process for the module: 41 s before the first test


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("jax_ensemble")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(WORKER), str(out)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), dict(np.load(out / "predictions.npz"))


def _reference(saved, likelihood):
    """Member outputs f(x; θ_s) [S, N, units] of relu(x W1 + b1) W2 + b2, in float64."""
    x = saved["x"].astype(np.float64)
    w1, b1, w2, b2 = (saved[f"{likelihood}/w{j}"].astype(np.float64) for j in range(4))
    hidden = np.maximum(np.einsum("ni,sij->snj", x, w1) + b1[:, None], 0.0)
    return np.einsum("snj,sjk->snk", hidden, w2) + b2[:, None]


def _categorical(f):
    p = np.exp(f - f.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    summary = categorical_summary(p)
    return summary["probabilities"], p, summary


def _bernoulli(f):
    p1 = 1.0 / (1.0 + np.exp(-f))
    _, _, two = _categorical(np.concatenate([np.zeros_like(f), f], axis=-1))
    summary = {"probabilities": p1.mean(0), "probability_std": p1.std(0),
               **{k: two[k] for k in ("predictive_entropy", "expected_entropy",
                                      "mutual_information")}}
    return p1.mean(0), p1, summary


def _gaussian(f):
    units = f.shape[-1] // 2
    mu, var = f[..., :units], np.exp(f[..., units:])
    mean = mu.mean(0)
    aleatoric, epistemic = var.mean(0), ((mu - mean) ** 2).mean(0)
    summary = {"mean": mean, "variance": aleatoric + epistemic,
               "aleatoric_variance": aleatoric, "epistemic_variance": epistemic}
    return np.concatenate([mean, np.log(aleatoric + epistemic)], -1), f, summary


REFERENCES = {"categorical": _categorical, "bernoulli": _bernoulli, "gaussian": _gaussian}


def test_serving_path_modules_import_no_tensorflow_under_jax(jax_run):
    result, _ = jax_run
    assert result["tensorflow_free"][:len(SERVING_PATH)] == SERVING_PATH
    assert result["tensorflow_imported_by_the_math"] is False
    first = result["tensorflow_first_import"]
    assert first is None or first["importer"] not in OWN, first


@pytest.mark.parametrize("likelihood", sorted(REFERENCES))
@pytest.mark.parametrize("loop", ["unroll", "map", "vectorized_map"])
def test_ensemble_predicts_the_numpy_reference_under_jax(jax_run, likelihood, loop):
    result, saved = jax_run
    predictive, members, summary = REFERENCES[likelihood](_reference(saved, likelihood))
    finite = np.isfinite(saved["x"]).all(-1)
    assert not finite.all()  # the worker put a NaN in one row
    key = f"{likelihood}/{loop}"
    assert result[f"{key}/shared"] == [0, 1]  # the frozen trunk, held once
    for name in ("call", "predict"):
        got = saved[f"{key}/{name}"]
        np.testing.assert_allclose(got[finite], predictive[finite], rtol=RTOL, atol=ATOL)
        assert np.isnan(got[~finite]).all()
    np.testing.assert_allclose(saved[f"{key}/members"][:, finite], members[:, finite],
                               rtol=RTOL, atol=ATOL)
    for name, value in summary.items():
        np.testing.assert_allclose(saved[f"{key}/summary/{name}"][finite], value[finite],
                                   rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("likelihood", sorted(REFERENCES))
def test_store_written_under_jax_gives_the_same_ensemble(jax_run, likelihood):
    result, saved = jax_run
    # Bit for bit those of the ensemble of the same loop (the default's: "auto").
    loop = result[f"{likelihood}/from_store_loop"]
    np.testing.assert_array_equal(saved[f"{likelihood}/from_store"],
                                  saved[f"{likelihood}/{loop}/predict"])
    # The frozen trunk is in the store's shared file, not in the samples.
    assert result[f"{likelihood}/sample_entries"] == [
        "fingerprint", "metadata", "priors_digest", "shared", "shared_digest", "w2", "w3"]
    assert result[f"{likelihood}/from_store_shared"] == [0, 1]
    assert "needs KERAS_BACKEND=tensorflow" in result[f"export_{likelihood}"]
    # compile(jit_compile=False) reaches Keras' predict step (a second view).
    assert result[f"views_{likelihood}"] == [["predict", False, False], ["predict", True, True]]
    np.testing.assert_allclose(saved[f"{likelihood}/eager"], saved[f"{likelihood}/from_store"],
                               rtol=RTOL, atol=ATOL)
