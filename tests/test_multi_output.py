"""A model of several outputs, sampled on both backends (tests/workers/multi_output_fit.py).

Its potential is ``n·Σ_heads mean NLL − log p(θ)``: the logged ``nll`` must
be the sum of the heads' logged losses, on TensorFlow and under JAX, for an
SG sampler and for HMC. ``cls_loss`` and ``bin_loss`` logged 0.0 where the
potential was evaluated statelessly: the JAX step, and HMC's on both
backends. Both are epoch means of the same batches, so they agree to
float32 rounding (rel 1e-5).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


WORKERS = Path(__file__).parent / "workers"
sys.path.insert(0, str(WORKERS))
import multi_output_fit  # noqa: E402  (the same fit, run here and under JAX)


def _check(logs):
    assert logs["cls_loss"] > 0.1 and logs["bin_loss"] > 0.1  # cross-entropies of a fresh net
    assert logs["nll"] == pytest.approx(logs["cls_loss"] + logs["bin_loss"], rel=1e-5)
    assert 0.0 <= logs["bin_accuracy"] <= 1.0


@pytest.mark.parametrize("sampler", ["sgld", "hmc"])
def test_the_heads_losses_add_up_to_nll_on_tensorflow(sampler):
    _check(multi_output_fit.logs(sampler))


@pytest.mark.slow  # a JAX process: ~30 s
def test_the_heads_losses_add_up_to_nll_under_jax():
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(WORKERS / "multi_output_fit.py")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    assert result["backend"] == "jax"
    for logs in result["logs"].values():
        _check(logs)
