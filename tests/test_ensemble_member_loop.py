"""Which loop evaluates a PosteriorEnsemble's members, and how often each member runs.

``member_loop="auto"`` (the default) unrolls small ensembles (under
TensorFlow up to 10 members, under JAX 1) and maps over larger ones, whose
unrolled graph traced (and under JAX compiled) S copies of the member:
until 2026-11-29 the default was ``"unroll"`` for every S (~700 members of
a wine MLP: 2 min 18 s of JAX compiling in ``predict``).
Counted by a pass-through layer in the member (Python: once per trace, once
per member run eagerly), as in tests/test_ensemble_member_passes.py. Also:
under TensorFlow ``"map"`` runs each member once (Keras' ``ops.map`` ran
one more for its output signature: S + 1 members in an eager call).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb

L = keras.layers
LARGE = 300  # members: an unrolled graph of them took seconds to trace (minutes under JAX)
WORKER = Path(__file__).parent / "workers" / "jax_member_loop.py"


@keras.saving.register_keras_serializable(package="test_ensemble_member_loop")
class Counting(L.Layer):
    """The identity, counting its calls in ``calls``."""

    calls = 0

    def call(self, x):
        Counting.calls += 1
        return x


def _ensemble(count, **kwargs):
    """``count`` weight sets of Dense(4) → Counting → Dense(3) on 5 inputs."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), L.Dense(4, activation="relu"), Counting(),
                              L.Dense(3)])
    rng = np.random.default_rng(1)
    sets = [[w + 0.3 * rng.standard_normal(w.shape).astype("float32")
             for w in model.get_weights()] for _ in range(count)]
    return kb.PosteriorEnsemble(model, sets, **kwargs)


X = np.random.default_rng(2).standard_normal((6, 5)).astype("float32")


def _predict_traces(ensemble):
    """Member traces of the first ``predict`` (one graph, traced once)."""
    Counting.calls = 0
    ensemble.predict(X, verbose=0)
    return Counting.calls


@pytest.mark.parametrize("count, loop, traces", [(3, "unroll", 3), (LARGE, "map", 2)])
def test_the_default_unrolls_a_small_ensemble_and_maps_a_large_one(count, loop, traces):
    """3 members: 3 member copies traced; 300: 2 (the first member and the map's body),
    where until 2026-11-29 the default traced 300."""
    ensemble = _ensemble(count)
    assert _predict_traces(ensemble) == traces
    assert (ensemble.member_loop, ensemble.loop_used) == ("auto", loop)


def test_an_explicit_member_loop_is_kept_for_a_large_ensemble():
    """``member_loop="unroll"`` still means S copies, whatever S."""
    ensemble = _ensemble(40, member_loop="unroll")
    assert _predict_traces(ensemble) == 40
    assert ensemble.loop_used == "unroll"


def test_an_eager_call_under_map_runs_each_member_once():
    """An eager ``ensemble(x)`` under ``"map"`` runs S members (Keras' TensorFlow
    ``ops.map`` ran one more, outside its loop, for the output signature)."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras' ops.map runs the extra member under TensorFlow only")
    ensemble = _ensemble(5, member_loop="map")
    Counting.calls = 0
    ensemble(X)
    assert Counting.calls == 5


def test_a_large_default_ensemble_gives_the_numbers_of_every_loop():
    """Above the ``"auto"`` threshold (40 members: mapped under either backend) the
    predictive and the uncertainty outputs (``predict_uncertainty``) equal those of the
    other loops.
    Tolerance: the same float32 member arithmetic in another graph; the sums over
    40 members in another order differ by a few ulps (1e-6 absolute on values ≤ 1.1)."""
    default = _ensemble(40)
    assert default.loop_used == "map"
    expected = default.predict_uncertainty(X)
    for loop in kb.ensemble.MEMBER_LOOPS:
        got = _ensemble(40, member_loop=loop).predict_uncertainty(X)
        for name, value in got.items():
            np.testing.assert_allclose(value, expected[name], rtol=0, atol=1e-6,
                                       err_msg=f"{loop}: {name}")


def test_auto_is_saved_and_an_old_unroll_config_still_loads(tmp_path):
    """A default ensemble saves and loads as ``"auto"`` (mapped at 40 members, the same
    predictions); a config written before ``"auto"`` (``"unroll"``) loads as ``"unroll"``,
    and set to ``"auto"`` after a prediction its next prediction maps."""
    ensemble = _ensemble(40)
    path = tmp_path / "ensemble.keras"
    ensemble.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.member_loop, loaded.loop_used) == ("auto", "map")
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), ensemble.predict(X, verbose=0))
    old = kb.PosteriorEnsemble.from_config(dict(ensemble.get_config(), member_loop="unroll"))
    assert (old.member_loop, old.loop_used) == ("unroll", "unroll")
    assert _predict_traces(old) == 40
    old.member_loop = "auto"
    assert old.loop_used == "map"
    assert _predict_traces(old) == 2


def test_setting_member_loop_retraces_evaluate():
    """``evaluate`` after ``member_loop`` is set runs the new loop: Keras keeps
    its traced test function, which the setter drops (40 unrolled members
    traced 40 copies; mapped, a few)."""
    ensemble = _ensemble(40, member_loop="unroll")
    ensemble.compile(loss=keras.losses.SparseCategoricalCrossentropy())
    y = np.arange(len(X)) % 3
    Counting.calls = 0
    before = ensemble.evaluate(X, y, verbose=0)
    assert Counting.calls >= 40
    ensemble.member_loop = "map"
    Counting.calls = 0
    after = ensemble.evaluate(X, y, verbose=0)
    assert 0 < Counting.calls < 40
    np.testing.assert_allclose(after, before, rtol=1e-6)


def test_an_unknown_member_loop_is_refused_naming_auto():
    message = r"member_loop.*'auto', 'unroll', 'map', 'vectorized_map'.*'threads'"
    with pytest.raises(ValueError, match=message):
        _ensemble(2, member_loop="threads")
    ensemble = _ensemble(2)
    with pytest.raises(ValueError, match=message):
        ensemble.member_loop = "threads"
    assert ensemble.member_loop == "auto"


@pytest.mark.slow  # one JAX process: ~40 s of imports
def test_under_jax_a_large_default_ensemble_traces_the_member_once(tmp_path):
    """Under JAX the default maps (``jax.lax.map``: one member trace) over 3 and 300
    members (until 2026-11-29: 3 and 300 traces and their compilation) with the
    numbers of ``"vectorized_map"`` (tolerance as above)."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(WORKER)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    assert result["loop_used"] == {"3": "map", str(LARGE): "map"}
    assert result["traces"] == {"3": 1, str(LARGE): 1}
    assert result["max_difference"] <= 1e-6
