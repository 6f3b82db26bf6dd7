"""Every likelihood end to end: Bernoulli and Gaussian ensembles, their
inference from a SampleStore, export, and the metrics of each."""

import os

import keras
import numpy as np
import pytest
import scipy.special
import tensorflow as tf

import keras_bnn as kb
from ensemble_helpers import INPUT_DIM, inputs, weight_sets
from keras_bnn import likelihoods, metrics
from keras_bnn.ensemble import BERNOULLI_OUTPUTS


def _binary_member(seed=0):
    keras.utils.set_random_seed(seed)
    return kb.models.mlp((INPUT_DIM,), 1, hidden=(8,))


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _member_logits(model, sets, x):
    logits = []
    for weights in sets:
        model.set_weights(weights)
        logits.append(np.asarray(model(x)))
    return np.stack(logits).astype(np.float64)  # [S, N, 1]


@pytest.fixture(scope="module")
def binary():
    model = _binary_member()
    sets = weight_sets(model, 4, scale=1.0)
    x = inputs(16)
    logits = _member_logits(model, sets, x)
    return model, sets, x, logits


def test_bernoulli_ensemble_is_the_mean_of_member_sigmoids(binary):
    model, sets, x, logits = binary
    ensemble = kb.PosteriorEnsemble(model, sets, likelihood="bernoulli")
    expected = _sigmoid(logits).mean(axis=0)  # [N, 1]
    probs = np.asarray(ensemble(x))
    assert probs.shape == (16, 1)
    np.testing.assert_allclose(probs, expected, atol=1e-6)
    members = ensemble.predict_members(x)
    np.testing.assert_allclose(members, _sigmoid(logits), atol=1e-6)


def test_bernoulli_summary_entropies_and_mutual_information(binary):
    model, sets, x, logits = binary
    summary = kb.PosteriorEnsemble(model, sets, likelihood="bernoulli").predictive_summary(x)
    assert set(summary) == set(BERNOULLI_OUTPUTS)
    p = _sigmoid(logits)  # [S, N, 1]

    def entropy(q):  # xlogy: 0·log 0 = 0 where a member is certain
        return -(scipy.special.xlogy(q, q) + scipy.special.xlogy(1 - q, 1 - q))[..., 0]

    total, aleatoric = entropy(p.mean(axis=0)), entropy(p).mean(axis=0)
    np.testing.assert_allclose(summary["predictive_entropy"], total, atol=1e-5)
    np.testing.assert_allclose(summary["expected_entropy"], aleatoric, atol=1e-5)
    np.testing.assert_allclose(summary["mutual_information"], np.maximum(total - aleatoric, 0),
                               atol=1e-5)
    np.testing.assert_allclose(summary["probability_std"], p.std(axis=0), atol=1e-6)


def test_bernoulli_export_serves_the_mean_of_member_sigmoids(binary, tmp_path):
    model, sets, x, logits = binary
    ensemble = kb.PosteriorEnsemble(model, sets, likelihood="bernoulli")
    path = ensemble.export(str(tmp_path / "binary"))
    served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(x))
    assert set(served) == set(BERNOULLI_OUTPUTS)
    assert served["probabilities"].shape == (16, 1)
    np.testing.assert_allclose(served["probabilities"], _sigmoid(logits).mean(axis=0), atol=1e-6)


@pytest.mark.parametrize(
    "units, likelihood, match",
    [(1, "categorical", "softmax over one logit"),
     (3, "bernoulli", "be 'categorical' for a model with 3 outputs: a bernoulli head has one"),
     # A Gaussian head's 2 outputs: it was told to use 'categorical' alone.
     (2, "bernoulli", "be 'categorical' or 'gaussian' for a model with 2 outputs"),
     (3, "gaussian", "even number")],
)
def test_a_likelihood_that_does_not_fit_the_head_is_an_error(units, likelihood, match):
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((INPUT_DIM,), units, hidden=(4,))
    with pytest.raises(ValueError, match=match):
        kb.PosteriorEnsemble(model, [model.get_weights()], likelihood=likelihood)


@pytest.mark.parametrize(
    "loss, units, expected",
    [(keras.losses.BinaryCrossentropy(from_logits=True), 1, "bernoulli"),
     ("binary_crossentropy", 1, "bernoulli"),
     (keras.losses.SparseCategoricalCrossentropy(from_logits=True), 3, "categorical"),
     (likelihoods.GaussianNLL(), 2, "gaussian"),
     (None, 1, "bernoulli"), (None, 3, "categorical")],
)
def test_infer_reads_the_loss_then_the_units(loss, units, expected):
    assert likelihoods.infer(units, loss) == expected


@pytest.mark.parametrize("loss, name", [("mse", "mse"),
                                        (keras.losses.MeanSquaredError(), "mean_squared_error")])
def test_infer_refuses_a_loss_that_names_no_likelihood(loss, name):
    with pytest.raises(ValueError, match=f"compiled with loss '{name}'"):
        likelihoods.infer(1, loss)


def test_from_store_picks_bernoulli_for_a_one_logit_binary_model(binary, tmp_path):
    model, sets, x, logits = binary
    model.compile(sampler="sgld", train_size=100,
                  loss=keras.losses.BinaryCrossentropy(from_logits=True))
    store = kb.SampleStore(str(tmp_path / "samples"))
    for weights in sets:
        model.set_weights(weights)
        store.append(model)
    assert store.likelihood() == "bernoulli"
    ensemble = kb.PosteriorEnsemble.from_store(store)
    assert ensemble.likelihood == "bernoulli"
    np.testing.assert_allclose(ensemble(x), _sigmoid(logits).mean(axis=0), atol=1e-6)


def test_gaussian_nll_loss_is_the_normal_log_density():
    y_pred = np.array([[0.5, np.log(2.0)], [-1.0, np.log(0.5)]], "float32")
    y_true = np.array([1.0, 0.0], "float32")
    var = np.exp(y_pred[:, 1])
    expected = np.mean(0.5 * (np.log(2 * np.pi * var) + (y_true - y_pred[:, 0]) ** 2 / var))
    np.testing.assert_allclose(float(likelihoods.GaussianNLL()(y_true, y_pred)), expected,
                               rtol=1e-6)


def test_binary_metrics_match_their_definitions():
    p = np.array([[0.9], [0.2], [0.6], [0.4]])
    y = np.array([1, 0, 0, 1])
    scores = metrics.evaluate_probs(p, y)
    assert scores["accuracy"] == 0.5
    np.testing.assert_allclose(scores["nll"], -np.mean(np.log([0.9, 0.8, 0.4, 0.4])))
    np.testing.assert_allclose(scores["brier"], np.mean((p[:, 0] - y) ** 2))
    # ECE with 15 bins: confidences 0.9, 0.8, 0.6, 0.6 (the last two share a bin
    # with accuracy 0): |1-0.9|/4 + |1-0.8|/4 + 2·|0-0.6|/4.
    np.testing.assert_allclose(scores["ece"], (0.1 + 0.2 + 1.2) / 4, atol=1e-6)


def test_gaussian_metrics_nll_rmse_and_coverage():
    rng = np.random.default_rng(0)
    n = 20000
    y = rng.standard_normal(n)
    scores = metrics.evaluate_gaussian(np.zeros(n), np.ones(n), y)
    # A calibrated N(0, 1) predictive: coverage of the 90 % interval is a
    # binomial proportion with sd sqrt(0.9·0.1/n) = 0.0021; 4 sd = 0.0085.
    assert abs(scores["coverage_0.9"] - 0.9) < 0.0085
    assert abs(scores["coverage_0.5"] - 0.5) < 4 * np.sqrt(0.25 / n)
    np.testing.assert_allclose(scores["rmse"], np.sqrt(np.mean(y**2)))
    np.testing.assert_allclose(scores["nll"], np.mean(0.5 * (np.log(2 * np.pi) + y**2)))
    with pytest.raises(ValueError, match="`variance` must be positive"):
        metrics.evaluate_gaussian(np.zeros(3), np.zeros(3), np.zeros(3))


@pytest.mark.slow
def test_diabetes_regression_trains_evaluates_and_exports(tmp_path):
    from keras_bnn import runs

    # A fixed step and burn-in: 36 steps are far too few for the defaults'
    # warm-up (1000 steps) and equilibrium test; this test is about the head.
    config = runs.RunConfig(dataset="diabetes", sampler="atmc", epochs=6,
                            burn_in_epochs=2, batch_size=64, step_size=5e-3,
                            model_args={"hidden": [16]},
                            output_dir=str(tmp_path / "run"))
    store, _ = runs.train(config, verbose=0)
    assert len(store) == 4 and store.likelihood() == "gaussian"
    result = runs.evaluate(config.output_dir)
    assert result["likelihood"] == "gaussian"
    ensemble = result["ensemble"]
    # Targets are standardised: an RMSE above 1.2 or a 90 % coverage outside
    # [0.5, 1] would mean the head or the metrics are wired wrongly (a fit of
    # the diabetes data reaches RMSE ≈ 0.7).
    assert ensemble["rmse"] < 1.2 and 0.5 <= ensemble["coverage_0.9"] <= 1.0
    assert np.isfinite(ensemble["nll"])
    path = runs.export(config.output_dir, str(tmp_path / "saved" / "diabetes"))
    x = kb.data.bundled_arrays("diabetes")[1][0][:5]
    served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(x))
    local = kb.PosteriorEnsemble.from_store(store).predictive_summary(x)
    assert sorted(served) == sorted(local)
    for name in ("mean", "variance"):
        np.testing.assert_allclose(served[name], local[name], rtol=1e-5, atol=1e-6)
    assert os.path.exists(os.path.join(config.output_dir, "metric_vs_samples.png"))


@pytest.mark.slow  # 8 s: the default suite stays under its 20 minutes; CI runs both
def test_breast_cancer_bernoulli_run_trains_evaluates_and_exports(tmp_path):
    from keras_bnn import runs

    config = runs.RunConfig(dataset="breast_cancer", sampler="atmc", epochs=4,
                            burn_in_epochs=1, step_size=5e-3,  # as above: 16 steps
                            batch_size=100, model_args={"hidden": [8]},
                            output_dir=str(tmp_path / "run"))
    store, _ = runs.train(config, verbose=0)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    assert ensemble.likelihood == "bernoulli"
    result = runs.evaluate(config.output_dir)
    assert result["likelihood"] == "bernoulli"
    # Logistic-regression-like data: 4 epochs already separate it well above
    # the 0.63 of always predicting the majority class.
    assert result["ensemble"]["accuracy"] > 0.8
    assert 0.0 <= result["ensemble"]["brier"] <= 1.0
    path = runs.export(config.output_dir, str(tmp_path / "saved" / "bc"))
    x = kb.data.bundled_arrays("breast_cancer")[1][0][:7]
    served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(x))
    assert served["probabilities"].shape == (7, 1)
    np.testing.assert_allclose(served["probabilities"], ensemble(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss, units, group", [
    (likelihoods.GaussianNLL(), 2, "outputs"),
    (keras.losses.BinaryCrossentropy(from_logits=True), 1, "probabilities")])
def test_inference_data_reads_the_stores_likelihood(tmp_path, loss, units, group):
    """to_inference_data took every store for categorical: a Gaussian head's
    [μ, log σ²] came back softmaxed as "probabilities", and a Bernoulli
    store raised."""
    from keras_bnn import diagnostics  # noqa: PLC0415

    keras.utils.set_random_seed(0)
    model = kb.models.mlp((INPUT_DIM,), units, hidden=(4,))
    model.compile(sampler="sgld", train_size=100, loss=loss)
    store = kb.SampleStore(str(tmp_path / "samples"))
    for _ in range(4):
        store.append(model)
    x = np.random.default_rng(0).normal(size=(6, INPUT_DIM)).astype("float32")
    predicted = diagnostics.to_inference_data(store, x=x).posterior_predictive[group].values
    expected = kb.PosteriorEnsemble.from_store(store).predict_members(x)
    np.testing.assert_allclose(predicted[0], expected, rtol=1e-6)


# ----------------------------------------------- a logit head, or say what it is
_SCCE = keras.losses.SparseCategoricalCrossentropy


def _head(activation=None, units=3):
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((INPUT_DIM,)), keras.layers.Dense(4),
                             keras.layers.Dense(units, activation=activation, name="head")])


@pytest.mark.parametrize("model, loss, match", [
    # A Keras classifier's usual head: compile used to accept it, and the
    # ensemble squashed its probabilities again (digits: NLL 1.69 for 0.40).
    (lambda: kb.bayesian(_head("softmax")), _SCCE(from_logits=True),
     r"`model` must output logits.*got output layer 'head' with activation 'softmax'"),
    (lambda: kb.bayesian(_head("sigmoid", units=1)),
     keras.losses.BinaryCrossentropy(from_logits=True), "activation 'sigmoid'"),
    (lambda: kb.BayesianModel(*(lambda i: (i, keras.layers.Softmax(name="probs")(
        keras.layers.Dense(3)(i))))(keras.Input((INPUT_DIM,)))),
     _SCCE(from_logits=True), "output layer 'probs' with activation 'softmax'"),
    (lambda: kb.bayesian(_head()), "sparse_categorical_crossentropy",
     r"`loss` must take logits.*SparseCategoricalCrossentropy\(from_logits=True\).*"
     r"got 'sparse_categorical_crossentropy' \(from_logits=False\)"),
    (lambda: kb.bayesian(_head()), _SCCE(), r"`loss` must take logits"),
    (lambda: kb.bayesian(_head()), keras.losses.sparse_categorical_crossentropy,
     r"`loss` must take logits"),
    (lambda: kb.bayesian(_head(units=1)), "binary_crossentropy",
     r"keras.losses.BinaryCrossentropy\(from_logits=True\)"),
])
def test_compile_refuses_a_probability_head_or_loss(model, loss, match):
    with pytest.raises(ValueError, match=r"BayesianModel.compile: .*" + match):
        model().compile(sampler="atmc", train_size=10, loss=loss)


def test_compile_accepts_logit_heads_and_other_potentials():
    for loss, units in ((_SCCE(from_logits=True), 3), (likelihoods.GaussianNLL(), 2),
                        ("mse", 1), (None, 3)):
        kb.bayesian(_head(units=units)).compile(sampler="sgld", train_size=10, loss=loss)


def test_from_store_asks_for_the_likelihood_of_a_loss_it_does_not_know(tmp_path):
    """``loss="mse"`` on one output was taken for a Bernoulli head: the
    ensemble returned sigmoid(mean) as 'probabilities' of a regression."""
    model = kb.bayesian(_head(units=1))
    model.compile(sampler="sgld", train_size=10, loss="mse")
    store = kb.SampleStore(str(tmp_path / "samples"))
    store.append(model)
    with pytest.raises(ValueError, match=r"`likelihood` must be given: the model was compiled "
                                         r"with loss 'mse'.*GaussianNLL"):
        kb.PosteriorEnsemble.from_store(store)
    with pytest.raises(ValueError, match="`likelihood` must be given"):
        kb.diagnostics.chain_predictions([store], inputs(4))
    assert kb.PosteriorEnsemble.from_store(store, likelihood="bernoulli").likelihood == \
        "bernoulli"
