"""Labels, weights and data in the forms plain Keras takes (helper labels35).

Keras' loss reads a list-output model's labels (and ``compile``'s losses)
from a dict by output name, and a dict-output model's from a list in the
keys' order. Until 2026-11-30 the label check skipped both forms: labels of
1.5 for a sparse loss (which Keras truncates to class 1) trained silently.
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from fit_helpers import LOSS
from keras_bnn.label_checks import check_output_labels

N = 20
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 4)).astype("float32")
Y5, Y3 = np.arange(N) % 5, np.arange(N) % 3
BINARY = keras.losses.BinaryCrossentropy(from_logits=True)


def _wide_narrow(as_dict=False, loss=LOSS):
    """Outputs ``wide`` (5 logits) then ``narrow`` (3, or 1 under a Bernoulli loss):
    a list in that order (not the names' sorted order), or a dict."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    narrow = 1 if isinstance(loss, dict) else 3
    heads = [keras.layers.Dense(5, name="wide")(inputs),
             keras.layers.Dense(narrow, name="narrow")(inputs)]
    model = kb.bayesian(keras.Model(
        inputs, dict(zip(["wide", "narrow"], heads)) if as_dict else heads))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=loss)
    return model


def test_dict_labels_of_list_outputs_are_read_by_output_name():
    """``fit(x, {"narrow": y3, "wide": y5})`` on list outputs ``[wide, narrow]`` under one
    sparse loss: Keras pairs them by name; labels 1.5 or 3 for the 3-class head are
    refused naming ``y['narrow']``. Before: nothing was checked and Keras trained on
    1.5 as class 1."""
    model = _wide_narrow()
    model.fit(X, {"narrow": Y3, "wide": Y5}, epochs=1, batch_size=10, verbose=0)
    with pytest.raises(ValueError, match=r"`y\['narrow'\]` must be integer class indices"):
        model.fit(X, {"narrow": Y3 + 0.5, "wide": Y5}, epochs=1, batch_size=10, verbose=0)
    with pytest.raises(ValueError, match=r"`y\['narrow'\]` must be class indices in \[0, 2\]"):
        model.evaluate(X, {"wide": Y5, "narrow": Y3 + 1}, verbose=0)


def test_a_loss_dict_of_list_outputs_is_read_by_output_name():
    """``compile(loss={"narrow": BinaryCrossentropy, "wide": sparse})`` on list outputs:
    labels 2 for the Bernoulli head are refused. Before: nothing was checked."""
    model = _wide_narrow(loss={"narrow": BINARY, "wide": LOSS})
    check_output_labels(model, [Y5, Y3 % 2])
    with pytest.raises(ValueError, match=r"`y\[1\]` must be 0 or 1 for a Bernoulli"):
        check_output_labels(model, [Y5, Y3])
    with pytest.raises(ValueError, match=r"`y\['narrow'\]` must be 0 or 1 for a Bernoulli"):
        check_output_labels(model, {"wide": Y5, "narrow": Y3})


def test_list_labels_of_dict_outputs_are_read_in_the_keys_order():
    """Outputs ``{"wide", "narrow"}`` take a list of labels in the sorted keys' order,
    ``[narrow, wide]``, as Keras pairs them; class 3 for ``narrow`` is refused naming
    ``y[0]``. Before: nothing was checked."""
    model = _wide_narrow(as_dict=True)
    check_output_labels(model, [Y3, Y5])
    with pytest.raises(ValueError, match=r"`y\[0\]` must be class indices in \[0, 2\]"):
        check_output_labels(model, [Y5, Y5])
