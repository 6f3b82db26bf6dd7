"""Argument forms Keras 3 accepts for ``fit``, ``evaluate`` and the on-batch methods,
given to a ``BayesianModel`` with a sampler.

keras_bnn reads ``fit``'s arguments before Keras does (labels, weights, their
means against ``train_size``); a form Keras takes must pass those checks as
it passes Keras'. ``y`` (and ``sample_weight``) of a one-output model as a
one-element list or tuple, ``[y]``, or keyed by the output's name,
``{"out": y}``, is ``y`` to Keras; the label check read ``[y]`` as labels
of shape ``(1, N)`` ("`y` must be class indices of shape [N]") and a dict
as an object array ("`y` must be numeric labels")."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import LOSS, softmax_regression, three_class_rows, two_head_model
from keras_bnn import priors

N = 20
X, Y = three_class_rows(N)
W = np.ones(N, "float32")


def _model():
    return softmax_regression(kb.samplers.SGLD(step_size=1e-3), N)


def _named_output_model():
    """The softmax regression with its output in a dict, ``{"out": logits}``."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    logits = keras.layers.Dense(3, kernel_regularizer=priors.Normal(0, 1),
                                bias_regularizer=priors.Normal(0, 1))(inputs)
    model = kb.BayesianModel(inputs, {"out": logits})
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss={"out": LOSS})
    return model


def _pairs(labels):
    return tf.data.Dataset.from_tensor_slices((X, labels)).batch(5)


FORMS = {
    "fit(y=(y,))": (_model, lambda m: m.fit(X, (Y,), epochs=1, verbose=0)),
    "fit(y=[y], sample_weight=[w])": (
        _model, lambda m: m.fit(X, [Y], sample_weight=[W], epochs=1, verbose=0)),
    "fit(validation_data=(x, [y], [w]))": (
        _model, lambda m: m.fit(X, Y, epochs=1, verbose=0, validation_data=(X, [Y], [W]))),
    "fit(dataset of (x, (y,)))": (_model, lambda m: m.fit(_pairs((Y,)), epochs=1, verbose=0)),
    "evaluate(y=[y])": (_model, lambda m: m.evaluate(X, [Y], verbose=0)),
    "train_on_batch(y=[y])": (_model, lambda m: m.train_on_batch(X, [Y])),
    "test_on_batch(y=[y])": (_model, lambda m: m.test_on_batch(X, [Y])),
    "fit(y={out: y}, sample_weight={out: w})": (
        _named_output_model,
        lambda m: m.fit(X, {"out": Y}, sample_weight={"out": W}, epochs=1, verbose=0)),
    "fit(dataset of (x, {out: y}))": (
        _named_output_model, lambda m: m.fit(_pairs({"out": Y}), epochs=1, verbose=0)),
    "evaluate(y={out: y})": (_named_output_model,
                             lambda m: m.evaluate(X, {"out": Y}, verbose=0)),
}


@pytest.mark.parametrize("model, call", FORMS.values(), ids=FORMS.keys())
def test_the_labels_of_one_output_in_a_list_or_dict_are_the_labels(model, call):
    """Keras takes [y] and {name: y} for a one-output model; fit and evaluate refused them."""
    with warnings.catch_warnings():  # weights of mean 1 over the n = 20 rows: no warning
        warnings.simplefilter("error", kb.TrainSizeWarning)
        call(model())


def test_weights_in_a_one_element_list_are_still_checked():
    """sample_weight=[2·w] makes the data weigh as 2·n examples, as 2·w does."""
    with pytest.warns(kb.TrainSizeWarning, match=r"fit's sample_weight has mean 2 "):
        _model().fit(X, [Y], sample_weight=[2 * W], epochs=1, verbose=0)


@pytest.mark.parametrize("as_dict", [True, False], ids=["dict", "list"])
def test_weights_by_output_are_taken_and_each_one_is_checked(as_dict):
    """A model of several outputs takes one weight array per output, by name or in
    order, as in Keras; the dict raised ``TypeError: float() argument must be ... not
    'dict'`` before Keras saw it. Each output's weights scale its own term: a mean of
    2 on one head warns, naming it, in fit's weights and in validation_data's."""
    def by_output(cls, bin_):
        return {"cls": cls, "bin": bin_} if as_dict else [cls, bin_]

    labels, name = by_output(Y, (X[:, 0] > 0).astype("float32")), "'bin'" if as_dict else "1"
    with warnings.catch_warnings():  # every mean is 1
        warnings.simplefilter("error", kb.TrainSizeWarning)
        two_head_model(as_dict, N).fit(X, labels, sample_weight=by_output(W, W), epochs=1,
                                     verbose=0)
    doubled = by_output(W, 2 * W)
    with pytest.warns(kb.TrainSizeWarning, match=rf"fit's sample_weight\[{name}\] has mean 2 "):
        two_head_model(as_dict, N).fit(X, labels, sample_weight=doubled, epochs=1, verbose=0)
    with pytest.warns(kb.ValidationWeightWarning,
                      match=rf"validation_data\)'s sample_weight\[{name}\] has mean 2 "):
        two_head_model(as_dict, N).fit(X, labels, epochs=1, verbose=0,
                                     validation_data=(X, labels, doubled))
