"""``fit``'s weights split by output alike on both paths, by Keras' rule.

Keras' loss reads output k's ``sample_weight`` at its path in the model's
outputs (a list's k-th entry, a dict's entry of its name: a dict-output
model's outputs come in its keys' sorted order). The array check before
``fit`` read a dict in the order it was given and pooled a list not of one
entry per output; the dataset check in the train step read a dict in sorted
order and pooled a structure of more entries than outputs. Both now read
weights through :func:`keras_bnn.output_slots.weight_slots`.
"""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import script_result, three_class_rows, two_head_model
from test_per_timestep_loss import train_size_warnings

N = 20
X, Y = three_class_rows(N)
BIN = (X[:, 0] > 0).astype("float32")[:, None]
BCE = keras.losses.BinaryCrossentropy(from_logits=True)


def _compile(model, loss):
    """Compiles ``model`` with SGLD (h = 1e-3, a sampler of its own) for ``train_size=N``."""
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=loss)


def _constant(value):
    """Weights ``value`` for every example: their mean is ``value`` exactly."""
    return np.full(N, value, "float32")


def _named(model_fn, y, weights):
    """The output each path's TrainSizeWarning names: ``fit(x, y, sample_weight=...)``,
    then a dataset of ``(x, y, weights)``."""
    arrays = train_size_warnings(model_fn(), X, y, sample_weight=weights, epochs=1,
                                 batch_size=5)
    data = tf.data.Dataset.from_tensor_slices((X, y, weights)).batch(5)
    dataset = train_size_warnings(model_fn(), data, epochs=1)
    return [re.findall(r"sample_weight(\[.*?\])? (?:in fit's data )?has mean (\S+)", message)
            for message in arrays + dataset]


def test_a_dict_of_weights_is_read_in_the_outputs_order_on_both_paths():
    """``{"cls": 0.5, "bin": 1.5}`` (keys not sorted) on a model of outputs
    ``{"cls", "bin"}`` (Keras' order: bin, cls), both 0.5 from 1: each path names the
    first output, ``['bin']``. Before: the array check named ``['cls']`` (the dict's
    order), the dataset check ``['bin']``."""
    named = _named(lambda: two_head_model(True, N), {"cls": Y, "bin": BIN[:, 0]},
                   {"cls": _constant(0.5), "bin": _constant(1.5)})
    assert named == [[("['bin']", "1.5")]] * 2, named


def _three_heads():
    """Three Bernoulli logits, outputs the list ``[c, a, b]``."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(
        inputs, [keras.layers.Dense(1, name=name)(inputs) for name in "cab"]))
    _compile(model, [BCE] * 3)
    return model


def test_a_list_of_weights_short_of_an_output_is_refused_alike_on_both_paths():
    """Two weight arrays for three outputs: Keras' loss has none for output ``[2]``.
    Both paths refuse it before training, with one message naming ``sample_weight``
    and the output. Before: Keras' ValueError ("You should provide one
    `sample_weight` array per output") for arrays, its IndexError ("tuple index out
    of range") in the train step for a dataset."""
    weights = (_constant(1.0), _constant(1.0))
    with pytest.raises(ValueError, match=r"fit's sample_weight has no weights for the "
                       r"model's output at \[2\] \(its outputs: \[0\], \[1\], \[2\]\)"):
        _three_heads().fit(X, [BIN] * 3, sample_weight=list(weights), verbose=0)
    data = tf.data.Dataset.from_tensor_slices((X, (BIN,) * 3, weights)).batch(5)
    with pytest.raises(ValueError, match=r"sample_weight in fit's data has no weights for "
                       r"the model's output at \[2\]"):
        _three_heads().fit(data, verbose=0)


def test_a_datasets_weights_past_the_outputs_are_left_out_as_keras_does():
    """Four weight arrays a dataset yields for three outputs: Keras' loss reads the first
    three (the fourth scales nothing), so output ``[0]``'s mean 0.5 warns. Before: the
    four were pooled into one mean, (0.5 + 1 + 1 + 1.5) / 4 = 1, and nothing warned."""
    weights = tuple(_constant(value) for value in (0.5, 1.0, 1.0, 1.5))
    data = tf.data.Dataset.from_tensor_slices((X, (BIN,) * 3, weights)).batch(5)
    messages = train_size_warnings(_three_heads(), data, epochs=1)
    assert len(messages) == 1 and "the sample_weight[0] in fit's data has mean 0.5" in (
        messages[0]), messages


#: Fits a subclassed ``BayesianModel`` of two Bernoulli logits (a tuple,
#: tests/two_output_models.py) on arrays and on a dataset, with weights of means 1 and 1.5;
#: prints ``RESULT <json>``: the outputs the TrainSizeWarnings name. In a process of its
#: own: a subclass cannot be made after a functional ``BayesianModel`` in the same process.
SUBCLASSED = """
import json, re, sys, warnings
import keras, numpy as np, tensorflow as tf
import keras_bnn as kb
from two_output_models import TwoHeads, inputs

N, BCE = 20, keras.losses.BinaryCrossentropy(from_logits=True)
x = inputs(N)
y = (x[:, 0] > 0).astype("float32")[:, None]
weights = (np.ones(N, "float32"), np.full(N, 1.5, "float32"))
named = {}
for losses in ("one", "recompiled"):
    for how in ("arrays", "dataset"):
        keras.utils.set_random_seed(0)
        model = TwoHeads(1)
        for loss in [BCE] if losses == "one" else [BCE, [BCE, BCE]]:
            model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=loss)
        data = ((x, (y, y)), dict(sample_weight=weights, batch_size=5)) if how == "arrays" else (
            (tf.data.Dataset.from_tensor_slices((x, (y, y), weights)).batch(5),), {})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(*data[0], epochs=1, verbose=0, **data[1])
        named[losses + " " + how] = [re.findall(
            r"sample_weight(\\[.*?\\])? (?:in fit's data )?has mean (\\S+)", str(w.message))
            for w in caught if issubclass(w.category, kb.TrainSizeWarning)]
print("RESULT " + json.dumps(named))
"""


@pytest.mark.slow  # a process of its own: 16 s, most of it importing TensorFlow
def test_a_subclassed_models_weights_are_split_by_the_outputs_its_labels_have(tmp_path):
    """A subclassed model of two outputs compiled with one loss (Keras broadcasts it to
    both), or with one and then with a list: weights of means 1 and 1.5 warn on both
    paths, naming ``[1]``. Before: the array check saw no outputs and the step's
    totals had the one slot made at the first compile: the weights were pooled, mean
    1.25, named ``sample_weight`` on both paths."""
    result = script_result(tmp_path, "subclassed_weights.py", SUBCLASSED)
    assert json.loads(result) == {
        f"{losses} {how}": [[["[1]", "1.5"]]] for losses in ("one", "recompiled")
        for how in ("arrays", "dataset")}


def test_a_list_of_numbers_weighs_as_its_array():
    """``sample_weight=[w_1, ..., w_N]`` (Python numbers) for a one-output model trains
    as the same weights in an array (the same chain: noise is a function of the seed
    and step) and is checked as one: mean 2 warns. Before: Keras' ValueError
    "Unrecognized data type: x=[[0.1257 ...]] (of type <class 'numpy.ndarray'>)", about
    ``x``, as plain Keras 3.15 raises."""
    def fit(weights):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((4,))
        model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(1)(inputs)))
        _compile(model, BCE)
        messages = train_size_warnings(model, X, BIN, sample_weight=weights, epochs=1,
                                       batch_size=5)
        return [keras.ops.convert_to_numpy(v) for v in model.trainable_variables], messages

    listed, messages = fit([2.0] * N)
    array, _ = fit(np.full(N, 2.0, "float32"))
    assert len(messages) == 1 and "fit's sample_weight has mean 2 " in messages[0], messages
    for got, want in zip(listed, array):
        np.testing.assert_array_equal(got, want)
