"""Labels out of range in a dataset's later batches (helpers labels38, labels39).

``fit`` and ``evaluate`` check arrays and a dataset's first batch on the host
(:mod:`keras_bnn.label_checks`); a later batch's class index 10 of a 10-class
head, or -1, was scored 0 nats under JAX and trained on silently (an
ensemble's ``evaluate`` read NaN for 10, class 9 for -1), and a Bernoulli
label 2 was trained on silently on both backends. The steps now count them
(:func:`keras_bnn.label_checks.count_labels`) and ``fit`` raises at the end
of the epoch, ``evaluate`` at its end, naming ``y`` and the allowed range.
labels39: one output's labels in a tuple or a dict (``(x, {"out": y})``) are
counted too (labels38's count raised ``TypeError: Expected any non-tensor
type, but got a tensor instead`` on them, tests/test_fit_forms.py).

Before the fix (dev at 9bebe3b): the JAX process's fits and evaluations
returned (``sgld`` nll 2.387, the ensemble's ``evaluate`` nan) and the
Bernoulli fit on TensorFlow returned: "DID NOT RAISE".
"""

import io
import warnings
import zipfile

import h5py

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import label_checks
from keras_bnn.models import sampling_step
from mirrored import new_mirrored

N, K = 40, 10
X = np.random.default_rng(0).normal(size=(N, 4)).astype("float32")
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

#: Puts tests/ on the path of the JAX process: it runs :func:`jax_label_errors`.
JAX_LABELS = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
              "from test_labels39 import jax_label_errors; "
              "print('RESULT ' + json.dumps(jax_label_errors(sys.argv[2])))")


def _labels(bad=None, row=25):
    """Classes 0..9 in turn, with ``bad`` at ``row`` (the third batch of 10)."""
    y = (np.arange(N) % K).astype("int32")
    if bad is not None:
        y[row] = bad
    return y


def _batches(y, rows=10):
    """A generator of ``(x, y)`` batches of ``rows``, endlessly (``steps`` says how many)."""
    while True:
        for start in range(0, N, rows):
            yield X[start:start + rows], y[start:start + rows]


def _error_of(call):
    """None where ``call()`` returns, else the type and message of what it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except Exception as raised:  # the test checks its type and message
        return f"{type(raised).__name__}: {raised}"
    return None


def _model(sampler="sgld", units=K, loss=LOSS):
    keras.utils.set_random_seed(0)
    net = kb.models.mlp((4,), units, hidden=(8,))
    net.compile(sampler=sampler, train_size=N, loss=loss)
    return net


def _named_bernoulli_model():
    """:func:`_model`'s network of one logit, its output in a dict: ``{"out": logit}``."""
    net = _model(units=1, loss=None)
    named = kb.bayesian(keras.Model(net.inputs, {"out": net.outputs[0]}))
    named.compile(sampler="sgld", train_size=N,
                  loss={"out": keras.losses.BinaryCrossentropy(from_logits=True)})
    return named


def _counting_traces():
    """Makes each trace of the train step (a call of ``sampling_step``'s Python body)
    append to the list returned (the caller puts the function back)."""
    traces, original = [], sampling_step.sampling_step

    def traced(model, data):
        traces.append(1)
        return original(model, data)

    sampling_step.sampling_step = traced
    return traces


def jax_label_errors(folder):
    """In the JAX process: ``fit`` (SGLD, HMC, 4 steps of 10) and ``evaluate`` of a
    generator whose third batch holds a bad class index, an ensemble's ``evaluate``,
    and the same with good labels (fit twice: the traces of the train step counted).

    Returns:
        dict of the errors (None where the call returned) and ``traces``: the
        train step's traces after the first and after the second good ``fit``.
    """
    traces = _counting_traces()
    result = {}
    net = _model()
    for bad in (10, -1):
        result[f"fit {bad}"] = _error_of(lambda: net.fit(
            _batches(_labels(bad)), steps_per_epoch=4, epochs=2, verbose=0))
        result[f"evaluate {bad}"] = _error_of(lambda: net.evaluate(
            _batches(_labels(bad)), steps=4, verbose=0))
    result["hmc fit 10"] = _error_of(lambda: _model("hmc").fit(
        _batches(_labels(10)), steps_per_epoch=4, epochs=1, verbose=0))
    store = kb.SampleStore(folder)
    store.append(net)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    result["ensemble 10"] = _error_of(lambda: ensemble.evaluate(
        _batches(_labels(10)), steps=4, verbose=0))
    result["ensemble good"] = _error_of(lambda: ensemble.evaluate(
        _batches(_labels()), steps=4, verbose=0))
    good = _model()
    result["fit good"] = _error_of(lambda: good.fit(_batches(_labels()), steps_per_epoch=4,
                                                    epochs=2, verbose=0))
    first = len(traces)
    result["fit good again"] = _error_of(lambda: good.fit(
        _batches(_labels()), steps_per_epoch=4, epochs=2, verbose=0))
    result["evaluate good"] = _error_of(lambda: good.evaluate(_batches(_labels()), steps=4,
                                                              verbose=0))
    result["traces"] = [first, len(traces)]
    return result


@pytest.fixture(scope="module")
def jax_errors(tmp_path_factory):
    pytest.importorskip("jax")
    from test_jax_user import _jax_process  # the JAX process imports this file

    return _jax_process(JAX_LABELS, str(tmp_path_factory.mktemp("samples")))


@pytest.mark.slow
@pytest.mark.parametrize("call", ["fit 10", "fit -1", "hmc fit 10", "evaluate 10",
                                  "evaluate -1", "ensemble 10"])
def test_jax_raises_on_a_later_batch_s_class_index_out_of_range(jax_errors, call):
    """Under JAX a class index 10 (or -1) of a 10-class head in a generator's third
    batch makes ``fit`` raise at the epoch's end and ``evaluate`` at its end,
    naming ``y`` and [0, 10). Before: they returned (nll 2.387; an ensemble's
    ``evaluate`` NaN for 10, a finite score for -1)."""
    error = jax_errors[call]
    assert error is not None, f"{call}: did not raise"
    owner = "evaluate" if "evaluate" in call or "ensemble" in call else "fit"
    assert error.startswith(f"ValueError: {owner}: 1 label "), error
    assert "`y` must be class indices in [0, 10)" in error, error


@pytest.mark.slow
def test_jax_good_labels_pass_and_the_count_costs_no_retrace(jax_errors):
    """Good labels: ``fit`` (twice), ``evaluate`` and an ensemble's ``evaluate``
    return, and the second ``fit`` traces no train step (the count was made
    once, before the first)."""
    for call in ("fit good", "fit good again", "evaluate good", "ensemble good"):
        assert jax_errors[call] is None, (call, jax_errors[call])
    first, second = jax_errors["traces"]
    assert first >= 1 and second == first


def _bernoulli_labels(bad_rows):
    y = (X[:, 0] > 0).astype("float32")[:, None]
    y[list(bad_rows)] = 2.0
    return y


def test_a_later_batch_s_bernoulli_label_2_raises_at_the_epoch_end():
    """TensorFlow scores a Bernoulli label 2 without an error; in the third batch
    of a dataset ``fit`` now raises at the end of the first epoch naming ``y`` and
    {0, 1}, the chain's later epochs not run. Before: DID NOT RAISE."""
    net = _model(units=1, loss=keras.losses.BinaryCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((X, _bernoulli_labels([25, 27]))).batch(10)
    with pytest.raises(ValueError, match=r"fit: 2 labels in epoch 0's batches .* `y` must be "
                                         r"0 or 1 for a Bernoulli likelihood"):
        net.fit(data, epochs=3, verbose=0)
    assert int(net.optimizer.iterations.numpy()) == 4
    with pytest.raises(ValueError, match=r"evaluate: 2 labels in the data's batches"):
        net.evaluate(data, verbose=0)


def test_good_labels_count_nothing_and_trace_once_on_tensorflow():
    """Good labels: fit twice and evaluate return; the train step is traced by the
    first fit only (the count adds no retrace)."""
    original = sampling_step.sampling_step
    traces = _counting_traces()
    try:
        net = _model()
        data = tf.data.Dataset.from_tensor_slices((X, _labels())).batch(10)
        net.fit(data, epochs=2, verbose=0)
        first = len(traces)
        net.fit(data, epochs=2, verbose=0)
        net.evaluate(data, verbose=0)
    finally:
        sampling_step.sampling_step = original
    assert first >= 1 and len(traces) == first
    assert net._label_counts.read(label_checks.TRAINING) == 0.0


def test_the_count_is_summed_over_replicas():
    """Under a MirroredStrategy of 2 replicas, bad labels in either replica's half of
    a batch are counted: 2 in all (rows 25 and 29 of a batch of 10 at rows 20-29)."""
    with new_mirrored().scope():
        net = _model(units=1, loss=keras.losses.BinaryCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((X, _bernoulli_labels([21, 29]))).batch(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"fit: 2 labels in epoch 0's batches"):
            net.fit(data, epochs=1, verbose=0)


def test_tensorflow_s_error_for_a_later_class_index_out_of_range_is_ours():
    """On a CPU TensorFlow's loss stops the step at a class index 10 of 10 classes in a
    dataset's third batch; ``fit`` and ``evaluate`` now raise a ``ValueError`` naming
    ``y``, [0, 10) and the label. Before: TensorFlow's bare ``InvalidArgumentError``
    ("Received a label value of 10 which is outside the valid range of [0, 10)")."""
    net = _model()
    data = tf.data.Dataset.from_tensor_slices((X, _labels(10))).batch(10)
    for owner, call in (("fit", lambda: net.fit(data, epochs=1, verbose=0)),
                        ("evaluate", lambda: net.evaluate(data, verbose=0))):
        with pytest.raises(ValueError, match=rf"^{owner}: `y` must be class indices in "
                                             r"\[0, 10\) .*; got 10 in a batch"):
            call()


@pytest.mark.parametrize("form", ["(x, {out: y})", "(x, (y,))"])
def test_one_output_s_labels_in_a_dict_or_tuple_are_counted(form):
    """A dataset of ``(x, {"out": y})`` (output ``{"out": logit}``) or ``(x, (y,))``
    whose third batch holds two Bernoulli labels 2: ``fit`` raises at the epoch's
    end, naming the labels. Before: labels38's count raised "TypeError: Expected
    any non-tensor type, but got a tensor instead"; dev before it, DID NOT RAISE."""
    labels = _bernoulli_labels([25, 27])
    if form == "(x, (y,))":
        net, structure, name = _model(units=1, loss=keras.losses.BinaryCrossentropy(
            from_logits=True)), (labels,), r"`y\[0\]`"
    else:
        net, structure, name = _named_bernoulli_model(), {"out": labels}, r"`y\['out'\]`"
    data = tf.data.Dataset.from_tensor_slices((X, structure)).batch(10)
    with pytest.raises(ValueError, match=rf"fit: 2 labels in epoch 0's batches .* {name} must "
                                         r"be 0 or 1 for a Bernoulli likelihood"):
        net.fit(data, epochs=2, verbose=0)
    with pytest.raises(ValueError, match=rf"evaluate: 2 labels .* {name} must be 0 or 1"):
        net.evaluate(data, verbose=0)


def _later_bad_batches(y, good_batches):
    """``good_batches`` batches of ``(x, y)`` of 10, then batches with label 2 in row 5."""
    bad = y.copy()
    bad[5::10] = 2.0
    for count in range(100):
        labels = y if count < good_batches else bad
        start = 10 * (count % 4)
        yield X[start:start + 10], labels[start:start + 10]


def test_samples_collected_before_the_epoch_that_raises_are_kept(tmp_path):
    """A generator whose second epoch holds Bernoulli labels 2: ``fit`` raises at that
    epoch's end before its sample is taken; epoch 0's sample stays in the store."""
    net = _model(units=1, loss=keras.losses.BinaryCrossentropy(from_logits=True))
    store = kb.SampleStore(str(tmp_path / "samples"))
    collect = kb.callbacks.CollectSamples(store, start_epoch=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"fit: 4 labels in epoch 1's batches"):
            net.fit(_later_bad_batches(_bernoulli_labels([]), 4), steps_per_epoch=4,
                    epochs=3, verbose=0, callbacks=[collect])
    assert int(net.optimizer.iterations.numpy()) == 8
    assert len(kb.SampleStore(str(tmp_path / "samples"))) == 1


def test_a_model_saved_after_fit_holds_no_count_and_loads(tmp_path):
    """The count is no part of a ``.keras`` file (the same variables as without it:
    checked against dev's file by hand, loaded both ways): the file of a model that
    counted loads, and evaluates and trains as the model did."""
    net = _model()
    data = tf.data.Dataset.from_tensor_slices((X, _labels())).batch(10)
    net.fit(data, epochs=1, verbose=0)
    assert net._label_counts is not None
    path = str(tmp_path / "model.keras")
    net.save(path)
    with zipfile.ZipFile(path) as archive, h5py.File(
            io.BytesIO(archive.read("model.weights.h5")), "r") as weights:
        names = []
        weights.visit(names.append)
    assert not [name for name in names if "label" in name or "metric" in name], names
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.evaluate(data, verbose=0), net.evaluate(data, verbose=0),
                               rtol=1e-6)
    loaded.fit(data, epochs=1, verbose=0)
