"""A user's walk through regression: a ``[mean, log variance]`` head on diabetes.

scikit-learn's bundled diabetes (``kb.data.bundled_arrays``), a Keras MLP
with a Gaussian head under ``kb.bayesian``, ``GaussianNLL`` at the sampler's
defaults, samples collected, the ensemble scored, saved and exported.
"""

import warnings

import keras
import numpy as np
import pytest
import scipy.stats

import keras_bnn as kb


@pytest.fixture(scope="module")
def diabetes_ensemble(tmp_path_factory):
    """An SGLD chain (defaults, ``step_size="auto"``) on diabetes, 20 epochs, the
    ensemble of 4 of its samples (evenly spaced: members that differ, where 4
    epochs' differed by 1e-6 of the variance) compiled with ``GaussianNLL``, and
    the test split."""
    (x, y), (x_test, y_test), _ = kb.data.bundled_arrays("diabetes")
    keras.utils.set_random_seed(0)
    inputs = keras.Input((x.shape[1],))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(hidden)))
    bnn.compile(sampler=kb.samplers.SGLD(), train_size=len(x), loss=kb.likelihoods.GaussianNLL())
    store = kb.SampleStore(tmp_path_factory.mktemp("diabetes") / "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.WarmupSampleWarning)  # a short chain, on purpose
        bnn.fit(x, y, batch_size=64, epochs=20, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    ensemble = kb.PosteriorEnsemble.from_store(store, max_samples=4)
    ensemble.compile(loss=kb.likelihoods.GaussianNLL())
    return ensemble, x_test, y_test


def test_evaluate_is_the_mixture_nll_of_the_members(diabetes_ensemble):
    """``evaluate``'s loss is the NLL of the members' mixture, the number
    ``keras-bnn evaluate`` reports (``kb.metrics.evaluate_gaussian_members``,
    float64, from each member's ``[mean, log variance]``; float32 there:
    relative 1e-5); until 2026-11-29 it was the NLL of the Gaussian of the
    mixture's mean and variance (scipy here), another number, which
    ``evaluate_gaussian`` reports with the intervals' coverage."""
    ensemble, x, y = diabetes_ensemble
    members = ensemble.predict_members(x).astype(np.float64)
    assert members.shape == (ensemble.num_members, len(x), 2)
    means, variances = members[..., 0], np.exp(members[..., 1])
    mixture = kb.metrics.evaluate_gaussian_members(means, variances, y)["ensemble"]["nll"]
    assert mixture == pytest.approx(
        kb.metrics.gaussian_mixture_nll_per_example(means, variances, y).mean(), rel=1e-12)
    scored = ensemble.evaluate(x, y, verbose=0)
    assert scored == pytest.approx(mixture, rel=1e-5)
    mean, variance = means.mean(axis=0), variances.mean(axis=0) + means.var(axis=0)
    moment_matched = -scipy.stats.norm.logpdf(y, mean, np.sqrt(variance)).mean()
    assert abs(scored - moment_matched) > 100 * 1e-5 * scored  # tells them apart
    scores = kb.metrics.evaluate_gaussian(mean, variance, y)
    assert scores["nll"] == pytest.approx(moment_matched, rel=1e-6)
    assert {"coverage_0.5", "coverage_0.9", "coverage_0.95"} <= set(scores)


def test_export_outputs_equal_the_ensemble(diabetes_ensemble, tmp_path):
    """Regression guard: the SavedModel's mean and variances are the in-memory
    ensemble's, for the test set and for a batch of one."""
    import tensorflow as tf

    ensemble, x, _ = diabetes_ensemble
    expected = ensemble.predict_uncertainty(x)
    served = tf.saved_model.load(ensemble.export(tmp_path)).signatures["serving_default"]
    for rows in (slice(None), slice(0, 1)):
        outputs = served(inputs=tf.constant(x[rows]))
        assert set(outputs) == set(kb.uncertainty.GAUSSIAN_OUTPUTS)
        for name, value in outputs.items():
            np.testing.assert_allclose(value, expected[name][rows], rtol=1e-5, atol=1e-6,
                                       err_msg=name)


def test_a_compiled_gaussian_ensemble_reloads_compiled(diabetes_ensemble, tmp_path):
    """``.keras`` save and load keep the compile, the mixture's loss (before: Keras
    warned that ``compile()`` was not called, and ``evaluate`` raised)."""
    ensemble, x, y = diabetes_ensemble
    ensemble.save(tmp_path / "ensemble.keras")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*compile.*")
        loaded = keras.saving.load_model(tmp_path / "ensemble.keras")
    assert type(loaded.loss) is kb.likelihoods.PredictiveGaussianNLL
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(
        ensemble.evaluate(x, y, verbose=0), rel=1e-6)
