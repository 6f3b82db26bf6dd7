"""Full-batch HMC as a user meets it: its arguments, train_on_batch's minibatch check,
and a short adapted chain against an exact Gaussian posterior."""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from sampler_harness import total_ess

SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.mark.parametrize("make", [
    lambda: kb.samplers.HMC(step_size="auto"),
    lambda: kb.samplers.get("hmc", step_size="auto"),
])
def test_an_auto_step_size_is_refused_naming_the_adaptation(make):
    """Before: accepted; fit then ran h = 1e-8 (logged step_size 0.0), every
    proposal accepted and the weights never moved, with no warning."""
    with pytest.raises(ValueError, match=r"HMC: `step_size` must be a number > 0 .*"
                                         r"num_adaptation_steps.*got 'auto'"):
        make()


def _sequence_model():
    """A per-timestep classifier of 6 tokens: train_size counts its 96 tokens."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    hidden = kb.layers.Embedding(10, 4, embeddings_prior=kb.priors.Normal(0.0, 1.0))(inputs)
    model = kb.BayesianModel(inputs, kb.layers.Dense(3)(hidden))
    model.compile(sampler=kb.samplers.HMC(0.01, num_leapfrog_steps=2), loss=SCCE,
                  train_size=96)
    return model


def test_train_on_batch_warns_of_a_minibatch_of_loss_terms():
    """Before: 8 of 16 sequences (48 of 96 tokens) ran a minibatch transition with no
    MinibatchHMCWarning (fit warned; the traced check sees examples only)."""
    rng = np.random.default_rng(0)
    x, y = rng.integers(1, 10, size=(16, 6)), rng.integers(0, 3, size=(16, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MinibatchHMCWarning)
        _sequence_model().train_on_batch(x, y)  # the full batch: silent
    model = _sequence_model()
    with pytest.warns(kb.MinibatchHMCWarning,
                      match="8 examples of 48 loss terms < train_size=96 terms"):
        model.train_on_batch(x[:8], y[:8])
    assert int(model.optimizer.iterations.numpy()) == 1


def _diabetes_regression():
    """Five standardised diabetes features, a standardised target, N(0, 1) priors, and the
    loss (y - μ)² = the Gaussian NLL of σ² = 1/2 up to a constant; with the exact
    posterior N(mean, cov) of the five weights."""
    from sklearn.datasets import load_diabetes

    data = load_diabetes()
    x = data.data[:, :5]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    y = (data.target - data.target.mean()) / data.target.std()
    cov = np.linalg.inv(x.T @ x / 0.5 + np.eye(5))
    mean = cov @ (x.T @ y / 0.5)
    return x.astype("float32"), y[:, None].astype("float32"), mean, cov


@pytest.mark.slow
def test_an_adapted_chain_matches_the_exact_gaussian_posterior(tmp_path):
    """fit with dual averaging for 100 transitions, then CollectSamples('auto'): mean
    and sd of 5 weights within 4 Monte Carlo standard errors derived from the chain's
    ESS (TFP, Geyer truncation)."""
    x, y, mean, cov = _diabetes_regression()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5,))
    model = kb.BayesianModel(inputs, kb.layers.Dense(
        1, use_bias=False, kernel_prior=kb.priors.Normal(0.0, 1.0))(inputs))
    model.compile(sampler=kb.samplers.HMC(num_adaptation_steps=100, seed=3),
                  loss=keras.losses.MeanSquaredError(), train_size=len(x))
    store = kb.SampleStore(tmp_path / "samples")
    history = model.fit(x, y, batch_size=len(x), epochs=400, verbose=0, shuffle=False,
                        callbacks=[kb.callbacks.CollectSamples(store)])
    steps = np.asarray(history.history["step_size"])
    assert steps[100] == steps[-1] == pytest.approx(model.optimizer.step_size_value)
    assert np.mean(history.history["acceptance_rate"][100:]) > 0.6
    samples = np.stack([s.weights[0][:, 0] for s in store])
    # Collected after the adaptation only; 'auto' starts within ~100 epochs of it
    # (epoch 156 with seed 3: 244 samples; dev's h̄ with seed 4: 222).
    assert 200 <= len(samples) <= 300
    ess = total_ess(samples[:, None, :])
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(samples.mean(axis=0) - mean), 4 * sd / np.sqrt(ess))
    np.testing.assert_array_less(np.abs(samples.std(axis=0) / sd - 1), 4 / np.sqrt(2 * ess))
