"""The weights ``fit`` finds in a dataset, a ``PyDataset`` or a generator.

``U(θ) = n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)``: weights of mean m weigh the
data as m·n examples. Array weights were checked before training; weights
yielded with the data (``(x, y, w)``) and ``class_weight`` with a dataset
were not, and a posterior 3 times too narrow was sampled without a word.
The train step now counts them and ``fit`` warns after the first epoch
(:mod:`keras_bnn.models.weight_mean`).
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import LOSS, softmax_regression, three_class_rows

N = 20
X, Y = three_class_rows(N)
#: Weights of mean 3 (as inverse class frequencies can be), and the same divided by it.
HEAVY = np.linspace(1.0, 5.0, N).astype("float32")
NORMALISED = HEAVY / HEAVY.mean()


def _model(loss=LOSS):
    return softmax_regression("sgld", N, loss=loss)


def _dataset(weights=None):
    rows = (X, Y) if weights is None else (X, Y, weights)
    return tf.data.Dataset.from_tensor_slices(rows).batch(5)


class _WeightedBatches(keras.utils.PyDataset):
    def __init__(self, weights):
        super().__init__()
        self.weights = weights

    def __len__(self):
        return N // 5

    def __getitem__(self, index):
        rows = slice(5 * index, 5 * index + 5)
        return X[rows], Y[rows], self.weights[rows]


def _generator(weights):
    for start in range(0, N, 5):
        yield X[start:start + 5], Y[start:start + 5], weights[start:start + 5]


def _train_size_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(w.message) for w in caught if issubclass(w.category, kb.TrainSizeWarning)]


@pytest.mark.parametrize("data", [  # one kind in the default suite (its 20 minutes)
    pytest.param(_dataset, id="tf.data"),
    pytest.param(_WeightedBatches, id="PyDataset", marks=pytest.mark.slow),
    pytest.param(_generator, id="generator", marks=pytest.mark.slow)])
def test_weights_in_the_data_whose_mean_is_not_one_warn(data):
    """Weights of mean 3 yielded with the data: no warning (a posterior as if
    the training set were 3 times larger); divided by their mean, none is due."""
    messages = _train_size_warnings(lambda: _model().fit(data(HEAVY), epochs=2, verbose=0))
    assert len(messages) == 1  # after the first epoch only
    assert ("the sample_weight in fit's data has mean 3 over the first epoch's 20 weights"
            in messages[0]) and "as 60 examples" in messages[0]
    assert _train_size_warnings(lambda: _model().fit(data(NORMALISED), epochs=1,
                                                     verbose=0)) == []


def test_class_weight_with_a_dataset_warns():
    """Keras maps class_weight into the dataset's per-example weights: {2: 4}
    on 7 + 7 + 6 rows has mean 1.9, and was not checked with a dataset."""
    messages = _train_size_warnings(lambda: _model().fit(
        _dataset(), epochs=1, verbose=0, class_weight={2: 4.0}))
    assert len(messages) == 1
    assert "fit's class_weight has mean 1.9 over the first epoch's 20 weights" in messages[0]


def test_the_first_epoch_is_counted_whole_across_validation():
    """Keras resets every metric at ``evaluate`` (each epoch's validation);
    the totals must outlive it, and validation's weights do not count."""
    messages = _train_size_warnings(lambda: _model().fit(
        _dataset(HEAVY), epochs=1, verbose=0, validation_data=_dataset(NORMALISED)))
    assert len(messages) == 1 and "has mean 3 over the first epoch's 20 weights" in messages[0]
    assert _train_size_warnings(lambda: _model().fit(
        _dataset(NORMALISED), epochs=1, verbose=0, validation_data=_dataset(HEAVY))) == []


def test_no_warning_where_it_is_not_due():
    """A loss that normalises the weights in each batch needs no check; array
    weights are checked before training, once (not again after the epoch)."""
    normalising = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")
    assert _train_size_warnings(lambda: _model(normalising).fit(
        _dataset(HEAVY), epochs=1, verbose=0)) == []
    messages = _train_size_warnings(lambda: _model().fit(
        X, Y, sample_weight=HEAVY, batch_size=5, epochs=1, verbose=0))
    assert len(messages) == 1 and "over the 20 training examples" in messages[0]


def test_a_partial_epoch_allows_the_sampling_error_of_its_mean():
    """With steps_per_epoch an epoch is a sample of the weights: any 15 of
    the 20 mean-1 weights (s ≈ 0.40) have a mean within 0.18 of 1, inside
    0.01 + 4 standard errors (≥ 0.32 for any 15 of them); any 15 of the
    mean-3 weights have a mean ≥ 2.47, beyond them (≤ 1.45)."""
    def fit(weights):
        data = tf.data.Dataset.from_tensor_slices((X, Y, weights)).shuffle(
            N, seed=1).repeat().batch(5)
        return lambda: _model().fit(data, epochs=1, steps_per_epoch=3, verbose=0)

    assert _train_size_warnings(fit(NORMALISED)) == []
    assert len(_train_size_warnings(fit(HEAVY))) == 1


def test_the_count_logs_nothing():
    """A guard: the step's totals are a metric, but one that logs no key."""
    def keys(weights):
        return set(_model().fit(_dataset(weights), epochs=1, verbose=0,
                                validation_data=_dataset(weights)).history)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.TrainSizeWarning)
        assert keys(HEAVY) == keys(None)


def _fits_warned(calls):
    """``[(line, message)]`` of the TrainSizeWarnings of ``calls()`` under the default filter."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        calls()
    return [(w.lineno, str(w.message)) for w in caught
            if issubclass(w.category, kb.TrainSizeWarning) and w.filename == __file__]


def test_a_later_fit_warns_as_the_array_check_does():
    """Each ``fit`` checks the weights it is given (a later one may be given other
    weights), and both checks name the line that called ``fit``, so that Python's
    filters treat them alike: the default filter shows a message once per calling
    line (a loop of fits: once), ``"always"`` at every fit. Before, the dataset
    check named a line of ``weight_mean.py``: one message in the whole process,
    another model's fit from another line (its own run) was not warned."""
    model = _model()

    def loop():
        for _ in range(2):
            model.fit(_dataset(HEAVY), epochs=1, verbose=0)  # DATASET_LINE
            model.fit(X, Y, sample_weight=HEAVY, batch_size=5, epochs=1, verbose=0)  # ARRAY
        _model().fit(_dataset(HEAVY), epochs=1, verbose=0)  # ANOTHER_MODEL

    source = open(__file__, encoding="utf-8").read().splitlines()
    line = {tag: next(i + 1 for i, text in enumerate(source) if text.endswith(f"# {tag}"))
            for tag in ("DATASET_LINE", "ARRAY", "ANOTHER_MODEL")}
    warned = _fits_warned(loop)
    assert [at for at, _ in warned] == [line["DATASET_LINE"], line["ARRAY"],
                                        line["ANOTHER_MODEL"]], warned
    assert "in fit's data has mean 3" in warned[0][1] and warned[2][1] == warned[0][1]
    # A guard (as before): under "always", every fit warns about its data.
    messages = _train_size_warnings(lambda: [model.fit(_dataset(HEAVY), epochs=1, verbose=0)
                                             for _ in range(2)])
    assert len(messages) == 2 and messages[0] == messages[1]


def test_a_train_size_warning_names_the_line_that_called_fit():
    """Every TrainSizeWarning names the user's line, however many of keras_bnn's own
    frames ``fit`` passes through: when fit's checks moved to
    ``models/entry_points.py`` (2026-11-29) the stacklevels counted from the old
    depth and named ``bayesian_model.py``'s line instead."""
    model = _model()

    def fits():
        model.fit(X[:N // 2], Y[:N // 2], batch_size=5, epochs=1, verbose=0)  # HALF_THE_DATA

    source = open(__file__, encoding="utf-8").read().splitlines()
    line = next(i + 1 for i, text in enumerate(source) if text.endswith("# HALF_THE_DATA"))
    warned = _fits_warned(fits)
    assert [at for at, _ in warned] == [line], warned
    assert f"fit trains on {N // 2} examples but compile(train_size={N})" in warned[0][1]
