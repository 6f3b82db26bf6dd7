"""``kb.bayesian`` on models a Keras user brings: shared layers, LoRA, reloads."""

import keras
import numpy as np
import pytest

import keras_bnn as kb


def _nested_sharing(after_shared):
    """An outer model over two nested models that share the Dense ``shared_dense``;
    ``after_shared``: whether the second has a layer after it (the record then no longer
    fits the weights Keras rebuilds)."""
    shared = keras.layers.Dense(3, name="shared_dense")
    first_in, second_in = keras.Input((4,)), keras.Input((4,))
    first = keras.Model(first_in, shared(first_in), name="sub_a")
    second_out = shared(second_in)
    if after_shared:
        second_out = keras.layers.Dense(5, name="post")(second_out)
    second = keras.Model(second_in, second_out, name="sub_b")
    inputs = keras.Input((4,))
    return kb.bayesian(keras.Model(inputs, [first(inputs), second(inputs)], name="outer"))


@pytest.mark.parametrize("after_shared", [False, True])
def test_a_layer_shared_across_nested_models_is_named_at_the_reload(tmp_path, after_shared):
    """Keras rebuilds each nested model's layers from its own config: the shared layer
    comes back as two (4 trainable weights where the saved model had 2). Until 2026-11-30
    the reload blamed "the config was altered" (a layer after it), or from_config rebuilt
    the copies without a word and Keras failed on the weights file."""
    bnn = _nested_sharing(after_shared)
    assert len(bnn.trainable_variables) == 4 if after_shared else 2
    bnn.save(tmp_path / "model.keras")
    loads = {"load_model": lambda: keras.saving.load_model(tmp_path / "model.keras"),
             "from_config": lambda: kb.BayesianModel.from_config(bnn.get_config())}
    for how, load in loads.items():
        with pytest.raises(ValueError, match=r"shared across nested models \(layer "
                           r"'shared_dense' by the models \['sub_a', 'sub_b'\]\).*"
                           r"load its weights") as raised:
            load()
        assert "altered" not in str(raised.value), how


def test_layers_of_one_name_in_two_nested_models_still_reload(tmp_path):
    """Two distinct layers named alike in two nested models are no shared layer."""
    def sub(name):
        inputs = keras.Input((4,))
        return keras.Model(inputs, keras.layers.Dense(3, name="head")(inputs), name=name)

    inputs = keras.Input((4,))
    bnn = kb.bayesian(keras.Model(inputs, [sub("one")(inputs), sub("two")(inputs)]))
    bnn.save(tmp_path / "model.keras")
    again = keras.saving.load_model(tmp_path / "model.keras")
    x = np.ones((2, 4), "float32")
    for mine, theirs in zip(bnn.predict(x, verbose=0), again.predict(x, verbose=0)):
        np.testing.assert_array_equal(mine, theirs)


def _lora_model(kind):
    """A model with one LoRA-enabled layer ``"lora"`` of ``kind`` (rank 2)."""
    if kind == "Embedding":
        inputs = keras.Input((3,), dtype="int32")
        layer = keras.layers.Embedding(10, 4, name="lora")
    else:
        inputs = keras.Input((4,))
        layer = (keras.layers.Dense(3, name="lora") if kind == "Dense"
                 else keras.layers.EinsumDense("ab,bc->ac", output_shape=3, name="lora"))
    model = keras.Model(inputs, layer(inputs))
    layer.enable_lora(2)
    return model


@pytest.mark.parametrize("kind", ["Dense", "EinsumDense", "Embedding"])
def test_saving_sampled_lora_weights_is_refused(tmp_path, kind):
    """Keras saves a LoRA layer's kernel with the product merged in and reloads the LoRA
    weights as zeros. Until 2026-11-30 save and save_weights did it without a word: a
    Dense(3) on 4 inputs, LoRA rank 2, reloaded with lora_kernel_a = lora_kernel_b = 0
    and its prior term 12.85 where the saved model's was 14.58, and a continued chain
    started where both LoRA gradients are 0."""
    bnn = kb.bayesian(_lora_model(kind))
    lora = [v for v in bnn.trainable_variables if "lora" in v.name]
    for variable in lora:
        variable.assign(np.full(variable.shape, 0.5, variable.dtype))
    for method, path in (("save", "model.keras"), ("save_weights", "model.weights.h5")):
        with pytest.raises(ValueError, match=rf"BayesianModel\.{method}: layers \['lora'\] "
                           r"sample LoRA weights .*reloads as zeros"):
            getattr(bnn, method)(tmp_path / path)
        assert not (tmp_path / path).exists()


def test_a_frozen_lora_layer_saves(tmp_path):
    """LoRA weights that are not sampled (their layer frozen) are no sample to lose."""
    model = _lora_model("Dense")
    model.get_layer("lora").trainable = False
    inputs = keras.Input((4,))
    bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(model(inputs))))
    bnn.save(tmp_path / "model.keras")
    assert (tmp_path / "model.keras").exists()


def test_kb_bayesian_again_after_fit_samples_the_new_priors():
    """kb.bayesian(bnn, ...) returns bnn with new priors; until 2026-11-30 its cached train
    step went on with the priors it was traced with (with SGLD, its prior metric 24.2 where
    the new priors' -log p(θ) was 1169). The SGD baseline (learning rate 0: the weights stay,
    so the metric is -log p(θ) exactly) runs the same cached step, 5 times faster to trace."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(16, 6)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")
    inputs = keras.Input((6,))
    bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Dense(4)(inputs))))
    bnn.compile(optimizer=keras.optimizers.SGD(0.0), train_size=16, loss="mse")
    bnn.fit(x, y, epochs=1, batch_size=16, verbose=0)
    again = kb.bayesian(bnn, kernel_prior=kb.priors.Normal(0.0, 0.05))
    assert again is bnn
    history = again.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert history.history["prior"][0] == pytest.approx(-float(kb.priors.log_prior(again)),
                                                        rel=1e-5)


def test_a_priors_key_naming_the_layer_given_to_bidirectional_says_what_to_name():
    """Keras' Bidirectional runs copies "forward_l" and "backward_l" of the LSTM "l" it was
    given: until 2026-11-30 priors={"l": ...} raised listing weight paths only."""
    inputs = keras.Input((5, 3))
    outputs = keras.layers.Bidirectional(keras.layers.LSTM(2, name="l"), name="bi")(inputs)
    with pytest.raises(ValueError, match=r"\['l'\].*copies of the layer it was given, named "
                       r"\['backward_l', 'forward_l'\]"):
        kb.bayesian(keras.Model(inputs, outputs), priors={"l": kb.priors.Normal(0.0, 0.5)})
