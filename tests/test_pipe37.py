"""The batches of ``kb.array_order``'s shuffled arrays, pinned (pipe37's safety net).

``KeyedArrays``' TensorFlow pipeline was rebuilt for speed (1.27 ms a batch
against Keras' 0.61 in a fit of a small MLP: a per-batch map that sliced each
batch out of the pass's order, and tf.data's default graph rewrites): the
batches of a run must stay the ones drawn before, for the samples of existing
runs to reproduce. Each test here compares the batches the adapter yields
(its ``tf.data`` pipeline and its NumPy iterator, which JAX's shares) with an
independent statement of the order as it was drawn before the change:
``u ~ U(0, 1)^N`` from NumPy's PCG64 keyed on ``SeedSequence((0x0DE5, seed,
step))``, ``argsort(u)`` (stable) or, for ``shuffle="batch"``, the examples
sorted by ``(i // batch_size, u_i)``, cut into batches of ``batch_size``; an
epoch begun mid-pass continues its pass, then (passes ending with epochs) the
next one's first batches. These tests pass on the code before the change and
after it.
"""

import math

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter

from keras_bnn import array_order, priors

N, BATCH = 44, 8  # 6 batches a pass, the last of 4


def _model(seed, steps_per_execution=1):
    inputs = keras.Input((3,))
    model = kb.BayesianModel(inputs, keras.layers.Dense(
        2, kernel_regularizer=priors.Normal(0, 1.0))(inputs))
    model.compile(sampler=kb.samplers.SGHMC(step_size=1e-2, seed=seed), train_size=N,
                  steps_per_execution=steps_per_execution,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _order(seed, step, count, shuffle):
    """The order of one pass as it was drawn before the change."""
    u = np.random.default_rng(np.random.SeedSequence((0x0DE5, seed, step))).random(count)
    if shuffle == "batch":
        return np.lexsort((u, np.arange(count) // BATCH))
    return np.argsort(u, kind="stable")


def _expected(seed, step, count, shuffle, position=0, spans=False):
    """The index batches of an iterator made at an epoch ``position`` batches into the
    pass keyed on ``step``."""
    def batches(key):
        order = _order(seed, key, count, shuffle)
        return [order[start:start + BATCH] for start in range(0, count, BATCH)]

    passed = math.ceil(count / BATCH)
    tail = batches(step)[position:]
    return tail + batches(step + passed)[:position] if spans and position else tail


def _arrays(form):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    weights = rng.uniform(0.5, 1.5, N).astype("float32")
    if form == "dict":
        return {"a": x, "b": np.arange(N * 2, dtype="float32").reshape(N, 2)}, y, weights
    if form == "list":
        return [x, np.arange(N, dtype="int64")], y, weights
    return x, y, weights


def _batches(adapter, model, epoch, step, tf_data):
    model.optimizer.iterations.assign(step)
    adapter.epoch = epoch
    adapter.on_epoch_begin()
    iterator = adapter.get_tf_dataset() if tf_data else adapter.get_numpy_iterator()
    return [[np.asarray(leaf) for leaf in keras.tree.flatten(batch)] for batch in iterator]


def _assert_batches(got, x, y, weights, index_batches):
    assert len(got) == len(index_batches)
    for batch, indices in zip(got, index_batches):
        expected = keras.tree.flatten(keras.tree.map_structure(
            lambda array: array[indices], (x, y, weights)))
        assert len(batch) == len(expected)
        for leaf, want in zip(batch, expected):
            np.testing.assert_array_equal(leaf, want)


def test_pass_order_keeps_its_pinned_values():
    """``pass_order`` itself, pinned by value (drawn by the code before the change)."""
    assert array_order.pass_order(3, 8, 20, 8, True).tolist() == [
        16, 18, 11, 1, 14, 12, 6, 7, 17, 13, 15, 0, 9, 5, 4, 8, 19, 10, 3, 2]
    assert array_order.pass_order(3, 8, 20, 8, "batch").tolist() == [
        1, 6, 7, 0, 5, 4, 3, 2, 11, 14, 12, 13, 15, 9, 8, 10, 16, 18, 17, 19]
    assert array_order.pass_order(0, 0, 20, 8, True).tolist() == [
        17, 6, 4, 13, 16, 15, 8, 2, 0, 11, 10, 3, 14, 18, 5, 19, 1, 7, 12, 9]
    for seed, step in [(0, 0), (3, 12), (11, 7)]:
        for shuffle in (True, "batch"):
            np.testing.assert_array_equal(array_order.pass_order(seed, step, N, BATCH, shuffle),
                                          _order(seed, step, N, shuffle))


@pytest.mark.parametrize("tf_data", [True, False], ids=["tf_data", "numpy"])
@pytest.mark.parametrize("shuffle", [True, "batch"])
@pytest.mark.parametrize("form", ["array", "dict", "list"])
def test_whole_passes_are_the_keyed_batches(form, shuffle, tf_data):
    """Epochs of a whole pass, each keyed on its step counter, for several seeds:
    the remainder batch last, the sample weights and every input gathered alike."""
    x, y, weights = _arrays(form)
    for seed in (0, 3):
        model = _model(seed)
        kwargs = array_order.keyed_arrays(model, dict(x=x, y=y, sample_weight=weights,
                                                      batch_size=BATCH, shuffle=shuffle))
        adapter = kwargs["x"]
        for epoch, step in [(0, 0), (1, 6), (2, 12), (0, 5)]:
            got = _batches(adapter, model, epoch, step, tf_data)
            _assert_batches(got, x, y, weights, _expected(seed, step, N, shuffle))


@pytest.mark.parametrize("tf_data", [True, False], ids=["tf_data", "numpy"])
@pytest.mark.parametrize("steps_per_epoch, steps_per_execution, spans", [
    (2, 1, True),  # 3 epochs a pass: a resumed epoch runs on into the next pass
    (3, 2, False),  # epochs of 4, then 2 (cut at the pass's end)
    (4, 1, False),
])
def test_an_epoch_begun_mid_pass_continues_it(
        steps_per_epoch, steps_per_execution, spans, tf_data):
    """A fit resumed at epoch 1 (``pass_position``): the pass from the epoch's
    position, then, where passes end with epochs, the next pass's first batches
    (the remainder batch in the middle)."""
    x, y, weights = _arrays("array")
    model = _model(5, steps_per_execution)
    adapter = array_order.keyed_arrays(model, dict(
        x=x, y=y, sample_weight=weights, batch_size=BATCH, shuffle=True,
        steps_per_epoch=steps_per_epoch))["x"]
    position = math.ceil(steps_per_epoch / steps_per_execution) * steps_per_execution
    assert array_order.pass_position(1, 6, steps_per_epoch, steps_per_execution) == (
        position, spans)
    got = _batches(adapter, model, 1, 20 + position, tf_data)
    _assert_batches(got, x, y, weights, _expected(5, 20, N, True, position, spans))


@pytest.mark.parametrize("tf_data", [True, False], ids=["tf_data", "numpy"])
@pytest.mark.parametrize("shuffle", [True, "batch"])
def test_split_and_class_weights_are_the_keyed_batches(shuffle, tf_data):
    """``validation_split``'s rows (the last) kept out; ``class_weight``'s weights
    gathered with their examples."""
    x, y, _ = _arrays("array")
    model = _model(2)
    kwargs = array_order.keyed_arrays(model, dict(
        x=x, y=y, batch_size=BATCH, shuffle=shuffle, validation_split=0.25,
        class_weight={0: 0.5, 1: 2.0}))
    kept = N - math.ceil(N * 0.25)
    assert kwargs["x"]._num_samples == kept == 33  # 5 batches, the last of 1
    weights = np.where(y == 1, 2.0, 0.5).astype("float32")
    got = _batches(kwargs["x"], model, 0, 9, tf_data)
    _assert_batches(got, x[:kept], y[:kept], weights[:kept], _expected(2, 9, kept, shuffle))


@pytest.mark.parametrize("count", [40, 44])
def test_the_element_spec_is_keras_own(count):
    """Batches of a static size where every batch is full (40 examples, 5 batches
    of 8), as Keras' adapter gives them, and still the keyed ones; of a dynamic
    size with a short batch. (Before, always dynamic: (None, 3) against Keras'
    (8, 3) for 40 examples.)"""
    x, y, weights = (array[:count] for array in _arrays("array"))
    model = _model(4)
    adapter = array_order.keyed_arrays(model, dict(x=x, y=y, sample_weight=weights,
                                                   batch_size=BATCH))["x"]
    keras_own = ArrayDataAdapter(x, y, weights, batch_size=BATCH, shuffle=True)
    assert adapter.get_tf_dataset().element_spec == keras_own.get_tf_dataset().element_spec
    got = _batches(adapter, model, 0, 3, tf_data=True)
    _assert_batches(got, x, y, weights, _expected(4, 3, count, True))
