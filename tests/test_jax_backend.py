"""The backend-agnostic code (priors, layers, samplers) under KERAS_BACKEND=jax.

Runs in a subprocess because the Keras backend is fixed at import time.
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
WORKER = Path(__file__).parent / "workers" / "jax_backend_check.py"


@pytest.fixture(scope="module")
def jax_result():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(WORKER)], capture_output=True, text=True,
                          timeout=600, env=env)
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


def test_priors_give_the_same_log_density_under_both_backends(jax_result):
    model = kb.models.mlp((5,), 2, hidden=(16,))
    model.set_weights([np.asarray(w, "float32") for w in jax_result["weights"]])
    np.testing.assert_allclose(float(kb.priors.log_prior(model)), jax_result["log_prior"],
                               rtol=1e-5)
