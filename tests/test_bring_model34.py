"""``kb.bayesian`` on models a Keras user brings: priors found, counted once, kept on reload."""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb


def _prior_term(model, x):
    """The layer losses the potential reads as ``-log p(θ)`` after a call on ``x``."""
    model(x)
    return float(sum(float(term) for term in model.losses))


def test_an_activity_regularization_layer_stays_removed_after_save_and_clone(tmp_path):
    """kb.bayesian removes ActivityRegularization's penalty on outputs (no prior), and a
    reload or clone keeps it removed (until 2026-11-30 the layer's config rebuilt it from
    its l1/l2: the reloaded chain's prior term held 0.5·Σh² of the data)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 6)).astype("float32")
    inputs = keras.Input((6,))
    hidden = keras.layers.ActivityRegularization(l2=0.5, name="penalty")(
        keras.layers.Dense(4, name="hidden")(inputs))
    with pytest.warns(UserWarning, match=r"activity regularizers of layers \['penalty'\]"):
        bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden)))
    expected = -float(kb.priors.log_prior(bnn))
    assert _prior_term(bnn, x) == pytest.approx(expected, rel=1e-6)
    bnn.save(tmp_path / "model.keras")
    copies = {"load_model": keras.saving.load_model(tmp_path / "model.keras"),
              "clone_model": keras.models.clone_model(bnn)}
    for how, copy in copies.items():
        copy.set_weights(bnn.get_weights())
        assert _prior_term(copy, x) == pytest.approx(expected, rel=1e-6), how


def test_a_layer_shared_by_two_nested_models_takes_the_prior_of_either():
    """``priors[layer name]`` covers all its sublayers' weights: a Dense called inside
    nested models ``a`` and ``b`` is a sublayer of both (until 2026-11-30 only ``a``
    counted, and ``priors={"b": ...}`` left it HeNormal/Normal(0, 1) silently)."""
    shared = keras.layers.Dense(4, name="shared")
    in_a, in_b = keras.Input((6,)), keras.Input((6,))
    a = keras.Model(in_a, shared(in_a), name="a")
    b = keras.Model(in_b, keras.layers.Dense(2, name="own")(shared(in_b)), name="b")
    inputs = keras.Input((6,))
    model = keras.Model(inputs, keras.layers.Concatenate()([a(inputs), b(inputs)]))
    narrow = kb.priors.Normal(0.0, 0.5)
    bnn = kb.bayesian(model, priors={"b": narrow})
    got = {v.path: v.regularizer for v in bnn.trainable_variables}
    assert all(got[path] is narrow for path in
               ("shared/kernel", "shared/bias", "own/kernel", "own/bias")), got
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outer = kb.bayesian(model, priors={"a": narrow, "own/kernel": None},
                            allow_flat=True)
    got = {v.path: v.regularizer for v in outer.trainable_variables}
    assert got["shared/kernel"] is narrow and got["own/kernel"] is None
    assert isinstance(got["own/bias"], kb.priors.Normal) and got["own/bias"] is not narrow


def test_elementwise_weights_of_any_rank_take_no_fan_scaled_kernel_prior():
    """A normalisation's shift and scale and a PReLU's slopes act element by element:
    ``bias_prior`` (or gamma's Normal(1, 1) for a scale) at any rank. Until 2026-11-30
    ``beta`` and ``alpha`` of shape (5, 6) took HeNormal (σ sqrt(2/5) from their layout)
    and the RMSNormalization scale, which starts at 1, Normal(0, 1)."""
    inputs = keras.Input((5, 6))
    hidden = keras.layers.LayerNormalization(axis=[-2, -1], name="norm")(inputs)
    if hasattr(keras.layers, "RMSNormalization"):
        hidden = keras.layers.RMSNormalization(name="rms")(hidden)
    hidden = keras.layers.Flatten()(keras.layers.PReLU(name="slope")(hidden))
    bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden)),
                      bias_prior=kb.priors.Laplace(0.5))
    got = {v.path: (type(v.regularizer).__name__, v.regularizer.get_config())
           for v in bnn.trainable_variables}
    shift = ("Laplace", {"loc": 0.0, "scale": 0.5})
    scale = ("Normal", {"mean": 1.0, "stddev": 1.0})
    assert got["norm/beta"] == got["slope/alpha"] == got["logits/bias"] == shift
    assert got["norm/gamma"] == scale and got.get("rms/scale", scale) == scale
    assert got["logits/kernel"] == ("HeNormal", {"scale": 1.0})


def test_a_weight_frozen_by_itself_reloads_frozen_with_its_layer_sampled(tmp_path):
    """Keras 3 freezes one weight with ``layer.bias.trainable = False``: it takes no prior,
    and a reload freezes it again, its layer's kernel still sampled (until 2026-11-30
    ``load_model`` froze the whole layer and then refused the recorded priors: "gives
    weight 0 ('hidden/kernel') of shape (6, 4) a prior, but the rebuilt model has (4, 3)")."""
    x = np.random.default_rng(0).normal(size=(8, 6)).astype("float32")
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(4, name="hidden")
    model = keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden(inputs)))
    hidden.bias.trainable = False
    bnn = kb.bayesian(model, priors={"hidden": kb.priors.Laplace(0.5)})
    bnn.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")

    def priors(m):
        return [(v.path, type(v.regularizer).__name__) for v in m.trainable_variables]
    assert priors(loaded) == priors(bnn) == [
        ("hidden/kernel", "Laplace"), ("logits/kernel", "HeNormal"), ("logits/bias", "Normal")]
    assert loaded.get_layer("hidden").trainable
    np.testing.assert_allclose(loaded.predict(x, verbose=0), bnn.predict(x, verbose=0))
