"""How often a PosteriorEnsemble runs (or traces) its members for what it returns.

Counted by a pass-through layer in the member that counts its calls (Python:
once per trace, once per call run eagerly), or by the ensemble's own member
functions wrapped in counters. Until 2026-11-29: under ``member_loop="map"``
and ``"vectorized_map"`` a member whose output carries a Keras mask was
traced once more for the mask; a Gaussian ensemble's ``call`` built the
members' batch-first view that only ``evaluate``'s loss reads, in
``predict`` too; Keras' symbolic shape pass of ``evaluate`` ran the members
for the loss; a subclassed ``call(self, a, b)`` failed with Keras' shape
inference error.
"""

import keras
import numpy as np
import pytest
from keras.src.backend import compute_output_spec

import keras_bnn as kb

L = keras.layers
VOCAB, T, N = 6, 5, 4


class Counting(L.Layer):
    """The identity, counting its calls in ``calls`` and keeping the Keras mask."""

    calls = 0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x):
        Counting.calls += 1
        return x


def _tagger_ensemble(mask_zero, member_loop):
    """Embedding(mask_zero) → Counting → Dense(3) per timestep, 3 weight sets."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None,), dtype="int32"),
                              L.Embedding(VOCAB, 2, mask_zero=mask_zero), Counting(),
                              L.Dense(3)])
    rng = np.random.default_rng(1)
    sets = [[w + 0.3 * rng.standard_normal(w.shape).astype("float32")
             for w in model.get_weights()] for _ in range(3)]
    return kb.PosteriorEnsemble(model, sets, member_loop=member_loop)


@pytest.mark.parametrize("member_loop", ["map", "vectorized_map"])
def test_a_masked_output_costs_no_extra_member_pass_in_a_loop(member_loop):
    """The masked member is traced as often as the same member unmasked (until
    2026-11-29 once more, for the mask), and the numbers are those of ``"unroll"``."""
    x = np.random.default_rng(2).integers(0, VOCAB, (N, T)).astype("int32")
    passes = {}
    for mask_zero in (False, True):
        ensemble = _tagger_ensemble(mask_zero, member_loop)
        Counting.calls = 0
        ensemble.predict(x, verbose=0)
        passes[mask_zero] = Counting.calls
    assert passes[True] == passes[False] >= 1
    masked = ensemble(x)
    unrolled = _tagger_ensemble(True, "unroll")(x)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(masked._keras_mask), x != 0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(masked),
                               keras.ops.convert_to_numpy(unrolled), rtol=0, atol=1e-6)


def _gaussian_ensemble():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, L.Dense(4)(inputs))
    rng = np.random.default_rng(7)
    sets = [[0.7 * rng.standard_normal(w.shape).astype("float32") for w in model.weights]
            for _ in range(3)]
    x = rng.standard_normal((20, 3)).astype("float32")
    y = rng.standard_normal((20, 2)).astype("float32")
    return kb.PosteriorEnsemble(model, sets, likelihood="gaussian"), x, y


def _count(ensemble, method):
    """Wraps ``ensemble.<method>`` in a counter; returns the count dict."""
    count, original = {"calls": 0}, getattr(ensemble, method)

    def counted(*args, **kwargs):
        count["calls"] += 1
        return original(*args, **kwargs)

    setattr(ensemble, method, counted)
    return count


def test_a_gaussian_call_makes_the_members_view_only_for_the_loss():
    """An eager ``call`` and ``predict`` build no batch-first members view (until
    2026-11-29 each call did); ``evaluate``'s loss still gets it, once per batch run
    eagerly, and is kb.metrics' mixture NLL."""
    ensemble, x, y = _gaussian_ensemble()
    views = _count(ensemble, "_batch_first")
    ensemble(x)
    ensemble.predict(x, verbose=0)
    assert views["calls"] == 0
    ensemble.compile(loss=kb.likelihoods.PredictiveGaussianNLL(), run_eagerly=True)
    loss = ensemble.evaluate(x, y, batch_size=10, verbose=0)
    assert views["calls"] == 2
    members = ensemble.predict_members(x).astype(np.float64)
    assert loss == pytest.approx(kb.metrics.gaussian_mixture_nll_per_example(
        members[..., :2], np.exp(members[..., 2:]), y).mean(), rel=1e-5)


def test_the_symbolic_loss_pass_runs_no_members():
    """Keras' symbolic pass of the loss (``_symbolic_build``: a y_pred of shapes only)
    gets a stand-in of the members' shape: no member runs (until 2026-11-29 they ran
    again there, under JAX once per ``evaluate``)."""
    ensemble, x, y = _gaussian_ensemble()
    ensemble.compile(loss=kb.likelihoods.PredictiveGaussianNLL())
    members = _count(ensemble, "_members_and_finite_rows")
    loss = compute_output_spec(ensemble.compute_loss, keras.KerasTensor((20, 3)),
                               keras.KerasTensor((20, 2)), keras.KerasTensor((20, 4)),
                               training=False)
    assert members["calls"] == 0
    assert tuple(loss.shape) == ()


class _TwoArguments(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = L.Dense(3)

    def call(self, first, second, training=None):
        return self.dense(keras.ops.concatenate([first, second], axis=-1))


def test_a_call_of_several_input_arguments_is_refused_saying_how_to_write_it():
    """Keras' own fit and predict cannot feed ``call(self, a, b)`` (they call
    ``model(x)``): refused naming the arguments and the one-input form."""
    model = _TwoArguments()
    model(np.zeros((2, 2), "float32"), np.zeros((2, 1), "float32"))
    with pytest.raises(ValueError, match=r"2 input arguments \(first, second\).*"
                                         r"def call\(self, inputs, training=None\)"):
        kb.PosteriorEnsemble(model, [model.get_weights()])
