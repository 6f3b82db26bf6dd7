"""The posterior ensemble of a model with one output per position: a tagger, per pixel.

A tagger (``Input((None,), int32)`` → ``Embedding(mask_zero=True)`` → LSTM →
``Dense(K)``, labels ``[N, T]``, output ``[N, T, K]``) sampled with
``CollectSamples``: its ensemble averages the members per timestep, its
``evaluate`` averages over the unmasked tokens (as Keras does for the member),
it saves, loads and exports with a ``None`` time dimension. Until 2026-11-29
``check_ensemble_model`` refused any output but ``[batch, units]`` and any
input dimension of unknown size: ``CollectSamples`` warned ``NoEnsembleWarning``
and ``PosteriorEnsemble.from_store`` raised. Every reference is numpy, from
the store's weights and the member model's own ``predict``.
"""

import json
import os
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from ensemble_helpers import categorical_summary, saved_model_cli
from fit_helpers import K, N, T, VOCAB, tagged_sequences
from keras_bnn.uncertainty import CATEGORICAL_OUTPUTS

L = keras.layers
# float32 softmaxes, log-sum-exps and means of ~1-sized numbers: a few ulps
# (1.2e-7) times the ~10 terms summed.
ATOL = 2e-6


def tagger(units=K, recurrent=True):
    """Embedding(mask_zero) → LSTM (or Dense) per timestep → Dense(units), any length."""
    keras.utils.set_random_seed(0)
    hidden = L.LSTM(4, return_sequences=True) if recurrent else L.Dense(4, activation="tanh")
    return keras.Sequential([keras.Input((None,), dtype="int32"),
                             L.Embedding(VOCAB, 3, mask_zero=True), hidden, L.Dense(units)])


def softmax(f):
    p = np.exp(f - f.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def member_outputs(model, weight_sets, x):
    """f(x; θ_s) of each weight set, by the member model's own predict: [S, N, ..., units]."""
    outputs = []
    for weights in weight_sets:
        model.set_weights(weights)
        outputs.append(model.predict(x, verbose=0).astype(np.float64))
    return np.array(outputs)


def masked_nll(p_bar, x, y):
    """numpy: mean over the unmasked tokens (x != 0) of −log p̄(y), and the mean over all."""
    p_y = np.take_along_axis(p_bar, y[..., None], -1)[..., 0]
    return -np.log(p_y[x != 0]).mean(), -np.log(p_y).mean()


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """A tagger sampled 3 epochs with CollectSamples; the warnings fit gave."""
    x, y = tagged_sequences()
    bnn = kb.bayesian(tagger())
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-2), train_size=int((x != 0).sum()),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(tmp_path_factory.mktemp("tagger") / "samples")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bnn.fit(x, y, batch_size=8, epochs=3, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    weight_sets = [sample.weights for sample in store]
    probs = softmax(member_outputs(store.build_model(), weight_sets, x))
    return store, x, y, probs, caught


def test_a_tagger_is_sampled_without_no_ensemble_warning(sampled):
    store, *_, caught = sampled
    assert len(store) == 3
    assert not [w for w in caught if issubclass(w.category, kb.NoEnsembleWarning)]


@pytest.mark.parametrize("member_loop", ["unroll", "map"])
def test_predict_is_the_mean_of_the_members_softmaxes_per_timestep(sampled, member_loop):
    store, x, _, probs, _ = sampled
    ensemble = kb.PosteriorEnsemble.from_store(store, member_loop=member_loop)
    assert ensemble.member_input_shape == (None,) and ensemble.likelihood == "categorical"
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), probs.mean(0), atol=ATOL)
    np.testing.assert_allclose(ensemble.predict_members(x), probs, atol=ATOL)
    summary = ensemble.predict_uncertainty(x)
    reference = categorical_summary(probs)
    assert set(summary) == set(CATEGORICAL_OUTPUTS)
    for name, value in reference.items():
        np.testing.assert_allclose(summary[name], value, atol=1e-5, err_msg=name)
    # Another length than the training's: the time dimension is None.
    short = x[:, :4]
    np.testing.assert_allclose(ensemble.predict(short, verbose=0),
                               softmax(member_outputs(store.build_model(), [
                                   s.weights for s in store], short)).mean(0), atol=ATOL)


@pytest.mark.parametrize("member_loop", ["unroll", "map"])
def test_evaluate_averages_the_nll_over_the_unmasked_tokens(sampled, member_loop):
    """Keras' loss and metrics read the output's mask: padding does not count."""
    store, x, y, probs, _ = sampled
    ensemble = kb.PosteriorEnsemble.from_store(store, member_loop=member_loop)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL(),
                     metrics=["sparse_categorical_accuracy"])
    result = ensemble.evaluate(x, y, batch_size=N, verbose=0, return_dict=True)
    masked, everywhere = masked_nll(probs.mean(0), x, y)
    assert abs(masked - everywhere) > 100 * ATOL  # the padding would show
    np.testing.assert_allclose(result["loss"], masked, atol=ATOL)
    correct = probs.mean(0).argmax(-1) == y
    np.testing.assert_allclose(result["sparse_categorical_accuracy"], correct[x != 0].mean(),
                               atol=1e-6)
    # In batches, each batch's mean over its unmasked tokens weighs by its tokens
    # (keras_bnn.loss_shares): the set's mean. Until 2026-11-29 it weighed by its
    # sequences, as Keras does (1.0824 for 1.0830 here).
    batched = ensemble.evaluate(x, y, batch_size=5, verbose=0, return_dict=True)
    np.testing.assert_allclose(batched["loss"], masked, atol=ATOL)
    # The metric accumulates over the tokens themselves.
    np.testing.assert_allclose(batched["sparse_categorical_accuracy"],
                               correct[x != 0].mean(), atol=1e-6)
    # kb.metrics scores the unmasked tokens of [N, T, K] with mask= (README);
    # until 2026-11-29 it refused [N, T, K] (tests/test_metrics_positions.py).
    tokens = x != 0
    np.testing.assert_allclose(kb.metrics.nll(probs.mean(0), y, mask=tokens), masked,
                               rtol=1e-12)
    members = ensemble.predict_members(x)
    scored = kb.metrics.evaluate_members(members, y, mask=tokens)
    np.testing.assert_allclose(scored["ensemble"]["nll"], result["loss"], atol=ATOL)


def test_a_frozen_embedding_trunk_keeps_the_mask(sampled):
    """An embedding the same in every member runs once (the trunk), and the head
    it feeds still gets its mask."""
    store, x, y, _, _ = sampled
    weight_sets = [sample.weights for sample in store]
    frozen = [[weight_sets[0][0]] + weights[1:] for weights in weight_sets]
    ensemble = kb.PosteriorEnsemble(store.build_model(), frozen)
    assert ensemble._trunk.value is not None
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    p_bar = softmax(member_outputs(store.build_model(), frozen, x)).mean(0)
    np.testing.assert_allclose(ensemble.evaluate(x, y, verbose=0), masked_nll(p_bar, x, y)[0],
                               atol=ATOL)


@pytest.fixture(scope="module")
def exported(sampled, tmp_path_factory):
    """The sampled tagger's ensemble, compiled, and its exported version directory."""
    store = sampled[0]
    ensemble = kb.PosteriorEnsemble.from_store(store)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    return ensemble, ensemble.export(tmp_path_factory.mktemp("serving") / "tagger")


def test_save_and_load_keep_predict_and_the_masked_nll(sampled, exported, tmp_path):
    _, x, y, probs, _ = sampled
    ensemble = exported[0]
    ensemble.save(tmp_path / "tagger.keras")
    loaded = keras.saving.load_model(tmp_path / "tagger.keras")
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), ensemble.predict(x, verbose=0))
    np.testing.assert_allclose(loaded.evaluate(x, y, verbose=0), masked_nll(
        probs.mean(0), x, y)[0], atol=ATOL)


def test_the_export_serves_every_output_per_timestep_of_any_length(sampled, exported):
    x = sampled[1]
    ensemble, version_dir = exported
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    spec = signature.structured_input_signature[1]["inputs"]
    assert spec.shape.as_list() == [None, None] and spec.dtype == tf.int32
    for batch in (x, x[:5, :3]):  # any batch size and length
        served = signature(inputs=tf.constant(batch))
        expected = ensemble.predict_uncertainty(batch)
        for name in CATEGORICAL_OUTPUTS:
            np.testing.assert_allclose(served[name].numpy(), expected[name], atol=ATOL,
                                       err_msg=name)


def test_saved_model_cli_run_gives_predicts_numbers(sampled, exported, tmp_path):
    x = sampled[1][:, :5]
    ensemble, version_dir = exported
    np.save(tmp_path / "x.npy", x)
    result = saved_model_cli("run", "--dir", version_dir, "--tag_set", "serve",
                             "--signature_def", "serving_default",
                             "--inputs", f"inputs={tmp_path / 'x.npy'}",
                             "--outdir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "probabilities.npy"),
                               ensemble.predict(x, verbose=0), atol=ATOL)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "predictive_entropy.npy"),
                               ensemble.predict_uncertainty(x)["predictive_entropy"], atol=1e-5)


def random_sets(model, count=3, scale=0.7, seed=0):
    rng = np.random.default_rng(seed)
    return [[scale * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()]
            for _ in range(count)]


def test_a_per_pixel_output_and_its_export(tmp_path):
    """[N, H, W, K] from an input of unknown height and width: the class axis is last."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None, None, 2)),
                              L.Conv2D(4, 3, padding="same", activation="tanh"), L.Conv2D(K, 1)])
    weight_sets = random_sets(model)
    ensemble = kb.PosteriorEnsemble(model, weight_sets)
    version_dir = ensemble.export(tmp_path / "pixels")
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    rng = np.random.default_rng(1)
    for shape in ((2, 5, 7, 2), (3, 4, 4, 2)):
        images = rng.standard_normal(shape).astype("float32")
        probs = softmax(member_outputs(model, weight_sets, images))
        np.testing.assert_allclose(ensemble.predict(images, verbose=0), probs.mean(0),
                                   atol=ATOL)
        served = signature(inputs=tf.constant(images))
        assert served["predictive_entropy"].shape == shape[:3]
        np.testing.assert_allclose(served["probabilities"].numpy(), probs.mean(0), atol=ATOL)
    images[0, 1, 2, 0] = np.nan  # a non-finite image is NaN throughout, the others not
    probabilities = ensemble.predict(images, verbose=0)
    assert np.isnan(probabilities[0]).all() and np.isfinite(probabilities[1:]).all()


def test_a_sequence_regression_scores_the_mixture_over_the_unmasked_tokens():
    x, tags = tagged_sequences()
    y = tags.astype("float32")
    model = tagger(units=2, recurrent=False)
    weight_sets = random_sets(model)
    ensemble = kb.PosteriorEnsemble(model, weight_sets, likelihood="gaussian")
    ensemble.compile(loss=kb.likelihoods.GaussianNLL())
    f = member_outputs(model, weight_sets, x)  # [S, N, T, 2]
    mean, log_variance = f[..., 0], f[..., 1]
    log_density = -0.5 * (np.log(2 * np.pi) + log_variance
                          + (y - mean) ** 2 * np.exp(-log_variance))
    nll = np.log(len(f)) - np.logaddexp.reduce(log_density, axis=0)  # [N, T]
    np.testing.assert_allclose(ensemble.evaluate(x, y, verbose=0), nll[x != 0].mean(),
                               rtol=1e-5)
    summary = ensemble.predict_uncertainty(x)
    np.testing.assert_allclose(summary["mean"][..., 0], mean.mean(0), atol=1e-5)


def test_a_per_timestep_binary_head():
    x, tags = tagged_sequences()
    model = tagger(units=1, recurrent=False)
    weight_sets = random_sets(model)
    ensemble = kb.PosteriorEnsemble(model, weight_sets, likelihood="bernoulli")
    p = 1 / (1 + np.exp(-member_outputs(model, weight_sets, x)))  # [S, N, T, 1]
    summary = ensemble.predict_uncertainty(x)
    np.testing.assert_allclose(summary["probabilities"], p.mean(0), atol=ATOL)
    np.testing.assert_allclose(summary["probability_std"], p.std(0), atol=ATOL)
    assert summary["mutual_information"].shape == (N, T)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    labels = tags % 2
    p_y = np.where(labels == 1, p.mean(0)[..., 0], 1 - p.mean(0)[..., 0])
    np.testing.assert_allclose(ensemble.evaluate(x, labels, verbose=0),
                               -np.log(p_y[x != 0]).mean(), atol=ATOL)


def test_an_output_without_a_class_axis_is_still_refused():
    inputs = keras.Input((4,))
    scalar = keras.Model(inputs, L.Lambda(lambda t: keras.ops.sum(t, axis=-1))(
        L.Dense(3)(inputs)))
    with pytest.raises(ValueError, match=r"must output a \[batch, \.\.\., units\] tensor "
                                         r"\(rank >= 2.*\(None,\)"):
        kb.PosteriorEnsemble(scalar, [scalar.get_weights()])


JAX_CHECK = """
import json, sys, numpy as np, keras
import keras_bnn as kb
x, y = (np.array(a) for a in json.loads(sys.argv[1]))
model = keras.Sequential([keras.Input((None,), dtype="int32"),
                          keras.layers.Embedding(12, 3, mask_zero=True),
                          keras.layers.LSTM(4, return_sequences=True), keras.layers.Dense(3)])
rng = np.random.default_rng(0)
sets = [[0.7 * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()]
        for _ in range(3)]
results = []
for loop in ("unroll", "map", "vectorized_map"):  # the mask handed on by each loop
    ensemble = kb.PosteriorEnsemble(model, sets, member_loop=loop)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    results.append([ensemble.predict(x, verbose=0).tolist(),
                    float(ensemble.evaluate(x, y, verbose=0))])
print("RESULT", json.dumps(results))
"""


@pytest.mark.slow  # a JAX process: 15 s, the three member loops
def test_the_jax_backend_gives_the_same_predictions_and_masked_nll():
    x, y = tagged_sequences(n=8)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", JAX_CHECK, json.dumps([x.tolist(), y.tolist()])],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    results = json.loads(line[len("RESULT "):])
    model = tagger()
    weight_sets = random_sets(model)
    probs = softmax(member_outputs(model, weight_sets, x))
    assert len(results) == 3  # unroll, map, vectorized_map
    for predictions, nll in results:
        np.testing.assert_allclose(np.array(predictions), probs.mean(0), atol=ATOL)
        np.testing.assert_allclose(nll, masked_nll(probs.mean(0), x, y)[0], atol=ATOL)
