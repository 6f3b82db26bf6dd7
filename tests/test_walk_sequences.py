"""A user's walk through sequence models: padded token sequences, masks, RNNs.

A synthetic task made here: integer token sequences padded with 0 at the end,
label 1 where the marker token 1 occurs. The models are what a Keras user
writes (``Embedding(mask_zero=True)`` → a recurrent layer → ``Dense``),
wrapped by ``kb.bayesian``.
"""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

L = keras.layers
VOCAB = 12
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def token_sequences(n, length, seed=0, shortest=3):
    """``n`` sequences of tokens 1..VOCAB-1 of random lengths, padded with 0 to ``length``."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, length), "int32")
    for row, size in zip(x, rng.integers(shortest, length + 1, n)):
        row[:size] = rng.integers(1, VOCAB, size)
    return x, (x == 1).any(axis=1).astype("int32")


RECURRENT = {
    "lstm": lambda: L.LSTM(4, name="rec"),
    "gru": lambda: L.GRU(4, name="rec"),
    "bidirectional": lambda: L.Bidirectional(L.LSTM(4), name="rec"),
}


def masked_rnn(kind, length, sampler=None, train_size=8):
    """Embedding(mask_zero) → ``kind`` → Dense(2), a Sequential under ``kb.bayesian``."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((length,), dtype="int32"),
                              L.Embedding(VOCAB, 3, mask_zero=True, name="emb"),
                              RECURRENT[kind](), L.Dense(2, name="out")])
    bnn = kb.bayesian(model)
    bnn.compile(sampler=sampler or kb.samplers.SGLD(step_size=1e-3), train_size=train_size,
                loss=LOSS)
    return bnn


@pytest.mark.parametrize("kind", [  # one in the default suite (its 20 minutes), 7 s each
    pytest.param(kind, marks=[pytest.mark.slow] if kind != "lstm" else [])
    for kind in sorted(RECURRENT)])
def test_padding_changes_neither_the_potential_nor_the_chain(kind):
    """Regression guard: the masked positions are outside the potential.

    The same 8 sequences of 5 tokens, given unpadded and padded with 4 zeros
    (models of input length None, identical initial weights): two SGLD
    steps (noise a function of (seed, variable, step) only) give the same
    `nll` and the same weights, to float32 round-off.
    """
    core, labels = token_sequences(8, 5, shortest=5)
    padded = np.concatenate([core, np.zeros((8, 4), "int32")], axis=1)
    runs = []
    for x in (core, padded):
        bnn = masked_rnn(kind, None)
        history = bnn.fit(x, labels, batch_size=8, epochs=2, verbose=0, shuffle=False)
        runs.append((history.history["nll"], bnn.get_weights()))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-6)
    for unpadded, with_padding in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(unpadded, with_padding, rtol=1e-5, atol=1e-7)


def test_a_compiled_ensemble_reloads_compiled(tmp_path):
    """A compiled ensemble saved to ``.keras`` loads compiled, with no warning.

    Keras' ``compile_from_config`` skips a class whose ``compile`` is its own
    (warning "compile() was not called as part of model loading"): the
    reloaded ensemble's ``evaluate`` raised, asking for ``compile``.
    """
    bnn = masked_rnn("lstm", 6)
    rng = np.random.default_rng(0)
    weight_sets = [[w + 0.3 * rng.normal(size=w.shape).astype(w.dtype)
                    for w in bnn.get_weights()] for _ in range(3)]
    ensemble = kb.PosteriorEnsemble(bnn, weight_sets)
    ensemble.compile(loss="sparse_categorical_crossentropy")
    x, y = token_sequences(16, 6, seed=1)
    expected = ensemble.evaluate(x, y, verbose=0)
    ensemble.save(tmp_path / "ensemble.keras")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*compile.*")
        loaded = keras.saving.load_model(tmp_path / "ensemble.keras")
    assert loaded.compiled
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(expected, rel=1e-6)


@keras.saving.register_keras_serializable(package="walk_sequences")
class TokenGRU(keras.Model):
    """A subclassed classifier of token sequences: Embedding(mask_zero) → GRU → Dense(2)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embed = L.Embedding(VOCAB, 3, mask_zero=True)
        self.rnn = L.GRU(4)
        self.logits = L.Dense(2)

    def call(self, inputs):
        return self.logits(self.rnn(self.embed(inputs)))


def test_subclassed_token_model_serves_token_ids(tmp_path):
    """A subclassed model of token ids, sampled, collected, ensembled and exported,
    takes int32 token ids in its ``serving_default`` signature (``input_dtype``).

    Before, ``kb.bayesian`` put every subclassed model on a float32
    ``keras.Input``: the SavedModel refused int32 token ids ("expected to be
    a float tensor but is a int32 tensor"). The ensemble's predictions are
    the mean of its members' (each store sample set on the model in turn),
    and the export's equal them, for a batch of 1 too.
    """
    import tensorflow as tf

    from fit_helpers import members_one_by_one

    x, y = token_sequences(32, 6)
    keras.utils.set_random_seed(0)
    net = TokenGRU()
    net(x[:2])
    bnn = kb.bayesian(net, input_dtype="int32")
    bnn.compile(sampler=kb.samplers.SGHMC(), train_size=len(x), loss=LOSS)
    store = kb.SampleStore(tmp_path / "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.WarmupSampleWarning)  # samples from step 2 on
        bnn.fit(x, y, batch_size=16, epochs=3, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    ensemble = kb.PosteriorEnsemble.from_store(store)
    x_test, _ = token_sequences(9, 6, seed=2)
    probabilities = ensemble.predict(x_test, verbose=0)
    np.testing.assert_allclose(probabilities, members_one_by_one(store, x_test).mean(axis=0),
                               atol=1e-6)
    served = tf.saved_model.load(ensemble.export(tmp_path / "served")).signatures[
        "serving_default"]
    assert served.structured_input_signature[1]["inputs"].dtype == tf.int32
    for rows in (slice(None), slice(0, 1)):
        np.testing.assert_allclose(served(inputs=tf.constant(x_test[rows]))["probabilities"],
                                   probabilities[rows], atol=1e-6)


def test_input_dtype_must_be_a_keras_dtype_for_a_model_without_a_graph():
    """``input_dtype`` names a Keras dtype, and only a subclassed model takes one
    (a functional model's ``keras.Input`` sets its dtype)."""
    net = TokenGRU()
    net(np.ones((1, 4), "int32"))
    with pytest.raises(ValueError, match="input_dtype.*'int32'"):
        kb.bayesian(net, input_dtype="integer")
    with pytest.raises(ValueError, match="input_dtype.*keras.Input.*float32"):
        kb.bayesian(keras.Sequential([keras.Input((3,)), L.Dense(2)]), input_dtype="int32")


def test_a_frozen_masking_embedding_as_the_trunk_keeps_its_mask():
    """Regression guard: a frozen ``Embedding(mask_zero=True)`` is the ensemble's
    trunk (run once per call, cut from the per-member LSTM and Dense): the mask
    still reaches the LSTM, so the ensemble is the mean of its members run
    whole, one by one, as it is with every weight stacked (no trunk)."""
    from fit_helpers import head_sampled, weight_sets_one_by_one

    embedding = L.Embedding(VOCAB, 3, mask_zero=True, trainable=False)
    keras.utils.set_random_seed(0)
    bnn = kb.bayesian(keras.Sequential([keras.Input((6,), dtype="int32"), embedding,
                                        L.LSTM(4), L.Dense(2)]))
    weight_sets = head_sampled(bnn)
    x, _ = token_sequences(7, 6, shortest=2)
    expected = weight_sets_one_by_one(bnn, weight_sets, x).mean(axis=0)
    for shared, has_trunk in ((None, True), ((), False)):
        ensemble = kb.PosteriorEnsemble(bnn, weight_sets, shared_weights=shared)
        assert (ensemble._trunk.value is not None) == has_trunk
        np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, atol=1e-6)


class _NoiseReadings(keras.callbacks.Callback):
    """Every variable's gradient-noise ratio at each epoch's end (what
    ``CollectSamples`` reads there), by epoch."""

    def __init__(self):
        super().__init__()
        self.by_epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.by_epoch.append({path: float(keras.ops.convert_to_numpy(ratio))
                              for path, ratio, _ in self.model.optimizer.gradient_noise_ratios()})


def _window_means(readings, epoch, window):
    """Each variable's mean ratio over the ``window`` epoch-end readings up to ``epoch``."""
    rows = readings[epoch - window + 1:epoch + 1]
    return {path: sum(row[path] for row in rows) / len(rows) for path in rows[0]}


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["atmc", "sgld"])
def test_an_lstm_at_the_defaults_samples_from_equilibrium(sampler, tmp_path):
    """Regression guard, the walk end to end: an LSTM over padded sequences at
    the sampler's defaults (``step_size="auto"``), 300 epochs of 8 batches
    (2400 steps; 2-4 min on 2 cores beside other runs), warms up with no
    ``NonFiniteError`` and no ``GradientNoiseWarning``, collects from
    equilibrium (no ``NotConvergedWarning``), and its ensemble (the mean of
    its members) is scored by ``evaluate`` and exported: the SavedModel's
    probabilities are the ensemble's, for a batch of one too.

    Both chains' noise comes in bursts through the embeddings, LSTM kernel
    and bias together, longer than the second noise measurement. Where a
    burst falls depends on the data order, so this test asks for none: it
    checks on whatever the chain does the invariant of the noise rules
    (the second measurement, and ``noise_lowerings`` at a stationary epoch):
    collection starts at an epoch where every variable's mean gradient-noise
    ratio over the last ``window`` epoch-end readings is at or below
    ``NOISE_RATIO_LIMIT``, and each lowering, if any, came where some
    variable's was above it. Measured (the keyed order of
    ``kb.array_order``): SGLD's second measurement (epochs 127-251, bursts
    included: largest ratio 0.72 over epochs 160-169) lowers three factors
    at epoch 251 and collection starts at 273 (largest mean 0.026); started
    at 251 it would have been inside a burst (0.50 over epochs 240-249) and
    failed. ATMC starts at 251 on a quiet stretch (0.005). Under Keras' shuffle
    both chains met a burst at the first stationary epoch and
    ``noise_lowerings`` lowered every factor; that response to a burst is
    tested on constructed readings with a real sampler's factors in
    ``tests/test_noise_gate.py``."""
    import tensorflow as tf

    from fit_helpers import members_one_by_one
    from keras_bnn.samplers import NOISE_RATIO_LIMIT

    x, y = token_sequences(256, 10)
    bnn = masked_rnn("lstm", 10, kb.samplers.get(sampler), train_size=len(x))
    store = kb.SampleStore(tmp_path / "samples")
    collect = kb.callbacks.CollectSamples(store)
    readings = _NoiseReadings()  # before the collector, which may lower the factors
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.GradientNoiseWarning)
        warnings.simplefilter("error", kb.NotConvergedWarning)
        bnn.fit(x, y, batch_size=32, epochs=300, verbose=0, callbacks=[readings, collect])
    assert collect.started_epoch is not None and len(store) >= 10
    started = _window_means(readings.by_epoch, collect.started_epoch, collect.window)
    assert max(started.values()) <= NOISE_RATIO_LIMIT, started
    for lowering in collect.noise_lowerings:
        assert max(lowering["ratios"].values()) > NOISE_RATIO_LIMIT, lowering
        assert lowering["ratios"] == pytest.approx(
            _window_means(readings.by_epoch, lowering["epoch"], collect.window), rel=1e-6)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    x_test, y_test = token_sequences(64, 10, seed=1)
    probabilities = ensemble.predict(x_test, verbose=0)
    np.testing.assert_allclose(probabilities, members_one_by_one(store, x_test).mean(axis=0),
                               atol=1e-5)
    ensemble.compile(loss="sparse_categorical_crossentropy")
    assert ensemble.evaluate(x_test, y_test, verbose=0) == pytest.approx(
        kb.metrics.nll(probabilities, y_test), rel=1e-4)
    served = tf.saved_model.load(ensemble.export(tmp_path / "served")).signatures[
        "serving_default"]
    for rows in (slice(None), slice(0, 1)):
        np.testing.assert_allclose(served(inputs=tf.constant(x_test[rows]))["probabilities"],
                                   probabilities[rows], atol=1e-6)
