"""Three gaps in ``BayesianModel.fit``'s checks, closed 2026-11-29.

1. Unlabelled rows of an output ``[N, K]``: ``SparseCategoricalCrossentropy(
   ignore_class=-1)`` averages over the labels not -1, so ``train_size``
   counts those (as it counts a tagger's padding labels,
   tests/test_padding_labels.py), for arrays, a dataset and under
   ``tf.distribute``.
2. ``validation_data=(x, y, w)``: the weights' shape and mean are checked as
   ``fit``'s own.
3. Under JAX the Keras mask reaches the train step's predictions, so a masked
   per-timestep loss's terms are counted there as on TensorFlow.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import loss_terms
from fit_helpers import Batches, softmax_regression, tagged_sequences, three_class_rows
from test_per_timestep_loss import tagger, train_size_warnings

N, SCORED = 33, 21  # 33 rows: the first 17 labelled, then one in 4 of the other 16


def unlabelled_rows():
    """Rows of three classes; rows 17.. unlabelled (-1) but one in 4: 21 labels scored."""
    x, y = three_class_rows(N)
    y = y.copy()
    y[17:][np.arange(N - 17) % 4 != 0] = -1
    assert int((y != -1).sum()) == SCORED
    return x, y


def classifier(train_size, strategy=None):
    """A softmax regression whose loss leaves the label -1 out of its mean."""
    return softmax_regression(
        kb.samplers.SGLD(step_size=1e-2, seed=1), train_size, strategy,
        keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1))


def test_unlabelled_rows_are_not_counted_as_examples():
    """``fit`` counted the 33 rows: ``train_size=33`` trained silently with the
    likelihood weighing its 21 labels as 33 (1.57 times too much), and the
    right ``train_size=21`` warned "fit trains on 33 examples". Weights 2 at the
    unlabelled rows, 1 at the labelled, average 1 over what the loss counts
    (they warned of mean 1.364 = 45/33)."""
    x, y = unlabelled_rows()
    assert loss_terms.training_terms(classifier(SCORED), x, y, N) == (float(SCORED), 1)
    weights = np.where(y == -1, 2.0, 1.0).astype("float32")
    assert train_size_warnings(classifier(SCORED), x, y, sample_weight=weights,
                               batch_size=11, epochs=1) == []
    messages = train_size_warnings(classifier(N), x, y, batch_size=11, epochs=1)
    assert len(messages) == 1
    assert "fit trains on 33 examples of which 21 have labels the loss scores" in messages[0]
    assert "Pass train_size=the number of labels scored (21;" in messages[0]


def test_a_datasets_scored_labels_are_counted_after_the_first_epoch():
    """Its first batch (rows 0-10) is all labelled: ``train_size=21`` warned
    "about 33 examples" before training, ``train_size=33`` trained silently.
    The step counts the labels scored, exactly, after a first one-pass epoch;
    a ``train_size`` above the examples warns once, before training."""
    dataset = tf.data.Dataset.from_tensor_slices(unlabelled_rows()).batch(11)
    assert train_size_warnings(classifier(SCORED), dataset, epochs=1) == []
    messages = train_size_warnings(classifier(N), dataset, epochs=1)
    assert len(messages) == 1
    assert "fit trains on 33 examples of which 21 have labels the loss scores" in messages[0]
    messages = train_size_warnings(classifier(100), dataset, epochs=1)
    assert len(messages) == 1 and "about 33 examples" in messages[0]


def test_scored_labels_are_counted_over_the_replicas(new_strategy):
    """Batches of 7 split 4 + 3 over 2 replicas: each replica counts its own
    labels scored, summed when read after the first epoch."""
    dataset = tf.data.Dataset.from_tensor_slices(unlabelled_rows()).batch(7)
    messages = train_size_warnings(classifier(N, new_strategy()), dataset, epochs=1)
    assert len(messages) == 1 and "33 examples of which 21 have labels" in messages[0]


@pytest.mark.slow  # 8 s: a guard, out of the default suite's budget
def test_scored_labels_weigh_each_replicas_share(new_strategy):
    """One SGLD step on the 33 rows (17 + 16, the second shard mostly
    unlabelled) is the single-device step: each shard weighs by the labels it
    scores (``keras_bnn.backend.loss_as_shard``). A guard: it held before."""
    x, y = unlabelled_rows()
    drifts = []
    for strategy in (None, new_strategy()):
        model = classifier(SCORED, strategy)
        start = model.get_weights()
        model.fit(x, y, batch_size=N, epochs=1, shuffle=False, verbose=0)
        drifts.append([b - a for a, b in zip(start, model.get_weights())])
    # the drift of one step; float32 round-off of sums in another order ~1e-7 relative
    for a, b in zip(*drifts):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max())


def test_validation_weights_of_one_a_sequence_are_refused_before_training():
    """``[N]`` validation weights for a per-timestep loss failed inside Keras'
    compiled loss after the first epoch's training ("Dimensions must be equal,
    but are 8 and 6"); refused before any step, as ``fit``'s own."""
    x, tags = tagged_sequences()
    model = tagger("categorical", int((x != 0).sum()))
    with pytest.raises(ValueError, match=r"fit\(validation_data\): `sample_weight` must have "
                                         r"shape \[N, 1\] .* or \[N, 6\] \(one a timestep\)"):
        model.fit(x, tags, batch_size=8, epochs=1, verbose=0,
                  validation_data=(x, tags, np.ones(len(x), "float32")))
    assert int(model.optimizer.iterations) == 0


def validation_weight_warnings(weights):
    """``(ValidationWeightWarning messages, TrainSizeWarning messages)`` of a tagger's
    ``fit`` given ``validation_data=(x, tags, weights)``."""
    x, tags = tagged_sequences()
    model = tagger("categorical", int((x != 0).sum()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, tags, batch_size=8, epochs=1, verbose=0,
                  validation_data=(x, tags, weights))
    return tuple([str(w.message) for w in caught if issubclass(w.category, category)]
                 for category in (kb.ValidationWeightWarning, kb.TrainSizeWarning))


def test_validation_weights_whose_mean_is_not_one_warn():
    """Weights 3 a sequence made ``val_nll`` read 3 times the data's (3.2176 for
    1.0725) silently; weights 1 at the 66 tokens and 0 at the 30 padding
    positions average 1 over the loss's terms, and pass. The warning is a
    ``kb.ValidationWeightWarning``: until 2026-11-29 a ``TrainSizeWarning``,
    the category of ``train_size`` (which these weights do not touch)."""
    x, _ = tagged_sequences()
    messages, train_size = validation_weight_warnings(np.full((len(x), 1), 3.0, "float32"))
    assert len(messages) == 1 and train_size == []
    assert ("fit(validation_data)'s sample_weight has mean 3 over the 66 loss terms of the 16 "
            "validation examples" in messages[0])
    assert issubclass(kb.ValidationWeightWarning, UserWarning)
    assert not issubclass(kb.ValidationWeightWarning, kb.TrainSizeWarning)
    assert validation_weight_warnings((x != 0).astype("float32")) == ([], [])


@pytest.mark.slow  # a JAX process: ~30 s
def test_a_masked_outputs_terms_are_counted_under_jax_as_under_tensorflow(tmp_path):
    """Under JAX the step's predictions came out of ``jax.value_and_grad``
    without their Keras mask: a dataset's masked per-timestep terms were not
    counted (``train_size=96``, every position of 16 sequences of 66 tokens,
    trained silently). The warning, and one epoch's ``nll``, ``evaluate`` and
    weights from the same start, are TensorFlow's."""
    x, tags = tagged_sequences()
    tokens = int((x != 0).sum())
    model = tagger("categorical", tokens, recurrent=True)
    np.savez(tmp_path / "start.npz", **{f"w{i}": w for i, w in enumerate(model.get_weights())})
    history = model.fit(x, tags, batch_size=8, epochs=1, shuffle=False, verbose=0).history
    evaluated = model.evaluate(x, tags, verbose=0, return_dict=True)["nll"]
    expected = {str(n): train_size_warnings(tagger("categorical", n, recurrent=True),
                                            Batches(x, tags, 8), epochs=1)
                for n in (x.size, tokens)}
    assert len(expected[str(x.size)]) == 1 and expected[str(tokens)] == []
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "workers" /
                                               "jax_masked_terms.py"), str(tmp_path / "start.npz")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    assert result["warnings"] == expected
    # float32 round-off of an LSTM's sums in another order: ~1e-6 relative
    assert result["nll"] == pytest.approx(history["nll"][0], rel=1e-5)
    assert result["evaluated"] == pytest.approx(evaluated, rel=1e-5)
    for a, b in zip(model.get_weights(), result["weights"]):
        np.testing.assert_allclose(np.asarray(b), a, rtol=0, atol=1e-5)
