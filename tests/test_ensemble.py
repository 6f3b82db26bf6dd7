"""PosteriorEnsemble: the posterior predictive, its uncertainty outputs,
log-space exactness, the Gaussian head, construction and serialisation."""

import logging
import math

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import data, metrics
from keras_bnn.ensemble import CATEGORICAL_OUTPUTS, GAUSSIAN_OUTPUTS, MEMBER_LOOPS
from ensemble_helpers import INPUT_DIM, inputs, tiny_ensemble, tiny_member, weight_sets


def _member_logits(model, sets, x):
    """[S, N, K] logits of each weight set, by loading it into the model."""
    logits = []
    for weights in sets:
        model.set_weights(weights)
        logits.append(keras.ops.convert_to_numpy(model(x)).astype(np.float64))
    return np.stack(logits)


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)


def _entropy(p):
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


@pytest.mark.parametrize("loop", MEMBER_LOOPS)
def test_matches_the_numpy_posterior_predictive_and_its_decomposition(loop):
    model = tiny_member()
    sets = weight_sets(model, 4)
    ensemble = kb.PosteriorEnsemble(model, sets, member_loop=loop)
    x = inputs(9)
    member_probs = _softmax(_member_logits(model, sets, x))
    mean = member_probs.mean(axis=0)

    np.testing.assert_allclose(ensemble.predict(x, verbose=0), mean, atol=1e-6)
    summary = ensemble.predict_uncertainty(x)
    assert set(summary) == set(CATEGORICAL_OUTPUTS)
    expected = {
        "probabilities": mean,
        "log_probabilities": np.log(mean),
        "predictive_entropy": _entropy(mean),
        "expected_entropy": _entropy(member_probs).mean(axis=0),
        "mutual_information": _entropy(mean) - _entropy(member_probs).mean(axis=0),
        "class_std": member_probs.std(axis=0),
    }
    for name, value in expected.items():
        np.testing.assert_allclose(summary[name], value, atol=2e-6, err_msg=name)
    assert np.all(summary["mutual_information"] > 1e-4)  # distinct members disagree
    np.testing.assert_allclose(ensemble.predict_members(x), member_probs, atol=1e-6)


@pytest.mark.parametrize("loop", MEMBER_LOOPS)
def test_identical_members_equal_the_single_model(loop):
    model = tiny_member()
    (weights,) = weight_sets(model, 1)
    ensemble = kb.PosteriorEnsemble(model, [weights] * 5, member_loop=loop)
    x = inputs(11)
    single = _softmax(_member_logits(model, [weights], x)[0])

    np.testing.assert_allclose(ensemble.predict(x, verbose=0), single, atol=1e-6)
    summary = ensemble.predict_uncertainty(x)
    np.testing.assert_allclose(summary["mutual_information"], 0.0, atol=1e-6)
    np.testing.assert_allclose(summary["class_std"], 0.0, atol=1e-6)
    np.testing.assert_allclose(summary["predictive_entropy"], _entropy(single), atol=1e-5)
    np.testing.assert_allclose(summary["expected_entropy"], _entropy(single), atol=1e-5)


def _confident_member():
    """x ↦ [1000·x, −1000·x]: logits ±1000 at x = 1."""
    inputs_ = keras.Input((1,))
    outputs = keras.layers.Dense(2, use_bias=False)(inputs_)
    return keras.Model(inputs_, outputs)


def test_confident_members_are_exact_in_log_space():
    model = _confident_member()
    sure_0 = [np.array([[1000.0, -1000.0]], "float32")]
    sure_1 = [np.array([[-1000.0, 1000.0]], "float32")]
    x = np.ones((1, 1), "float32")

    agree = kb.PosteriorEnsemble(model, [sure_0] * 3).predict_uncertainty(x)
    # log p̄ = logsumexp_s(log_softmax) − log S = [0, −2000] exactly; averaging
    # probabilities first would give log(0) = −inf for the second class.
    np.testing.assert_array_equal(agree["log_probabilities"], [[0.0, -2000.0]])
    np.testing.assert_array_equal(agree["probabilities"], [[1.0, 0.0]])
    for name in ("predictive_entropy", "expected_entropy", "mutual_information"):
        np.testing.assert_array_equal(agree[name], [0.0], err_msg=name)

    split = kb.PosteriorEnsemble(model, [sure_0, sure_1]).predict_uncertainty(x)
    for name, value in split.items():
        assert np.all(np.isfinite(value)), name
    np.testing.assert_allclose(split["probabilities"], [[0.5, 0.5]], rtol=1e-7)
    np.testing.assert_allclose(split["log_probabilities"], [[-math.log(2)] * 2], rtol=1e-6)
    np.testing.assert_array_equal(split["expected_entropy"], [0.0])
    np.testing.assert_allclose(split["mutual_information"], [math.log(2)], rtol=1e-6)
    np.testing.assert_allclose(split["class_std"], [[0.5, 0.5]], rtol=1e-7)


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """An mlp sampled by SGHMC on the synthetic teacher task: 5 stored samples."""
    (x_train, y_train), (x_test, y_test), info = data.synthetic_teacher(256, 400, seed=3)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((info["input_dim"],), info["num_classes"], hidden=(16, 16))
    model.compile(
        sampler=kb.samplers.get("sghmc", step_size=1e-2, seed=1),
        train_size=len(x_train),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    store = kb.SampleStore(tmp_path_factory.mktemp("run") / "samples")
    model.fit(
        data.make_dataset(x_train, y_train, 64, shuffle=True, seed=0),
        epochs=20,
        verbose=0,
        callbacks=[kb.callbacks.CollectSamples(store, start_epoch=10, every=2)],
    )
    return store, x_test, y_test


def test_sampled_ensemble_nll_is_at_most_the_mean_member_nll(sampled_run):
    store, x_test, y_test = sampled_run
    ensemble = kb.PosteriorEnsemble.from_store(store)
    assert ensemble.num_members == len(store) == 5
    probs = ensemble.predict(data.make_dataset(x_test, y_test, 64), verbose=0)
    assert probs.shape == (len(x_test), 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)

    scores = metrics.evaluate_members(ensemble.predict_members(x_test), y_test)
    member_nll = [member["nll"] for member in scores["members"]]
    ensemble_nll = metrics.nll(probs, y_test)
    # Jensen: −log((1/S)Σ_s p_s(y|x)) ≤ (1/S)Σ_s −log p_s(y|x) for every test
    # example (−log is convex), hence also for their mean: an identity, not a
    # statistical tendency. Equality needs all members to agree on p(y|x).
    assert ensemble_nll <= np.mean(member_nll)
    assert np.mean(member_nll) - ensemble_nll > 1e-3  # the samples differ
    assert ensemble_nll == pytest.approx(scores["ensemble"]["nll"], abs=1e-5)
    mutual_information = ensemble.predict_uncertainty(x_test)["mutual_information"]
    assert np.all(mutual_information >= 0.0) and mutual_information.max() > 1e-3


def test_from_store_thins_evenly_and_checks_the_model(sampled_run):
    store, x_test, _ = sampled_run
    thinned = kb.PosteriorEnsemble.from_store(store, max_samples=3)
    assert thinned.num_members == 3
    # Samples 0, 2 and 4 of five: evenly spaced, first and last included.
    reference = kb.PosteriorEnsemble(
        store.build_model(), [store[i].weights for i in (0, 2, 4)]
    )
    np.testing.assert_array_equal(
        thinned.predict(x_test, verbose=0), reference.predict(x_test, verbose=0)
    )
    assert kb.PosteriorEnsemble.from_store(store, max_samples=50).num_members == 5
    with pytest.raises(ValueError, match="max_samples"):
        kb.PosteriorEnsemble.from_store(store, max_samples=0)
    with pytest.raises(ValueError, match="another architecture"):
        kb.PosteriorEnsemble.from_store(store, model=tiny_member())


def test_a_fresh_process_rebuilds_and_reloads_after_a_lazy_import(sampled_run, tmp_path):
    """``import keras_bnn`` imports nothing (not even Keras); the store still
    rebuilds its model (every keras_bnn class its config names gets
    registered) and a saved ensemble loads."""
    import subprocess
    import sys

    store, _, _ = sampled_run
    code = (
        "import sys, keras_bnn as kb\n"
        "lazy = 'keras' not in sys.modules and 'keras_bnn.models' not in sys.modules\n"
        "import keras\n"
        f"ensemble = kb.PosteriorEnsemble.from_store({str(store.path)!r})\n"
        f"ensemble.save({str(tmp_path / 'e.keras')!r})\n"
        f"loaded = keras.saving.load_model({str(tmp_path / 'e.keras')!r})\n"
        "print('RESULT', lazy, type(loaded).__name__, loaded.num_members)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("RESULT ")[-1].split() == ["True", "PosteriorEnsemble", "5"]


def test_from_store_refuses_an_empty_store(tmp_path):
    with pytest.raises(ValueError, match="holds no samples") as raised:
        kb.PosteriorEnsemble.from_store(kb.SampleStore(tmp_path / "empty"))
    # It says the likely cause and the remedy, not only the fact.
    assert "before the chain is at equilibrium" in str(raised.value)
    assert "train for more steps" in str(raised.value)


def test_from_store_names_a_directory_of_another_kind(tmp_path):
    """An export or sweep directory was read as an empty store: "holds no
    samples ... train for more steps", the wrong remedy."""
    (tmp_path / "saved_models" / "a" / "1").mkdir(parents=True)
    (tmp_path / "saved_models" / "a" / "models.config").write_text("model_config_list {}")
    with pytest.raises(FileNotFoundError, match="is neither a sample store, a run directory "
                                                "nor a multi-chain run directory"):
        kb.PosteriorEnsemble.from_store(str(tmp_path / "saved_models" / "a"))
    assert not kb.SampleStore.is_store(tmp_path / "saved_models" / "a")
    assert kb.SampleStore.is_store(tmp_path / "saved_models" / "a" / "1")  # empty: a new store


def _gaussian_member(targets=2):
    """A linear regression head: [mean (targets), log variance (targets)]."""
    keras.utils.set_random_seed(0)
    inputs_ = keras.Input((3,))
    return keras.Model(inputs_, keras.layers.Dense(2 * targets)(inputs_))


def test_gaussian_head_gives_the_mixture_mean_and_total_variance():
    model = _gaussian_member()
    sets = weight_sets(model, 6, scale=0.7)
    ensemble = kb.PosteriorEnsemble(model, sets, likelihood="gaussian")
    x = np.random.default_rng(2).standard_normal((8, 3)).astype("float32")
    outputs = _member_logits(model, sets, x)
    means, variances = outputs[..., :2], np.exp(outputs[..., 2:])
    mean = means.mean(axis=0)
    aleatoric, epistemic = variances.mean(axis=0), means.var(axis=0)

    summary = ensemble.predict_uncertainty(x)
    assert set(summary) == set(GAUSSIAN_OUTPUTS)
    np.testing.assert_allclose(summary["mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summary["aleatoric_variance"], aleatoric, rtol=1e-5)
    np.testing.assert_allclose(summary["epistemic_variance"], epistemic, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(summary["variance"], aleatoric + epistemic, rtol=1e-5)
    # call returns the moment-matched Gaussian in the members' convention.
    np.testing.assert_allclose(
        ensemble.predict(x, verbose=0),
        np.concatenate([mean, np.log(aleatoric + epistemic)], axis=-1),
        rtol=1e-5, atol=1e-5,
    )
    np.testing.assert_allclose(ensemble.predict_members(x), outputs, rtol=1e-5, atol=1e-5)


def _bernoulli_member():
    keras.utils.set_random_seed(0)
    inputs_ = keras.Input((3,))
    return keras.Model(inputs_, keras.layers.Dense(1)(inputs_))


@pytest.mark.parametrize("loop", MEMBER_LOOPS)
@pytest.mark.parametrize("likelihood, make, units", [
    ("categorical", tiny_member, 3), ("bernoulli", _bernoulli_member, 1),
    ("gaussian", _gaussian_member, 4)])
def test_an_empty_batch_gives_empty_outputs_of_the_right_shape(loop, likelihood, make, units):
    """An array of 0 examples is an empty prediction (Keras' predict loop
    alone raises UnboundLocalError on it)."""
    model = make()
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 3), likelihood=likelihood,
                                    member_loop=loop)
    empty = np.zeros((0, model.inputs[0].shape[-1]), "float32")
    assert ensemble.predict(empty, verbose=0).shape == (0, units)
    assert ensemble.predict_members(empty).shape == (3, 0, units)
    summary = ensemble.predict_uncertainty(empty)
    full = ensemble.predict_uncertainty(np.ones((2, *empty.shape[1:]), "float32"))
    assert set(summary) == set(full)
    for name, value in summary.items():
        assert isinstance(value, np.ndarray) and value.shape == (0, *full[name].shape[1:]), name


def test_save_and_load_round_trip(tmp_path):
    model = tiny_member()
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 3), member_loop="map")
    path = tmp_path / "ensemble.keras"
    ensemble.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, kb.PosteriorEnsemble)
    assert (loaded.num_members, loaded.likelihood, loaded.member_loop) == (3, "categorical", "map")
    x = inputs(6)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), ensemble.predict(x, verbose=0))
    # Only the stacked member weights are state: no copy of the member model's.
    assert len(ensemble.weights) == len(model.weights)


def test_wrong_input_shape_is_rejected_in_process():
    ensemble = kb.PosteriorEnsemble(tiny_member(), weight_sets(tiny_member(), 2))
    with pytest.raises(ValueError, match="incompatible"):
        ensemble(np.ones((2, 4), "float32"))


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(weight_sets=[]), "weight_sets"),
        (dict(weight_sets="short"), r"weight_sets\[0\]` has 3 arrays"),
        (dict(weight_sets="bad_shape"), r"weight_sets\[1\]\[0\]` has shape"),
        (dict(likelihood="poisson"), "likelihood"),
        (dict(member_loop="threads"), "member_loop"),
        (dict(likelihood="gaussian"), "even number"),
        (dict(model="unbuilt"), "must be built"),
        (dict(model="not a model"), "must be a keras.Model"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(change, message):
    model = tiny_member()
    sets = weight_sets(model, 2)
    arguments = dict(model=model, weight_sets=sets)
    arguments.update(change)
    if change.get("weight_sets") == "short":
        arguments["weight_sets"] = [w[:3] for w in sets]
    if change.get("weight_sets") == "bad_shape":
        arguments["weight_sets"] = [sets[0], [w.T for w in sets[1]]]
    if change.get("model") == "unbuilt":
        arguments["model"] = keras.Sequential([keras.layers.Dense(3)])
    with pytest.raises(ValueError, match=message):
        kb.PosteriorEnsemble(**arguments)


def test_predict_names_inputs_of_another_shape_and_an_empty_dataset(tmp_path):
    """Found by a user of the Python API: raw TensorFlow errors ("Input to
    reshape is a tensor with 15 values…", a Relu graph error) and Keras'
    UnboundLocalError on an empty dataset."""
    import tensorflow as tf  # noqa: PLC0415

    ensemble = tiny_ensemble(count=2)
    wide = np.zeros((3, INPUT_DIM + 1), "float32")
    for method in ("predict", "predict_members", "predict_uncertainty"):
        with pytest.raises(ValueError, match=rf"{method}: `x` must hold examples of shape "
                                             rf"\({INPUT_DIM},\)"):
            getattr(ensemble, method)(wide)
        with pytest.raises(ValueError, match=f"{method}: `x` must hold at least one batch"):
            getattr(ensemble, method)(tf.data.Dataset.from_tensor_slices(
                np.zeros((0, INPUT_DIM), "float32")).batch(4))


def test_from_store_names_a_model_that_is_not_one(sampled_run):
    """from_store(store, model="mlp") gave an AttributeError."""
    with pytest.raises(ValueError, match="`model` must be a keras.Model; got str"):
        kb.PosteriorEnsemble.from_store(sampled_run[0], model="mlp")


def test_pooling_one_store_twice_is_refused(sampled_run):
    """from_store([store, its path]) pooled its samples twice."""
    store = sampled_run[0]
    with pytest.raises(ValueError, match="more than once"):
        kb.PosteriorEnsemble.from_store([store, store.path])


def test_a_member_with_nan_weights_is_refused():
    """It was accepted and exported all-NaN predictions."""
    model = tiny_member()
    weights = [w.copy() for w in model.get_weights()]
    weights[0][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"`weight_sets\[1\]\[0\]` .* holds NaN or inf"):
        kb.PosteriorEnsemble(model, [model.get_weights(), weights])


def test_several_ensembles_predict_without_tracing_again(monkeypatch):
    """Found by a user of the Python API: a few ensembles (or one that
    predicts, predicts its uncertainty and its members) printed TensorFlow's
    "5 out of the last 13 calls to <function ...> triggered tf.function
    retracing". Each prediction was Keras' predict step, a tf.function
    traced for the first batch size and again for a last batch of another,
    and TensorFlow counts every model's predict step as one function."""
    from tensorflow.python.eager.polymorphic_function import polymorphic_function  # noqa: PLC0415

    class CountingDetector(polymorphic_function._FrequentTracingDetectorManager):
        traces = 0  # calls of any tf.function that traced it

        def called_with_tracing(self, key, function_name, omit_warning):
            CountingDetector.traces += 1
            super().called_with_tracing(key, function_name, omit_warning)

    # A fresh detector: earlier tests' traces neither add to it nor use up its warnings.
    monkeypatch.setattr(polymorphic_function, "_frequent_tracing_detector_manager",
                        CountingDetector())
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        for seed in range(3):
            ensemble = tiny_ensemble(3, seed=seed)
            for count in (70, 70, 45):  # batches of 32, the last of 6, then of 13
                x = inputs(count, seed=seed)
                probabilities = ensemble.predict(x, verbose=0)
                summary = ensemble.predict_uncertainty(x)
                np.testing.assert_allclose(summary["probabilities"], probabilities, atol=1e-6)
                np.testing.assert_allclose(ensemble.predict_members(x).mean(axis=0),
                                           probabilities, atol=1e-6)
    finally:
        logger.removeHandler(handler)
    assert not [m for m in messages if "triggered tf.function retracing" in m], messages
    # Each prediction kind is one graph per ensemble, traced when first used
    # for any batch size, so no call traces a tf.function.
    assert CountingDetector.traces == 0


def test_compile_jit_compile_reaches_the_prediction_graph():
    """Found in review (2026-11-28): since the ensemble's predictions run
    one traced graph (:func:`keras_bnn.backend.predict_graph`), its
    ``compile(jit_compile=True)`` no longer reached them: Keras' predict step,
    which took it, is not traced. The graph is XLA-compiled when the
    ensemble's ``jit_compile`` is, and gives the same predictions (float32:
    XLA may fuse and reorder the softmax's sums, a few ulps)."""
    ensemble = tiny_ensemble(3)
    x = inputs(70)
    plain = ensemble.predict(x, verbose=0)
    ensemble.compile(jit_compile=True)
    compiled = ensemble.predict(x, verbose=0)
    np.testing.assert_allclose(compiled, plain, rtol=1e-5, atol=1e-6)
    graphs = {key: view.value._function for key, view in ensemble._views.items()}
    assert set(graphs) == {("predict", False), ("predict", True)}
    assert {key: graph.function_def.attr["_XlaMustCompile"].b
            for key, graph in graphs.items()} == {key: key[1] for key in graphs}


def test_evaluate_scores_the_predictive_probabilities():
    """Found by a user of ``ensemble.evaluate``: compiled with the members' own
    ``SparseCategoricalCrossentropy(from_logits=True)``, it read p̄ as logits
    and reported loss 1.043 where the posterior predictive's NLL was 0.954
    (iris), with no error. Such a loss or metric is refused; a loss of
    probabilities gives the mean NLL ``−(1/N)·Σ log p̄(y_i|x_i)``; ``fit``
    and ``train_on_batch`` (nothing to train) are refused."""
    ensemble = tiny_ensemble(3)
    x = inputs(40)
    y = np.arange(40) % ensemble.predict(x[:1], verbose=0).shape[-1]
    logits = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for arguments, name in (({"loss": logits}, "loss"), ((logits,), "loss"),
                            ({"loss": "sparse_categorical_crossentropy", "metrics": [
                                keras.metrics.SparseCategoricalCrossentropy(from_logits=True)]},
                             "metrics")):
        args, kwargs = (arguments, {}) if isinstance(arguments, tuple) else ((), arguments)
        with pytest.raises(ValueError, match=rf"PosteriorEnsemble.compile: `{name}` must score "
                           r"the ensemble's output, the predictive probabilities .*"
                           r"kb\.likelihoods\.PredictiveNLL\(\).*got "
                           r"SparseCategoricalCrossentropy\(from_logits=True\)"):
            ensemble.compile("sgd", *args, **kwargs)
    ensemble.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    scores = ensemble.evaluate(x, y, verbose=0, return_dict=True)
    expected = metrics.evaluate_probs(ensemble.predict(x, verbose=0), y)
    assert scores["loss"] == pytest.approx(expected["nll"], rel=1e-5)
    assert scores["accuracy"] == pytest.approx(expected["accuracy"])
    for method in ("fit", "train_on_batch"):
        with pytest.raises(TypeError, match=rf"PosteriorEnsemble.{method}: .*nothing to train"):
            getattr(ensemble, method)(x, y)
    model = _gaussian_member(targets=1)
    gaussian = kb.PosteriorEnsemble(model, weight_sets(model, 3), likelihood="gaussian")
    with pytest.raises(ValueError, match=r"`loss` must be kb.likelihoods.PredictiveGaussianNLL"
                       r"\(\) \(or GaussianNLL\(\), which it replaces\) for a gaussian "
                       r"ensemble.*; got 'mse'"):
        gaussian.compile(loss="mse")  # would read the log variance as a prediction
    gaussian.compile(loss=kb.likelihoods.GaussianNLL())
    targets = np.linspace(-1.0, 1.0, 40, dtype="float32")
    x = np.random.default_rng(2).normal(size=(40, 3)).astype("float32")
    members = gaussian.predict_members(x).astype(np.float64)
    mixture = metrics.gaussian_mixture_nll_per_example(
        members[..., 0], np.exp(members[..., 1]), targets)
    assert gaussian.evaluate(x, targets, verbose=0) == pytest.approx(mixture.mean(), rel=1e-5)


def test_a_rebuilt_member_normalises_with_the_samples_statistics(tmp_path):
    """Found by a user of kb.bayesian on wine with an adapted Normalization in front:
    the ensemble from the store had accuracy 0.33 where the samples' was 0.98.
    stateless_call swaps the samples' weights in, but Normalization reads the mean
    and variance it derived from its weights at its last finalize_state: a member
    rebuilt from its config (from_store, a loaded ensemble, its export) normalised
    with 0 and 1. The rebuilt member now derives them from the samples."""
    x = np.random.default_rng(3).normal(5.0, 3.0, size=(30, INPUT_DIM)).astype("float32")
    keras.utils.set_random_seed(0)
    norm = keras.layers.Normalization()
    norm.adapt(x)
    inputs_ = keras.Input((INPUT_DIM,))
    model = keras.Model(inputs_, keras.layers.Dense(3)(norm(inputs_)))
    sets = weight_sets(model, 3)
    for weights in sets:  # the adapted statistics are every sample's (non-trainable)
        for j, weight in enumerate(model.weights):
            if weight.path.startswith(norm.name):
                weights[j] = keras.ops.convert_to_numpy(weight)
    expected = kb.PosteriorEnsemble(model, sets).predict(x, verbose=0)
    rebuilt = keras.Model.from_config(model.get_config())
    ensemble = kb.PosteriorEnsemble(rebuilt, sets)
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)
    ensemble.save(tmp_path / "normalised.keras")
    loaded = keras.saving.load_model(tmp_path / "normalised.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)
    store = kb.SampleStore(tmp_path / "samples")  # store.build_model + set_weights too
    store.append(model, step=0)
    rebuilt = store.build_model()
    rebuilt.set_weights(store[0].weights)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(rebuilt(x)),
                               keras.ops.convert_to_numpy(model(x)), rtol=1e-5, atol=1e-6)
