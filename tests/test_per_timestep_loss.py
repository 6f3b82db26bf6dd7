"""Sequence models with one output per timestep: labels, and what ``train_size`` counts.

A tagger (``[N, T]`` sparse labels, ``[N, T, K]`` logits) and a sequence
regression (``GaussianNLL`` or MSE per timestep), over padded token sequences
under ``Embedding(mask_zero=True)``. Keras' loss is the mean over the batch's
unmasked timesteps, so the potential ``n·mean(ℓ) − log p(θ)`` is the data's
``Σ_tokens ℓ − log p(θ)`` only with n = the number of unmasked timesteps.
"""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import K, N, T, VOCAB, tagged_sequences

L = keras.layers


HEADS = {  # loss, output units, the labels made from the tags
    "categorical": (lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=True), K,
                    lambda tags: tags),
    "gaussian": (kb.likelihoods.GaussianNLL, 2, lambda tags: tags.astype("float32")),
    "mse": (keras.losses.MeanSquaredError, 1, lambda tags: tags[..., None].astype("float32")),
}


def tagger(head, train_size, mask_zero=True, length=T, recurrent=False):
    """Embedding(mask_zero) → LSTM(return_sequences) (or Dense) → Dense per timestep,
    under kb.bayesian (the mask passes through every layer)."""
    loss, units, _ = HEADS[head]
    keras.utils.set_random_seed(0)
    hidden = L.LSTM(4, return_sequences=True) if recurrent else L.Dense(4, activation="tanh")
    model = keras.Sequential([keras.Input((length,), dtype="int32"),
                              L.Embedding(VOCAB, 3, mask_zero=mask_zero), hidden,
                              L.Dense(units)])
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=train_size, loss=loss())
    return bnn


def train_size_warnings(bnn, *args, **kwargs):
    """The TrainSizeWarning messages of ``bnn.fit(*args, **kwargs)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bnn.fit(*args, verbose=0, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, kb.TrainSizeWarning)]


@pytest.mark.parametrize("trailing_axis", [False, True])
def test_per_timestep_sparse_labels_fit_and_evaluate(trailing_axis):
    """Labels of the output's leading dims ``[N, T]`` (or ``[N, T, 1]``) pass ``fit`` and
    ``evaluate``; until 2026-11-29 ``check_labels`` refused every sparse label not of
    shape ``[N]`` ("must be class indices of shape [N]; got shape (16, 6)")."""
    x, tags = tagged_sequences()
    labels = tags[..., None] if trailing_axis else tags
    bnn = tagger("categorical", int((x != 0).sum()), recurrent=True)
    history = bnn.fit(x, labels, batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["nll"][0])
    assert np.isfinite(bnn.evaluate(x, labels, verbose=0)[0])


def test_labels_that_are_not_the_output_rows_are_refused():
    """Sparse labels of another shape than the logits' rows name ``y`` and the output."""
    x, tags = tagged_sequences()
    bnn = tagger("categorical", int((x != 0).sum()))
    for labels in (tags[:, :-1], tags[:, 0], tags[..., None].repeat(2, -1)):
        with pytest.raises(ValueError, match=r"`y` must be class indices of shape \[N, 6\] "
                                             r"for a sparse categorical loss \(the model "
                                             r"outputs \(None, 6, 3\)"):
            bnn.fit(x, labels, batch_size=8, epochs=1, verbose=0)
        with pytest.raises(ValueError, match=r"evaluate: `y` must be class indices"):
            bnn.evaluate(x, labels, verbose=0)


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.slow
def test_train_size_counting_sequences_warns_naming_both_numbers(head):
    """A per-timestep loss with ``train_size`` = the number of sequences warns, naming
    the sequences and their unmasked timesteps (arrays: exact; a dataset: its first
    batch's timesteps an example); ``train_size`` = the timesteps does not warn.

    Until 2026-11-29 nothing warned (and sparse labels were refused): the likelihood
    weighed as 16 examples for the 66 terms of the data, 4.1 times too little.
    """
    x, tags = tagged_sequences()
    labels = HEADS[head][2](tags)
    tokens = int((x != 0).sum())
    assert tokens == 66  # the data of the numbers below
    messages = train_size_warnings(tagger(head, N), x, labels, batch_size=8, epochs=1)
    assert len(messages) == 1 and "16 sequences (examples) of 66 loss terms" in messages[0]
    assert "compile(train_size=16)" in messages[0]
    dataset = tf.data.Dataset.from_tensor_slices((x, labels)).batch(8)
    first_batch_tokens = int((x[:8] != 0).sum())
    messages = train_size_warnings(tagger(head, N), dataset, epochs=1)
    assert len(messages) == 1
    assert f"about 16 sequences (examples) of about {2 * first_batch_tokens} loss" in messages[0]
    assert train_size_warnings(tagger(head, tokens), x, labels, batch_size=8, epochs=1) == []
    assert train_size_warnings(tagger(head, tokens), dataset, epochs=1) == []


def test_unmasked_timesteps_count_every_position():
    """Without a mask every timestep is a term: N·T; a validation split counts the rows kept."""
    from keras_bnn import loss_terms

    x, tags = tagged_sequences()
    bnn = tagger("categorical", N * T, mask_zero=False)
    assert train_size_warnings(bnn, x, tags, batch_size=8, epochs=1) == []
    assert loss_terms.training_terms(bnn, x, tags, 12) == (12 * T, T)
    messages = train_size_warnings(bnn, x, tags, batch_size=8, epochs=1, validation_split=0.25)
    assert len(messages) == 1 and "12 sequences (examples) of 72 loss terms" in messages[0]


def test_masked_terms_are_counted_chunk_by_chunk(monkeypatch):
    """The count over chunks of rows is the number of unmasked timesteps of those rows."""
    from keras_bnn import loss_terms

    x, tags = tagged_sequences(n=23)
    bnn = tagger("categorical", 1)
    monkeypatch.setattr(loss_terms, "CHUNK", 5)
    for rows in (23, 20, 7, 1):
        assert loss_terms.training_terms(bnn, x, tags, rows) == (
            float((x[:rows] != 0).sum()), T)


@pytest.mark.parametrize("head", ["categorical", "gaussian"])
def test_token_train_size_gives_the_exact_posterior_gradient(head):
    """With n = the unmasked timesteps, n·(the model's loss) on the full batch is the
    data's sum over tokens of −log p(y_t|x,θ), plus −log p(θ), and so are its gradients
    (autodiff of that sum, to float32 round-off). With n = the sequences the potential
    measured 175.9 against 359.5 (categorical, 32 sequences of 199 tokens): the
    likelihood tempered by 199/32 = 6.2 and a gradient 81 % off.
    """
    from keras_bnn import loss_terms

    x, tags = tagged_sequences(n=32, length=10)
    labels = HEADS[head][2](tags)
    tokens = int((x != 0).sum())
    bnn = tagger(head, 1, length=10, recurrent=True)
    terms, _ = loss_terms.training_terms(bnn, x, labels, len(x))
    assert terms == tokens
    bnn = tagger(head, int(terms), length=10, recurrent=True)
    unreduced = HEADS[head][0]()
    unreduced.reduction = "none"
    with tf.GradientTape(persistent=True) as tape:
        predictions = bnn(x, training=True)
        potential = terms * bnn.compute_loss(x, labels, predictions, training=True)
        log_likelihood = -tf.reduce_sum(unreduced.call(tf.constant(labels), predictions)
                                        * tf.cast(x != 0, predictions.dtype))
        exact = -log_likelihood + tf.add_n(bnn.losses)
    np.testing.assert_allclose(float(potential), float(exact), rtol=1e-5)
    for ours, theirs in zip(tape.gradient(potential, bnn.trainable_variables),
                            tape.gradient(exact, bnn.trainable_variables)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_timestep_weights_are_averaged_over_the_terms_the_loss_counts():
    """``[N, T]`` weights: Keras' masked mean is ``Σ m·w·ℓ / Σ m``, so their mean that
    scales the data is over the unmasked timesteps. Until 2026-11-29 it was over every
    position: weights 1 at the 66 tokens and 0 (or 5) at the 30 padding positions warned
    of mean 0.6875 (2.25) for 1; weights 2 at the tokens warn of mean 2 over them."""
    x, tags = tagged_sequences()
    real = x != 0
    for padding in (0.0, 5.0):
        weights = np.where(real, 1.0, padding).astype("float32")
        assert train_size_warnings(tagger("categorical", 66), x, tags, sample_weight=weights,
                                   batch_size=8, epochs=1) == []
    messages = train_size_warnings(tagger("categorical", 66), x, tags, batch_size=8, epochs=1,
                                   sample_weight=np.where(real, 2.0, 1.0).astype("float32"))
    assert len(messages) == 1
    assert ("sample_weight has mean 2 over the 66 loss terms of the 16 training examples"
            in messages[0])


def test_a_datasets_terms_are_counted_by_the_train_step_and_checked_after_the_first_epoch():
    """The first batch's check only catches train_size = the number of sequences;
    the train step sums the loss's terms (unmasked timesteps) and fit compares them
    exactly after a first epoch of one pass. Until 2026-11-29 train_size = 96, every
    position of 16 sequences of 6 (66 tokens), trained silently on a dataset or a
    generator (the likelihood weighed 96/66 = 1.45 times too much)."""
    x, tags = tagged_sequences()
    dataset = tf.data.Dataset.from_tensor_slices((x, tags)).batch(5)  # a ragged last batch

    def generator():
        yield from ((x[i:i + 5], tags[i:i + 5]) for i in range(0, N, 5))

    messages = train_size_warnings(tagger("categorical", N * T), generator(), epochs=1)
    assert len(messages) == 1
    assert "16 sequences (examples) of 66 loss terms" in messages[0]
    assert "compile(train_size=96)" in messages[0]
    assert train_size_warnings(tagger("categorical", 66), dataset, epochs=1) == []


def test_one_weight_a_sequence_of_shape_n_is_refused_naming_sample_weight():
    """Keras fails on ``[N]`` weights against a per-timestep loss's ``[N, T]`` values
    (until 2026-11-29 fit raised from inside the compiled loss: "Dimensions must be
    equal, but are 8 and 6"); refused before training, for arrays and a dataset's
    first batch, naming the shapes that work: ``[N, 1]`` trains."""
    x, tags = tagged_sequences()
    bnn = tagger("categorical", 66)
    refused = pytest.raises(ValueError, match=r"`sample_weight` must have shape \[N, 1\] \(one "
                                              r"weight a sequence.* or \[N, 6\] \(one a "
                                              r"timestep\).*got shape \(16,\)")
    with refused:
        bnn.fit(x, tags, sample_weight=np.ones(N, "float32"), epochs=1, verbose=0)
    refused = pytest.raises(ValueError, match=r"evaluate: `sample_weight` must have shape "
                                              r"\[N, 1\].*got shape \(8,\)")
    with refused:
        bnn.evaluate(tf.data.Dataset.from_tensor_slices(
            (x, tags, np.ones(N, "float32"))).batch(8), verbose=0)
    history = bnn.fit(x, tags, sample_weight=np.ones((N, 1), "float32"), batch_size=8,
                      epochs=1, verbose=0)
    assert np.isfinite(history.history["nll"][0])
