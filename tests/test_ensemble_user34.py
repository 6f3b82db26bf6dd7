"""A demanding user's checks of PosteriorEnsemble (small models, each test < 10 s)."""

import keras
import numpy as np
import pytest

import keras_bnn as kb


def _sets(model, count, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    return [[w + scale * rng.standard_normal(w.shape).astype(w.dtype)
             for w in model.get_weights()] for _ in range(count)]


@pytest.mark.parametrize("activation, units, likelihood", [
    ("softmax", 3, "categorical"), ("sigmoid", 1, "bernoulli")])
def test_a_squashing_classifier_head_is_refused(activation, units, likelihood):
    # A Keras classifier ending in softmax: the ensemble softmaxed its probabilities
    # again (p̄ pulled toward uniform, no error).
    keras.utils.set_random_seed(0)
    squashed = keras.Sequential([keras.Input((4,)), keras.layers.Dense(
        units, activation=activation, name="head")])
    with pytest.raises(ValueError, match=rf"`model` must output logits.*'head' with "
                                         rf"activation '{activation}'"):
        kb.PosteriorEnsemble(squashed, _sets(squashed, 3), likelihood=likelihood)


def test_a_squashing_head_is_refused_per_output_and_a_gaussian_one_is_not():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(5)(inputs)
    member = keras.Model(inputs, {
        "cls": keras.layers.Dense(3, activation="softmax", name="cls")(hidden),
        "reg": keras.layers.Dense(2, activation="sigmoid", name="reg")(hidden)})
    with pytest.raises(ValueError, match=r"'cls' with activation 'softmax'"):
        kb.PosteriorEnsemble(member, _sets(member, 2),
                             likelihood={"cls": "categorical", "reg": "gaussian"})
    gaussian = keras.Model(inputs, keras.layers.Dense(2, activation="sigmoid")(hidden))
    assert kb.PosteriorEnsemble(gaussian, _sets(gaussian, 2),
                                likelihood="gaussian").num_members == 2


@pytest.mark.parametrize("wrap", [list, tuple], ids=["list", "tuple"])
def test_a_one_input_member_is_called_on_a_list_of_one_array(wrap):
    # Keras' own model([x]) takes it (warning); ensemble([x]) raised "Invalid input shape
    # ... Expected shape (None, 4), but input has incompatible shape (1, 9, 4)".
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    member = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    ensemble = kb.PosteriorEnsemble(member, _sets(member, 3))
    x = np.random.default_rng(1).standard_normal((9, 4)).astype("float32")
    expected = keras.ops.convert_to_numpy(ensemble(x))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(ensemble(wrap([x]))), expected)
    summary = ensemble.predictive_summary(wrap([x]))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(summary["probabilities"]),
                                  expected)


def test_a_trunk_beside_an_input_that_feeds_the_head_keeps_the_member_savable(tmp_path):
    # Input b feeds a sampled layer directly, beside a frozen trunk on input a: building
    # the ensemble re-wired b (Keras' clone of a model input's node), and the member and
    # the ensemble could no longer be saved ("could not find node key ..._ib-1").
    keras.utils.set_random_seed(0)
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    frozen = keras.layers.Dense(4, trainable=False)(a)
    member = keras.Model({"a": a, "b": b}, {
        "y": keras.layers.Dense(3)(keras.layers.Concatenate()([frozen, b])),
        "z": keras.layers.Dense(2)(b)})
    sets = _sets(member, 3)
    for weights in sets:
        weights[:2] = member.get_weights()[:2]  # the frozen trunk's, held once
    ensemble = kb.PosteriorEnsemble(member, sets,
                                    likelihood={"y": "categorical", "z": "gaussian"})
    assert ensemble._trunk.value is not None  # the trunk runs once per call
    rng = np.random.default_rng(2)
    x = {"a": rng.standard_normal((5, 3)).astype("float32"),
         "b": rng.standard_normal((5, 2)).astype("float32")}
    logits = []
    for weights in sets:
        member.set_weights(weights)
        logits.append(keras.ops.convert_to_numpy(member(x)["y"]))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    predicted = ensemble.predict(x, verbose=0)
    np.testing.assert_allclose(predicted["y"], probs.mean(0), rtol=1e-5, atol=1e-6)
    member.save(tmp_path / "member.keras")
    ensemble.save(tmp_path / "ensemble.keras")
    loaded = keras.saving.load_model(tmp_path / "ensemble.keras")
    for key in ("y", "z"):
        np.testing.assert_allclose(loaded.predict(x, verbose=0)[key], predicted[key],
                                   rtol=1e-6, atol=1e-6)


def test_a_log_softmax_head_is_taken_as_its_logits():
    # softmax(log_softmax(f)) = softmax(f): such a member's predictive is right as it is.
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    logits = keras.Model(inputs, keras.layers.Dense(3, name="head")(inputs))
    logs = keras.Model(inputs, keras.layers.Activation("log_softmax")(logits.output))
    sets = _sets(logits, 3)
    x = np.random.default_rng(1).standard_normal((6, 4)).astype("float32")
    np.testing.assert_allclose(kb.PosteriorEnsemble(logs, sets).predict(x, verbose=0),
                               kb.PosteriorEnsemble(logits, sets).predict(x, verbose=0),
                               rtol=1e-5, atol=1e-7)
