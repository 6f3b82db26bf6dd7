"""keras_bnn under KERAS_BACKEND=jax: the samplers, the sampling ``fit`` (same
logs as under TensorFlow), the DataParallel route, and an import without
TensorFlow.

Runs in subprocesses because the Keras backend is fixed at import time.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keras_bnn as kb

pytest.importorskip("jax")
WORKERS = Path(__file__).parent / "workers"
WORKER = WORKERS / "jax_backend_check.py"
sys.path.insert(0, str(WORKERS))
import training_runs  # noqa: E402  (shared with the JAX worker)

pytestmark = pytest.mark.slow  # JAX processes: 28–32 s each before their tests

JAX_ENV = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")


@pytest.fixture(scope="module")
def jax_result():
    done = subprocess.run([sys.executable, str(WORKER)], capture_output=True, text=True,
                          timeout=600, env=JAX_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("name", ["sgld", "sghmc", "sgnht", "atmc"])
def test_samplers_sample_the_tempered_gaussian_under_jax(jax_result, name):
    # 200 chains × 18k kept steps at h = 0.05: the integrated autocorrelation
    # time is ≲ 2/h = 40 steps, so ESS ≳ 200·18000/40 = 90k and the standard
    # error of the mean is ≤ sqrt(0.5/90k) ≈ 0.0024; 0.02 is > 8 SE. The std
    # tolerance (4 %) covers SGLD's discretisation bias (var T/(1-h/2): +1.3 %)
    # plus > 8 SE of the std estimate (≈ 0.24 %).
    stats = jax_result["samplers"][name]
    assert abs(stats["mean"]) < 0.02
    assert abs(stats["std"] / math.sqrt(0.5) - 1.0) < 0.04


def test_sampling_fit_runs_and_is_deterministic_under_jax(jax_result):
    assert jax_result["fit_deterministic"]
    assert all(np.isfinite(jax_result["fit_losses"]))


def test_a_weights_file_reloaded_goes_on_with_the_same_chain_under_jax(jax_result):
    assert jax_result["weights_file_continues"]  # the sampler's state is restored too


def test_priors_give_the_same_log_density_under_both_backends(jax_result):
    model = kb.models.mlp((5,), 2, hidden=(16,))
    model.set_weights([np.asarray(w, "float32") for w in jax_result["weights"]])
    np.testing.assert_allclose(float(kb.priors.log_prior(model)), jax_result["log_prior"],
                               rtol=1e-5)


@pytest.fixture(scope="module")
def jax_training(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jax_training")
    initial = training_runs.model().get_weights()
    np.savez(folder / "initial.npz", *initial)
    done = subprocess.run(
        [sys.executable, str(WORKERS / "jax_training_check.py"), str(folder / "out.json"),
         str(folder / "initial.npz")],
        capture_output=True, text=True, timeout=600, env=JAX_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return initial, json.loads((folder / "out.json").read_text())


@pytest.mark.parametrize("name", training_runs.SAMPLERS)
def test_fit_logs_the_same_diagnostics_under_both_backends(jax_training, name):
    # Same data, initial weights, batch order and noise (both backends draw
    # JAX's Threefry normal for the same seed, variable and step): 12 steps
    # of the whole chain.
    # float32 kernels differ between XLA and TensorFlow in reduction order
    # (relative rounding ~1e-7 per sum of ≤ 400 terms, a few 1e-6 after 12
    # steps); 1e-4 relative leaves a wide margin and still catches any
    # difference in the update or in what is logged (e.g. a 0 log, a missing
    # key, a prior scaled by n instead of 1/n).
    initial, result = jax_training
    tf_run = training_runs.parity_run(name, initial)
    jax_run = result["parity"][name]
    expected = set(training_runs.LOGGED) - ({"kinetic_temperature"} if name == "sgld" else set())
    assert set(tf_run["logs"]) == expected
    assert set(jax_run["logs"]) == expected
    for key in expected:
        np.testing.assert_allclose(jax_run["logs"][key], tf_run["logs"][key], rtol=1e-4,
                                   atol=1e-7, err_msg=key)
        assert all(v != 0.0 for v in jax_run["logs"][key]), key
    for a, b in zip(jax_run["weights"], tf_run["weights"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_nonfinite_step_is_handled_the_same_under_both_backends(jax_training):
    # The NaN sits in the last batch of epoch 0: 3 steps run, the 4th changes
    # nothing (not even the step counter), and fit raises NonFiniteError —
    # at that step (TensorFlow graph mode) or at the end of its epoch (JAX).
    _, result = jax_training
    expected = {"error": "NonFiniteError", "iterations": 3, "finite": True}
    assert result["nonfinite"] == expected
    assert training_runs.nonfinite_run() == expected


def test_data_parallel_chain_equals_the_single_device_chain(jax_training):
    # keras.distribution.DataParallel over two CPU devices shards each batch;
    # the step is one XLA program over global arrays with the same noise, so
    # the chain is the same chain up to the order in which the batch's
    # gradient is summed (two partial sums: float32 rounding, measured 3e-8
    # after 8 steps; Keras' stock train_step gives the same 3e-8 on this
    # model and data). A real fault (a device treating its half batch as the
    # batch, per-device noise) moves weights by ≳ h·|G| or the noise scale
    # sqrt(2h) ≈ 0.1 per step, many orders above the 1e-6 bound.
    _, result = jax_training
    parallel = result["data_parallel"]
    assert parallel["max_weight_difference"] <= 1e-6
    assert set(parallel["parallel_logs"]) == set(parallel["single_logs"])
    for key, values in parallel["single_logs"].items():
        np.testing.assert_allclose(parallel["parallel_logs"][key], values, rtol=1e-6,
                                   err_msg=key)


def test_import_under_jax_imports_no_tensorflow():
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys, keras_bnn; assert 'tensorflow' not in sys.modules, "
         "[m for m in sys.modules if m.startswith('tensorflow')][:5]"],
        capture_output=True, text=True, timeout=300, env=JAX_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
