"""A sampler driven by Keras' training loop as a Keras user drives it (kcb36)."""

import keras
import numpy as np
import pytest

import keras_bnn as kb


def _model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    return kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs)))


def _compile(model, sampler):
    model.compile(sampler=sampler, train_size=32,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


@pytest.mark.parametrize("option, value", [
    ("clipnorm", 1e-6), ("clipvalue", 1e-6), ("global_clipnorm", 1.0), ("weight_decay", 0.5),
    ("use_ema", True), ("gradient_accumulation_steps", 2)])
@pytest.mark.parametrize("sampler", [kb.samplers.SGLD, kb.samplers.HMC])
def test_a_keras_optimizer_option_that_changes_the_chain_is_refused_by_name(
        sampler, option, value):
    """Found 2026-11-30: a sampler's ``**kwargs`` went to keras.optimizers.Optimizer
    unchecked. SGLD(h=1e-3) on wine, 6 steps: clipnorm=1e-6 moved the weights 0.18 from
    the chain without it, weight_decay=0.5 by 1.7e-3, gradient_accumulation_steps=2 took
    3 transitions for 6 batches, and use_ema=True ended fit with the weights replaced by
    their moving average (0.35 away from the chain's state), all silently."""
    model = _model()
    with pytest.raises(ValueError, match=rf"sampler {sampler.__name__}: `{option}` must be "
                                         rf"(None|False) for a sampler.*got {value!r}"):
        _compile(model, sampler(step_size=1e-3, **{option: value}))


def test_keras_optimizer_options_left_off_or_neutral_still_compile():
    """Off (0, False) they change nothing; ``loss_scale_factor`` scales the loss and
    divides the gradient by the same factor."""
    model = _model()
    _compile(model, kb.samplers.SGLD(step_size=1e-3, weight_decay=0.0, use_ema=False,
                                     loss_scale_factor=2.0))
    x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    model.fit(x, (x[:, 0] > 0).astype("int32"), batch_size=32, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 1
