"""A sampler driven by Keras' training loop as a Keras user drives it (kcb36)."""

import warnings

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


def _data():
    x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def test_steps_per_epoch_that_is_not_whole_executions_is_refused_with_a_sampler():
    """Found 2026-11-30: Keras runs whole executions while an epoch's count is below
    ``steps_per_epoch``: steps_per_epoch=5 with steps_per_execution=4 ran 8 steps an
    epoch (iterations 8, 16, 24; the same for SGD), so CyclicalSchedule(cycle_epochs=2)
    made cycles of 10 steps in epochs of 8 and CollectSamples took 1 sample in 6 epochs,
    not 3. A multiple runs as asked."""
    model = _model()
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=32,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=4)
    x, y = _data()
    with pytest.raises(ValueError, match=r"`steps_per_epoch` must be a multiple of "
                                         r"compile\(steps_per_execution=4\).*runs whole "
                                         r"executions, 8 steps an epoch.*got 5"):
        model.fit(x, y, batch_size=2, epochs=2, steps_per_epoch=5, verbose=0)
    assert int(model.optimizer.iterations) == 0
    ends = []
    model.fit(x, y, batch_size=2, epochs=2, steps_per_epoch=4, verbose=0, callbacks=[
        keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: ends.append(int(model.optimizer.iterations)))])
    assert ends == [4, 8]


def test_evaluate_with_weights_whose_mean_is_not_one_warns_as_validation_does():
    """Found 2026-11-30: evaluate(x, y, sample_weight=2) logged nll = 1.192, twice the
    data's mean NLL 0.596 (wine, SGLD), silently, where fit(validation_data=(x, y, w))
    warns about the same weights. Weights of mean 1 pass."""
    model = _model()
    _compile(model, kb.samplers.SGLD(step_size=1e-3))
    x, y = _data()
    plain = model.evaluate(x, y, verbose=0, return_dict=True)["nll"]
    with pytest.warns(kb.ValidationWeightWarning, match=r"^keras_bnn: evaluate's sample_weight "
                      r"has mean 2 over the 32 examples: nll = \(1/b\)"):
        doubled = model.evaluate(x, y, sample_weight=np.full(32, 2.0, "float32"), verbose=0,
                                 return_dict=True)["nll"]
    assert doubled == pytest.approx(2 * plain, rel=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.ValidationWeightWarning)
        model.evaluate(x, y, sample_weight=np.ones(32, "float32"), verbose=0)
