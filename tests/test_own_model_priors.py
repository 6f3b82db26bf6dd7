"""``kb.bayesian`` on a model the user brings, called more than once (README "Your own model")."""

import keras
import pytest

import keras_bnn as kb


def _configs(model):
    return {v.path: (type(v.regularizer).__name__, v.regularizer.get_config())
            for v in model.trainable_variables}


def _mlp():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden))


def test_a_second_call_takes_its_own_kernel_and_bias_priors():
    """A prior sweep on one model: each call's arguments decide, not the first call's
    priors (until 2026-11-29 every later call kept HeNormal(1) and Normal(0, 1))."""
    model = _mlp()
    kb.bayesian(model)
    narrow = kb.bayesian(model, kernel_prior=kb.priors.Normal(0.0, 0.01),
                         bias_prior=kb.priors.Laplace(3.0))
    assert _configs(narrow) == {
        "hidden/kernel": ("Normal", {"mean": 0.0, "stddev": 0.01}),
        "hidden/bias": ("Laplace", {"loc": 0.0, "scale": 3.0}),
        "logits/kernel": ("Normal", {"mean": 0.0, "stddev": 0.01}),
        "logits/bias": ("Laplace", {"loc": 0.0, "scale": 3.0})}
    assert kb.bayesian(model).trainable_variables[0].regularizer.get_config() == {"scale": 1.0}


def test_an_override_of_one_call_does_not_stay_for_the_next():
    model = _mlp()
    kb.bayesian(model, priors={"kernel": kb.priors.Normal(0.0, 0.02)})
    assert _configs(kb.bayesian(model)) == _configs(kb.bayesian(_mlp()))


def test_a_kb_layers_prior_is_still_the_one_the_weight_carries():
    """The prior a ``kb.layers`` layer was given outlives a call that overrode it."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    own = kb.priors.Normal(0.0, 0.3)
    model = keras.Model(inputs, kb.layers.Dense(3, kernel_prior=own, name="d")(inputs))
    overridden = kb.bayesian(model, priors={"d/kernel": kb.priors.Laplace(0.1)})
    assert type(overridden.get_layer("d").kernel.regularizer) is kb.priors.Laplace
    again = kb.bayesian(model, kernel_prior=kb.priors.Normal(0.0, 0.01))
    assert again.get_layer("d").kernel.regularizer is own
    assert again.get_layer("d").kernel_prior is own


def test_an_input_shape_for_a_model_with_a_graph_is_refused_not_ignored():
    """Until 2026-11-29 ``input_shape=(10,)`` on a model of input (6,) was ignored."""
    sequential = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, name="d")])
    for model in (_mlp(), sequential):
        with pytest.raises(ValueError, match=r"`input_shape` must be None for a model with "
                                             r"a graph.*\(\(6,\) here"):
            kb.bayesian(model, input_shape=(10,))
        assert all(v.regularizer is None for v in model.trainable_variables)  # as it was


def test_a_priors_key_of_a_frozen_layer_is_refused_saying_it_is_frozen():
    """The trunk of a Bayesian last layer has no prior to give; the error says why."""
    model = _mlp()
    model.get_layer("hidden").trainable = False
    with pytest.raises(ValueError, match=r"\['hidden'\] \(\['hidden'\] name frozen weights "
                                         r"only, trainable=False"):
        kb.bayesian(model, priors={"hidden": kb.priors.Normal(0.0, 0.5), "logits": "normal"})
