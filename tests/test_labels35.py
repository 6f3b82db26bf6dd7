"""Labels, weights and data in the forms plain Keras takes (helper labels35).

Keras' loss reads a list-output model's labels (and ``compile``'s losses)
from a dict by output name, and a dict-output model's from a list in the
keys' order. Until 2026-11-30 the label check skipped both forms: labels of
1.5 for a sparse loss (which Keras truncates to class 1) trained silently.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

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


def _tokens(counts, seed=0):
    """Scores of the scored tokens [M] of sequences of ``counts`` tokens (mask [N, 3]),
    a model's and a baseline of zeros."""
    mask = np.arange(3) < np.asarray(counts)[:, None]
    a = np.random.default_rng(seed).normal(size=int(mask.sum()))
    return a, np.zeros_like(a), mask


def test_paired_weights_one_per_score_read_per_score():
    """Scores [M] (M = 6 tokens of N = 4 sequences) with weights [M] (``w[mask]``): each
    score its own weight, as the same weights in the mask's shape. Before: refused,
    "`sample_weight` must have shape [4, 3] or [4]"."""
    a, b, mask = _tokens([2, 1, 3, 0])
    w = np.arange(1.0, 7.0)
    full = np.zeros(mask.shape)
    full[mask] = w
    got = kb.metrics.paired_difference(a, b, mask=mask, sample_weight=w)
    assert got == kb.metrics.paired_difference(a, b, mask=mask, sample_weight=full)
    assert got["mean"] == pytest.approx(np.sum(w * a) / np.sum(w), rel=1e-12)
    per_example = kb.metrics.paired_difference(a, b, mask=mask, sample_weight=[1., 2., 3., 4.])
    repeated = np.repeat([1., 2., 3.], [2, 1, 3])
    assert per_example["mean"] == pytest.approx(np.sum(repeated * a) / 13.0, rel=1e-12)


def test_paired_weights_as_many_as_scores_and_examples_are_read_only_when_unambiguous():
    """M = N = 4 scores (tokens 2, 0, 1, 1): weights [4] read per example weigh the
    first two scores alike, per score each its own; the call is refused, naming
    ``sample_weight``, and both readings are reachable in the mask's shape. Where the
    readings agree (one token per sequence, or equal weights) it passes. Before: read
    per example, silently."""
    a, b, mask = _tokens([2, 0, 1, 1])
    w = np.array([1.0, 3.0, 2.0, 4.0])
    with pytest.raises(ValueError, match=r"`sample_weight` must not be of length 4, both"):
        kb.metrics.paired_difference(a, b, mask=mask, sample_weight=w)
    per_score = np.zeros(mask.shape)
    per_score[mask] = w
    by_score = kb.metrics.paired_difference(a, b, mask=mask, sample_weight=per_score)
    by_example = kb.metrics.paired_difference(
        a, b, mask=mask, sample_weight=np.broadcast_to(w[:, None], mask.shape))
    assert by_score["mean"] == pytest.approx(np.sum(w * a) / 10.0, rel=1e-12)
    assert by_example["mean"] == pytest.approx(np.sum([1., 1., 2., 4.] * a) / 8.0, rel=1e-12)
    same = kb.metrics.paired_difference(a, b, mask=mask, sample_weight=np.full(4, 2.0))
    assert same["mean"] == pytest.approx(np.mean(a), rel=1e-12)
    a, b, mask = _tokens([1, 1, 1, 1])
    assert kb.metrics.paired_difference(a, b, mask=mask, sample_weight=w)["mean"] == (
        pytest.approx(np.sum(w * a) / 10.0, rel=1e-12))


def _three_logits():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3)(inputs)))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=LOSS)
    return model


def test_evaluate_weights_of_another_rank_than_the_loss_values():
    """Weights ``[N]`` or ``[N, 1]`` for labels ``[N]`` or ``[N, 1]`` of an output ``[N, 3]``
    give the weighted mean Σ w·ℓ / N (numpy, to float32 round-off), as plain Keras;
    ``[N, 1, 1]`` (which Keras broadcasts to ``[N, N, 1]``: 1.605 for 1.451 in a
    measurement) and ``[N, 2]`` (an InvalidArgumentError inside the compiled loss) are
    refused naming ``sample_weight``. Before: [N, 1, 1] gave the broadcast mean."""
    model = _three_logits()
    w = np.linspace(0.5, 2.0, N).astype("float32")
    terms = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(
        Y3, model.predict(X, verbose=0))
    expected = float(np.mean(w * keras.ops.convert_to_numpy(terms)))
    for labels, weights in ((Y3, w[:, None]), (Y3[:, None], w), (Y3[:, None], w[:, None])):
        # a fresh model each: Keras' retraced step fails on weights of another rank than
        # its last call's ("Cannot take the length of shape with unknown rank"), plain too
        got = _three_logits().evaluate(X, labels, sample_weight=weights, verbose=0,
                                       return_dict=True)
        assert got["nll"] == pytest.approx(expected, rel=1e-5)
    for weights in (w[:, None, None], np.stack([w, w], 1)):
        with pytest.raises(ValueError, match=r"evaluate: `sample_weight` must have shape \[N\] "
                                             r"or \[N, 1\] \(one weight an example\)"):
            model.evaluate(X, Y3, sample_weight=weights, verbose=0)


def test_one_hot_labels_must_be_distributions_over_the_outputs_classes():
    """Under ``CategoricalCrossentropy``: one-hot and soft labels of the output's shape pass
    (all-zero padding rows too); negative labels (a negative NLL: -1.106 in a
    measurement, plain Keras too), rows summing to 2 and class indices are refused
    naming ``y``. Before: only finiteness was checked; class indices reached Keras'
    "must have the same rank"."""
    model = _three_logits()
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N,
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    one_hot = np.eye(3, dtype="float32")[Y3]
    check_output_labels(model, one_hot)
    check_output_labels(model, np.full((N, 3), 1 / 3, "float32"))
    check_output_labels(model, np.vstack([one_hot[:-1], np.zeros((1, 3))]))
    with pytest.raises(ValueError, match=r"`y` must be one-hot labels or class probabilities, "
                                         r"in \[0, 1\].*; got values in \[-1, 0\]"):
        model.evaluate(X, -one_hot, verbose=0)
    with pytest.raises(ValueError, match=r"`y` must have rows summing to 1 .*; got row sums "
                                         r"such as \[2\.\]"):
        check_output_labels(model, np.minimum(one_hot + np.eye(3)[(Y3 + 1) % 3], 1))
    with pytest.raises(ValueError, match=r"`y` must be one-hot labels or class probabilities of "
                                         r"the output's shape \(None, 3\).*got shape \(20,\)"):
        check_output_labels(model, Y3)


def test_two_input_data_unbatched_or_of_another_shape_is_refused_naming_x():
    """A two-input model given ``Dataset.from_tensor_slices(({"a": xa, "b": xb}, y))``
    without ``batch``: refused as a one-input model's; arrays ``{"a": x4, "b": x4}`` for
    an input ``b`` of 2 features: refused naming ``x['b']``. Before: Keras' "Invalid
    input shape for input Tensor(...) with name 'a'" from inside the model's call, and
    "Matrix size-incompatible: In[0]: [20,8], In[1]: [6,3]" from the graph."""
    keras.utils.set_random_seed(0)
    inputs = {"a": keras.Input((4,), name="a"), "b": keras.Input((2,), name="b")}
    joined = keras.layers.Concatenate()([inputs["a"], inputs["b"]])
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3)(joined)))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=N, loss=LOSS)
    data = tf.data.Dataset.from_tensor_slices(({"a": X, "b": X[:, :2]}, Y3))
    with pytest.raises(ValueError, match=r"fit: `x` must yield batches of examples of shape "
                                         r"\(4,\), \(2,\) \(the model's inputs\)"):
        model.fit(data, epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"fit: `x\['b'\]` must hold examples of shape \(2,\) "
                                         r"\(the model's input\); got examples of shape \(4,\)"):
        model.fit({"a": X, "b": X}, Y3, epochs=1, verbose=0)
    model.fit(data.batch(10), epochs=1, verbose=0)
