"""Review leftovers: kinetic_temperature_report's errors name the variable; brier
without a one-hot copy; the diagnostics split keeps kb.diagnostics' names; chain_weights and
chain_predictions take a run's stores as to_inference_data does."""

import tracemalloc

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import diagnostics, metric_inputs, metrics, stored_chains, temperature_report


@pytest.mark.parametrize("per_variable, shown", [
    ({"dense/kernel": (1.0, 0)}, r"\(1\.0, 0\)"),
    ({"dense/kernel": (1.0, 2.5)}, r"\(1\.0, 2\.5\)"),
    ({"dense/kernel": (1.0, [3, 4])}, r"\(1\.0, \[3, 4\]\)"),
    ({"dense/kernel": ("hot", 3)}, r"\('hot', 3\)"),
    ([("ok", 1.0, 10), ("dense/kernel", 1.0, -1)], r"\(1\.0, -1\)")])
def test_kinetic_temperature_report_names_the_variable_of_a_bad_entry(per_variable, shown):
    # Before: "`d` must be an int >= 1; got 0." (no variable), or numpy's own
    # "could not convert string to float" / "inhomogeneous shape".
    with pytest.raises(ValueError, match=r"kinetic_temperature_report: `per_variable\["
                                         r"'dense/kernel'\]` must be a \(T_kin, d\) pair: "
                                         r"T_kin a number, d an int >= 1 .*; got " + shown):
        diagnostics.kinetic_temperature_report(per_variable, temperature=1.0)


def test_kinetic_temperature_report_keeps_good_entries_and_nan():
    rows = diagnostics.kinetic_temperature_report(
        {"w": (np.float32(1.0), np.int64(100)), "b": (float("nan"), 4)}, temperature=1.0)
    rows = [(row.name, row.d, row.inside_band) for row in rows]
    assert rows == [("w", 100, True), ("b", 4, False)]
    assert isinstance(rows[0][1], int)


def test_diagnostics_names_are_their_homes():
    for name in ("chain_weights", "chain_predictions", "to_inference_data"):
        assert getattr(diagnostics, name) is getattr(stored_chains, name)
    for name in ("temperature_band", "KineticTemperatureRow", "kinetic_temperature_report"):
        assert getattr(diagnostics, name) is getattr(temperature_report, name)
    assert all(hasattr(diagnostics, name) for name in diagnostics.__all__)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's helpers")
def test_backend_takes_the_distribute_helpers_from_their_home():
    """TensorFlow's five tf.distribute names come from tensorflow_distribute.py
    itself (before: assignments in tensorflow.py that handed them on)."""
    from keras_bnn import backend  # noqa: PLC0415 - imports TensorFlow
    from keras_bnn.backend import tensorflow, tensorflow_distribute  # noqa: PLC0415

    names = ("num_replicas", "adopt_current_strategy", "loss_as_shard", "assign_replicated",
             "assign_where")
    assert all(getattr(backend, name) is getattr(tensorflow_distribute, name) for name in names)
    assert [name for name in names if hasattr(tensorflow, name)] == []


def _old_brier(probs, labels, mask=None, sample_weight=None):
    """The formula brier had: Σ_k (p_k - onehot_k)², by a one-hot copy of p."""
    p = metric_inputs.two_class(probs)
    y = np.asarray(labels).reshape(p.shape[:-1])
    keep = np.ones(y.shape, bool) if mask is None else np.asarray(mask)
    w = None if sample_weight is None else np.broadcast_to(
        np.asarray(sample_weight, float).reshape(
            np.shape(sample_weight) + (1,) * (y.ndim - np.ndim(sample_weight))), y.shape)[keep]
    p, y = p[keep].astype(np.float64), y[keep]
    terms = np.sum((p - np.eye(p.shape[-1])[y]) ** 2, axis=-1)
    return np.average(terms, weights=w) / (2.0 if np.shape(probs)[-1] == 1 else 1.0)


@pytest.mark.parametrize("shape", [(64, 5), (16, 7, 3), (40, 1)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_brier_equals_the_one_hot_formula(shape, masked, weighted):
    """Σ p² - 2 p_y + 1 is the one-hot sum; float64 rounding of terms <= 2 is
    ~1e-15, so 1e-12 is a tolerance with room to spare."""
    rng = np.random.default_rng(sum(shape) + 2 * masked + weighted)
    *positions, classes = shape
    if classes == 1:
        probs = rng.uniform(size=shape)
        labels = rng.integers(0, 2, positions)
    else:
        probs = rng.dirichlet(np.full(classes, 0.3), size=positions).astype(np.float32)
        labels = rng.integers(0, classes, positions)
        probs[0, ..., :] = 0.0  # an exact, confident, correct prediction: a term of 0
        probs[0, ..., 0] = 1.0
        labels[0, ...] = 0
    mask = rng.uniform(size=positions) < 0.7 if masked else None
    if masked:
        mask.flat[0] = True
    weights = rng.uniform(0.0, 3.0, size=positions[:1]) if weighted else None
    got = metrics.brier(probs, labels, mask=mask, sample_weight=weights)
    assert got == pytest.approx(_old_brier(probs, labels, mask, weights), abs=1e-12)
    assert 0.0 <= got <= (1.0 if classes == 1 else 2.0)


def test_brier_makes_no_copy_of_the_probabilities_beyond_nlls():
    """Structural: brier's peak allocation is nll's (the checked float64 copy)
    plus O(N), not two more [N, K] arrays (before: 3 copies, 121 vs 41 MB on
    a 40 MB float64 input). tracemalloc counts numpy's allocations exactly."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(50), size=20_000)  # 8 MB
    labels = rng.integers(0, 50, 20_000)
    peaks = {}
    for name in ("nll", "brier"):
        tracemalloc.start()
        getattr(metrics, name)(probs, labels)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks["brier"] < peaks["nll"] + probs.nbytes / 4, peaks


def _store(path, units):
    """A store of 3 draws of a 4 → ``units`` Dense head whose kernel moves by 1 a draw."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(units)(inputs)))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=8, allow_flat_prior=True,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(path)
    for _ in range(3):
        model.layers[-1].kernel.assign_add(np.ones((4, units), "float32"))
        store.append(model)
    return store


def test_chain_weights_and_predictions_take_the_sources_to_inference_data_takes(tmp_path):
    """A store, a run's path, or a list: as ``to_inference_data``. Before: ``chain_weights(
    store)`` "TypeError: object of type 'Sample' has no len()", a path "AttributeError:
    'str' object has no attribute 'weights'", ``[]`` "min() arg is an empty sequence",
    two architectures numpy's "inhomogeneous shape"."""
    store, other = _store(tmp_path / "a", 3), _store(tmp_path / "b", 2)
    weights = stored_chains.chain_weights([store])
    assert weights.shape == (1, 3, 12)  # the kernel varies, the bias does not
    np.testing.assert_allclose(np.diff(weights, axis=1), 1.0, rtol=1e-6)  # float32 steps
    for source in (store, str(tmp_path / "a")):
        np.testing.assert_array_equal(stored_chains.chain_weights(source), weights)
    assert stored_chains.chain_predictions(store, np.zeros((2, 4), "float32")).shape == (
        1, 3, 2, 3)
    for call in (stored_chains.chain_weights, lambda s: stored_chains.chain_predictions(
            s, np.zeros((2, 4), "float32"))):
        with pytest.raises(ValueError, match="holds no sample store"):
            call([])
        with pytest.raises(ValueError, match="of different architectures"):
            call([store, other])


def test_kinetic_temperature_report_keeps_every_variable_of_one_path():
    """Keras gives two layers of one name in a subclassed model one path
    ('m/head/kernel' twice); each is a row. Before: the triples went through a dict
    and the first variable's row was lost (1 row for 2 variables)."""
    rows = diagnostics.kinetic_temperature_report(
        [("m/head/kernel", 1.0, 1000), ("m/head/kernel", 5.0, 1000), ("m/b", 1.0, 10)],
        temperature=1.0)
    assert [(row.name, row.t_kin, row.inside_band) for row in rows] == [
        ("m/head/kernel", 1.0, True), ("m/head/kernel", 5.0, False), ("m/b", 1.0, True)]
