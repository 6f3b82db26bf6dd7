"""A Gaussian PosteriorEnsemble's ``compile`` and ``evaluate``: the mixture's NLL.

``PredictiveGaussianNLL`` (the loss ``evaluate`` feeds with the members'
outputs) against ``kb.metrics``' float64 mixture NLL, the losses and metrics
``compile`` takes or refuses, and a saved ensemble's compile kept.
Until 2026-11-29 ``evaluate`` scored the moment-matched Gaussian the ensemble
outputs (the value tests are in ``test_metric_references.py``), and computed
the members twice per batch (``call``'s and ``compute_loss``'s own).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import likelihoods, metrics

WORKER = Path(__file__).parent / "workers" / "gaussian_evaluate_counts.py"


def _gaussian_ensemble(members=3, targets=2):
    """A linear ``[mean, log variance]`` head of ``targets`` targets, ``members`` weight
    sets of N(0, 0.7²) kernels and biases, inputs and targets for 50 examples."""
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2 * targets)(inputs))
    rng = np.random.default_rng(7)
    sets = [[0.7 * rng.standard_normal(w.shape).astype("float32") for w in model.weights]
            for _ in range(members)]
    x = rng.standard_normal((50, 3)).astype("float32")
    y = rng.standard_normal((50, targets)).astype("float32")
    return kb.PosteriorEnsemble(model, sets, likelihood="gaussian"), x, y


def _mixture_nll(ensemble, x, y):
    """kb.metrics' float64 mixture NLL per example of the ensemble's members on x."""
    members = ensemble.predict_members(x).astype(np.float64)
    units = members.shape[-1] // 2
    return metrics.gaussian_mixture_nll_per_example(
        members[..., :units], np.exp(members[..., units:]), y)


def test_predictive_gaussian_nll_is_the_metrics_mixture_nll():
    """Per example, on [N, S, 2D] members (D = 2, S = 3): kb.metrics' float64
    log-sum-exp to float32 round-off (terms of a few units: relative 1e-5);
    for S = 1 exactly GaussianNLL's computation; a single Gaussian's [N, 2D]
    is refused, naming ``y_pred``."""
    ensemble, x, y = _gaussian_ensemble()
    members = ensemble.predict_members(x)  # [S, N, 2D]
    loss = likelihoods.PredictiveGaussianNLL(reduction="none")
    per_example = keras.ops.convert_to_numpy(loss(y, np.transpose(members, (1, 0, 2))))
    np.testing.assert_allclose(per_example, _mixture_nll(ensemble, x, y), rtol=1e-5)
    single = keras.ops.convert_to_numpy(loss(y, members[0][:, None]))
    np.testing.assert_array_equal(
        single, keras.ops.convert_to_numpy(likelihoods.GaussianNLL(reduction="none")(
            y, members[0])))
    with pytest.raises(ValueError, match=r"PredictiveGaussianNLL: `y_pred` must be the "
                       r"members' outputs \[N, S, 2D\].*got shape \(50, 4\)"):
        loss(y, members[0])


def test_compile_scores_the_mixture_and_refuses_what_misreads_the_output():
    """A ``GaussianNLL`` becomes a ``PredictiveGaussianNLL`` of its name and
    reduction; Keras' own metrics (``"mae"`` compares y with the log variances
    too) and a Gaussian NLL as a metric (the moment-matched Gaussian's) are
    refused for a Gaussian ensemble, and a Gaussian NLL for a categorical
    one; a metric of one's own reads the output ``[mean, log variance]``."""
    ensemble, x, y = _gaussian_ensemble()
    ensemble.compile(loss=likelihoods.GaussianNLL(name="nll", reduction="sum"))
    assert type(ensemble.loss) is likelihoods.PredictiveGaussianNLL
    assert ensemble.loss.get_config() == {"name": "nll", "reduction": "sum"}
    for name, metric in (("metrics", "mae"), ("metrics", likelihoods.GaussianNLL()),
                         ("weighted_metrics", keras.metrics.MeanSquaredError())):
        with pytest.raises(ValueError, match=rf"PosteriorEnsemble.compile: `{name}` must be "
                           r"metrics of your own for a gaussian ensemble: they read its output"):
            ensemble.compile(loss=likelihoods.PredictiveGaussianNLL(), **{name: [metric]})
    inputs = keras.Input((3,))
    categorical = kb.PosteriorEnsemble(keras.Model(inputs, keras.layers.Dense(3)(inputs)),
                                       [[np.ones((3, 3), "float32"), np.zeros(3, "float32")]])
    with pytest.raises(ValueError, match=r"`loss` must score a categorical ensemble's "
                       r"predictive probabilities.*got <keras_bnn.likelihoods.Predictive"):
        categorical.compile(loss=likelihoods.PredictiveGaussianNLL())

    def mean_error(y_true, y_pred):
        return keras.ops.mean(keras.ops.abs(y_true - y_pred[:, :2]), axis=-1)

    ensemble.compile(loss=likelihoods.PredictiveGaussianNLL(), metrics=[mean_error])
    scores = ensemble.evaluate(x, y, verbose=0, return_dict=True)
    assert scores["loss"] == pytest.approx(_mixture_nll(ensemble, x, y).mean(), rel=1e-5)
    expected = np.abs(y - ensemble.predict(x, verbose=0)[:, :2]).mean()
    assert scores["mean_error"] == pytest.approx(expected, rel=1e-5)


def test_a_saved_gaussian_ensemble_reloads_compiled_on_the_mixture(tmp_path):
    """``.keras`` keeps the compile (``compile_from_config``): the reloaded
    ensemble's loss is the mixture's and ``evaluate`` reports the same number."""
    ensemble, x, y = _gaussian_ensemble(targets=1)
    ensemble.compile(loss=likelihoods.GaussianNLL())
    ensemble.save(tmp_path / "ensemble.keras")
    loaded = keras.saving.load_model(tmp_path / "ensemble.keras")
    assert type(loaded.loss) is likelihoods.PredictiveGaussianNLL
    expected = _mixture_nll(ensemble, x, y).mean()
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(expected, rel=1e-5)
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(
        ensemble.evaluate(x, y, verbose=0), rel=1e-6)


def _per_batch(result):
    """Member-graph calls per evaluate batch, from 1 and 3 batches run eagerly (what
    is done once per evaluate, e.g. JAX's symbolic shape pass, cancels)."""
    return (result["eager_3"]["members"] - result["eager_1"]["members"]) / 2


def test_evaluate_with_a_metric_computes_the_members_once_per_batch():
    """TensorFlow: one member-graph call per batch run eagerly, and one per trace of
    evaluate's step (as many as of ``compute_loss``), not two (until 2026-11-29
    ``compute_loss`` recomputed them: 2.5 -> 4.9 s for 20 members of a 512-wide MLP);
    the loss still kb.metrics' float64 mixture NLL (float32 round-off, rel 1e-5)."""
    spec = importlib.util.spec_from_file_location("gaussian_evaluate_counts", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    result = worker.counts()
    assert _per_batch(result) == 1
    assert result["traced"]["members"] == result["traced"]["compute_loss"] >= 1
    for loss in (result["loss"][0], result["eager_loss"][0]):
        assert loss == pytest.approx(result["mixture_nll"], rel=1e-5)


@pytest.mark.slow  # a JAX process: 17 s here, more on a loaded machine
def test_evaluate_computes_the_members_once_per_batch_under_jax():
    """The same under KERAS_BACKEND=jax (its test_step computes the loss in a stateless
    call of its own): one member-graph call per batch, the mixture NLL kept."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(WORKER)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert _per_batch(result) == 1
    # One batch and Keras' symbolic shape pass of call (shapes only); until 2026-11-29
    # that pass's loss ran the members once more: 3.
    assert result["eager_1"]["members"] == 2
    for loss in (result["loss"][0], result["eager_loss"][0]):
        assert loss == pytest.approx(result["mixture_nll"], rel=1e-5)
