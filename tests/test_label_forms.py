"""Labels and validation weights in the forms plain Keras takes, on multi-output models.

Keras' loss reads output k's labels at its path in the model's outputs (a
list's k-th entry, a dict's entry of the output's name; a subclassed model's
outputs are its labels' entries) and scores them with ``compile``'s one loss
(broadcast to every output) or with output k's entry of a list or dict of
losses. Until 2026-11-30 the label check read a multi-output model's labels as
one array (``np.asarray((Y, Y))``, shape ``(2, N)``) under the one loss, and
checked nothing under a list or dict of losses; ``validation_data=(x, y, w)``
with ``w`` a list of numbers reached Keras as a list, which refuses it.
"""

import types
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import LOSS, script_result, three_class_rows, two_head_model
from keras_bnn.label_checks import check_output_labels

N = 20
X, Y = three_class_rows(N)
BIN = (X[:, 0] > 0).astype("float32")


def _two_logit_heads():
    """Two 3-class logit heads on 4 features (a list), compiled with ONE sparse loss."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(
        inputs, [keras.layers.Dense(3)(inputs), keras.layers.Dense(3)(inputs)]))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=LOSS)
    return model


def test_one_loss_broadcast_to_two_outputs_reads_each_outputs_labels():
    """``fit(x, [Y, Y])`` (arrays, a dataset, ``validation_data``) on two outputs under
    one loss trains, as in plain Keras; a class index 3 of a 3-class output is refused
    naming that output's labels. Before: "`y` must be class indices of shape [N] for a
    sparse categorical loss ...; got shape (2, 20)" for every one of them."""
    model = _two_logit_heads()
    model.fit(X, [Y, Y], validation_data=(X, [Y, Y]), epochs=1, batch_size=5, verbose=0)
    model.fit(tf.data.Dataset.from_tensor_slices((X, (Y, Y))).batch(5), epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"`y\[1\]` must be class indices in \[0, 2\]"):
        model.fit(X, [Y, Y + 1], epochs=1, batch_size=5, verbose=0)
    with pytest.raises(ValueError, match=r"fit\(validation_data\): `y\[1\]` must be class"):
        model.fit(X, [Y, Y], validation_data=(X, (Y, Y + 1)), epochs=1, verbose=0)


def test_a_subclassed_models_labels_are_split_by_their_entries():
    """The check on a model whose outputs are unknown (a subclassed one's, ``outputs``
    None): one loss over ``(Y, Y)`` reads two outputs; a non-integer label is named
    by its entry. Before: the pair was read as one array of shape (2, 20) and refused."""
    model = types.SimpleNamespace(loss=LOSS, outputs=None)
    check_output_labels(model, (Y, Y[:, None]))
    with pytest.raises(ValueError, match=r"`y\[0\]` must be integer class indices"):
        check_output_labels(model, (Y + 0.5, Y))


@pytest.mark.parametrize("as_dict", [False, True])
def test_a_loss_per_output_checks_each_outputs_labels(as_dict):
    """A class head and a Bernoulli head compiled with a loss each: labels 2 for the
    Bernoulli head are refused, naming them. Before: nothing was checked (no one
    likelihood) and plain Keras trains on them silently (binary cross-entropy of a
    label 2 is a finite, wrong value)."""
    model = two_head_model(as_dict, N)
    good = {"cls": Y, "bin": BIN} if as_dict else [Y, BIN]
    bad = {"cls": Y, "bin": 2 * BIN} if as_dict else [Y, 2 * BIN]
    model.fit(X, good, epochs=1, batch_size=5, verbose=0)
    name = r"y\['bin'\]" if as_dict else r"y\[1\]"
    with pytest.raises(ValueError, match=name + "` must be 0 or 1 for a Bernoulli"):
        model.fit(X, bad, epochs=1, batch_size=5, verbose=0)


def test_validation_weights_given_as_a_list_of_numbers_weigh_as_their_array():
    """``validation_data=(x, y, [2.0] * N)``: val_nll reads as with the array (the same
    chain: noise is a function of the seed and step) and the weights' mean 2 warns.
    Before: Keras' "Unrecognized data type: x=[[0.1257 ...]]", about ``x``."""
    def fit(weights):
        model = _one_logit_head()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = model.fit(X, Y, validation_data=(X, Y, weights), epochs=1,
                                batch_size=5, verbose=0)
        return history.history["val_nll"], [
            str(w.message) for w in caught if issubclass(w.category, kb.ValidationWeightWarning)]

    listed, messages = fit([2.0] * N)
    array, _ = fit(np.full(N, 2.0, "float32"))
    assert listed == array
    assert len(messages) == 1 and "sample_weight has mean 2 " in messages[0], messages


def _one_logit_head():
    """A 4→3 softmax regression (no priors needed: flat priors allowed)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3)(inputs)))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=LOSS,
                  allow_flat_prior=True)
    return model


#: A subclassed BayesianModel of two 3-class heads (tests/two_output_models.py) under one
#: sparse loss, fitted on ``(y, y)``; prints ``RESULT ok`` or the error. In a process of
#: its own: a subclass cannot be made after a functional BayesianModel.
SUBCLASSED = """
import keras, numpy as np
import keras_bnn as kb
from two_output_models import TwoHeads, inputs

x, y = inputs(20), np.arange(20) % 3
model = TwoHeads(3)
model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=20,
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
try:
    model.fit(x, (y, y), epochs=1, batch_size=5, verbose=0)
    print("RESULT ok")
except ValueError as error:
    print("RESULT", error)
"""


@pytest.mark.slow  # a process of its own: about 15 s, most of it importing TensorFlow
def test_a_subclassed_two_output_model_fits_under_one_loss(tmp_path):
    """The reported case end to end. Before: "RESULT fit: `y` must be class indices of
    shape [N] for a sparse categorical loss; ... got shape (2, 20)."."""
    assert script_result(tmp_path, "subclassed_labels.py", SUBCLASSED) == "ok"
