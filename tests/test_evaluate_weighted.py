"""``kb.runs.evaluate`` on a test set of (inputs, labels, sample_weight) batches.

Until 2026-11-30 such a test set was refused naming ``data`` (before that it
crashed): every score in ``metrics.json`` is now weighted as the metrics'
``sample_weight=`` weighs, and so is the paired comparison with a baseline,
whose standard error is the ratio estimator's (:func:`kb.metrics.paired_difference`).
A zero weight leaves its example out; an integer weight counts as that many
copies of it (not in the standard error: copies are not independent draws).
"""

import json

import numpy as np
import pytest

from keras_bnn import console, data, metrics, runs
from keras_bnn.datasets.pipeline import dataset_targets

_RUN = dict(dataset=runs.ARRAYS, model_args={"hidden": [8]}, batch_size=50, step_size=0.01,
            burn_in_epochs=1)
_PARTS = ("single_sample", "ensemble", "metric_vs_num_samples")


def _weights(n, seed):
    """Integer weights 0..3: zeros leave examples out, the others repeat them."""
    return np.random.default_rng(seed).integers(0, 4, n).astype(np.float32)


def _train(path, arrays, sampler, epochs, likelihood):
    (x, y), (x_test, y_test) = arrays
    given = runs.arrays_data(x, y, 50, 0, likelihood, x_test, y_test)
    fields = dict(_RUN, burn_in_epochs=None) if sampler == "sgd" else _RUN  # MAP: no burn-in
    config = runs.RunConfig(output_dir=str(path), sampler=sampler, epochs=epochs, **fields)
    runs.train(config.validate(), verbose=0, data=given)
    return str(path), given


def _evaluate(run_dir, given, x, y, weights=None, baseline=None):
    test = data.make_dataset(x, y, 50, sample_weight=weights)
    return runs.evaluate(run_dir, data=(given[0], test, given[2]), baseline=baseline)


def _assert_scores_equal(weighted, repeated):
    for part in _PARTS:
        assert weighted[part].keys() == repeated[part].keys()
        for key, value in weighted[part].items():
            assert value == pytest.approx(repeated[part][key], rel=1e-9, abs=1e-12), (part, key)


def _numbers(paired):
    """A paired difference's numbers, without the index of its largest |d|."""
    return {key: value for key, value in paired.items() if key != "largest_index"}


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """An SGHMC run of 4 samples and its SGD baseline on the same arrays, ~10 s."""
    (x, y), (x_test, y_test), _ = data.synthetic_teacher(200, 100, seed=0)
    arrays = ((x, y), (x_test, y_test))
    root = tmp_path_factory.mktemp("weighted")
    run_dir, given = _train(root / "sghmc", arrays, "sghmc", 5, "categorical")
    sgd_dir, _ = _train(root / "sgd", arrays, "sgd", 2, "categorical")
    return run_dir, sgd_dir, given, x_test, y_test


def test_weighted_scores_are_those_of_the_examples_repeated(classifier):
    """Weights 0..3 score as each example repeated that many times (a zero weight
    drops it): accuracy, NLL, ECE, Brier of the last sample, of the ensemble and of
    its curve, and the paired difference's mean and median against the baseline."""
    run_dir, sgd_dir, given, x, y = classifier
    w = _weights(len(y), seed=1)
    baseline = _evaluate(sgd_dir, given, x, y, w)
    weighted = _evaluate(run_dir, given, x, y, w, baseline=baseline)
    with open(runs.RunDir(run_dir).metrics) as handle:  # before the next evaluation
        written = json.load(handle)
    copies = np.repeat(np.arange(len(y)), w.astype(int))
    repeated = _evaluate(run_dir, given, x[copies], y[copies],
                         baseline=_evaluate(sgd_dir, given, x[copies], y[copies]))
    _assert_scores_equal(weighted, repeated)
    paired, copied = weighted["nll_vs_baseline"], repeated["nll_vs_baseline"]
    for key in ("mean", "median", "largest"):  # float32 log-softmax: an ulp per batch position
        assert paired[key] == pytest.approx(copied[key], rel=1e-6, abs=1e-12), key
    assert (paired["n"], copied["n"]) == (int(np.sum(w > 0)), len(copies))
    # The SE is that of the examples that carry weight (none of the zeros)...
    kept = w > 0
    alone = metrics.paired_difference(weighted["nll_per_example"][kept],
                                      baseline["nll_per_example"][kept], sample_weight=w[kept])
    assert _numbers(paired) == pytest.approx(_numbers(alone))
    assert written["ensemble"] == pytest.approx(weighted["ensemble"])
    assert written["nll_vs_baseline"]["se"] == pytest.approx(paired["se"])
    np.testing.assert_array_equal(weighted["test_weights"], w)


def test_weighted_test_sets_and_baselines_that_do_not_fit_are_refused(classifier):
    run_dir, sgd_dir, given, x, y = classifier
    w = _weights(len(y), seed=2)
    unweighted = dict(_evaluate(sgd_dir, given, x, y, w), test_weights=None)
    with pytest.raises(ValueError, match=r"other test weights than .* \(one weighted, the other"):
        _evaluate(run_dir, given, x, y, w, baseline=unweighted)
    with pytest.raises(ValueError, match=r"`data`: its test set's sample weights are refused: "
                                         r"`sample_weight` must be >= 0; got minimum -1"):
        _evaluate(run_dir, given, x, y, np.where(w > 0, w, -1))
    quads = data.make_dataset(x, y, 50).map(lambda a, b: (a, b, b, b))
    with pytest.raises(ValueError, match=r"^`data` must be a finite tf.data.Dataset of "
                                         r"\(inputs, labels\) or \(inputs, labels, "
                                         r"sample_weight\) batches; got a dataset of 4-tuples"):
        runs.evaluate(run_dir, data=(given[0], quads, given[2]))
    with pytest.raises(ValueError, match=r"`sample_weight` must have one weight per example"):
        data.make_dataset(x, y, 50, sample_weight=w[:-1])


def test_a_regression_run_scores_weighted(tmp_path):
    """The Gaussian mixture's NLL, RMSE and coverages weighted: an SGD run (one
    member) on weights 0..3 scores as the examples repeated."""
    rng = np.random.default_rng(3)
    x, x_test = (rng.normal(size=(n, 4)).astype(np.float32) for n in (200, 60))
    weights = np.array([0.5, -1.0, 0.3, 0.0])
    y, y_test = ((v @ weights + 0.3 * rng.normal(size=len(v))).astype(np.float32)
                 for v in (x, x_test))
    run_dir, given = _train(tmp_path / "sgd", ((x, y), (x_test, y_test)), "sgd", 2, "gaussian")
    w = _weights(len(y_test), seed=4)
    copies = np.repeat(np.arange(len(y_test)), w.astype(int))
    weighted = _evaluate(run_dir, given, x_test, y_test, w)
    repeated = _evaluate(run_dir, given, x_test[copies], y_test[copies])
    assert weighted["likelihood"] == "gaussian" and "coverage_0.9" in weighted["ensemble"]
    _assert_scores_equal(weighted, repeated)


def test_dataset_targets_reads_labels_and_weights_in_one_order():
    x, y = np.arange(10.0)[:, None], np.arange(10)
    w = np.linspace(0.0, 1.0, 10)
    shuffled = data.make_dataset(x, y, 3, shuffle=True, seed=0, sample_weight=w)
    labels, weights = dataset_targets(shuffled)
    assert not np.array_equal(labels, y)
    np.testing.assert_allclose(weights, w[labels], rtol=1e-6)
    assert len(data.dataset_labels(shuffled)) == 10  # weighted batches: their labels
    assert dataset_targets(data.make_dataset(x, y, 3))[1] is None


def _paired(n, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n), rng.normal(size=n), _weights(n, seed)


def test_paired_difference_zero_weights_leave_examples_out_and_integers_repeat():
    a, b, w = _paired(50, seed=5)
    kept, copies = w > 0, np.repeat(np.arange(50), w.astype(int))
    weighted = metrics.paired_difference(a, b, sample_weight=w)
    dropped = metrics.paired_difference(a[kept], b[kept], sample_weight=w[kept])
    assert _numbers(weighted) == pytest.approx(_numbers(dropped))
    repeated = metrics.paired_difference(a[copies], b[copies])
    assert repeated["median"] == pytest.approx(np.median((a - b)[copies]), rel=1e-12)
    for key in ("mean", "median", "largest"):
        assert weighted[key] == pytest.approx(repeated[key], rel=1e-12), key
    # Unit weights: the unweighted numbers; weights scaled by 7: the same SE.
    plain = metrics.paired_difference(a, b)
    assert (plain["median"], plain["se"]) == pytest.approx(
        (np.median(a - b), np.std(a - b, ddof=1) / np.sqrt(50)), rel=1e-12)
    assert _numbers(metrics.paired_difference(a, b, sample_weight=np.ones(50))) == (
        pytest.approx(_numbers(plain) | {"effective_n": 50.0}))
    scaled = metrics.paired_difference(a, b, sample_weight=7 * w)
    assert _numbers(scaled) == pytest.approx(_numbers(weighted))
    # Per example [N] on per-position scores [N, T]: each position its example's weight.
    a2, b2 = a.reshape(10, 5), b.reshape(10, 5)
    per_example = metrics.paired_difference(a2, b2, sample_weight=w[:10])
    spread = metrics.paired_difference(a2, b2, sample_weight=np.repeat(w[:10, None], 5, 1))
    assert _numbers(per_example) == pytest.approx(_numbers(spread))


def test_weighted_paired_difference_covers_the_weighted_mean_at_its_level():
    """Class reweighting: a rare class (20 %) weighted 2.5, the common one 0.625 (a
    balanced target), the rare class's differences spread more (sd 1 vs 0.3): the
    weighted mean difference is 0.2 exactly. Over 2000 simulated test sets of 400
    examples, Δ̄ ± 1.96 SE must cover it 95 % of the time: binomial sd
    √(0.95·0.05/2000) = 0.0049, tolerance 4 sd = 0.02. Kish's sd_w/√n_eff, which
    ignores that the weights and the spread go together, covers 0.90 here (the
    test tells the two apart), the SE of the examples repeated (frequency
    weights) 0.79."""
    rng = np.random.default_rng(0)
    simulations, n = 2000, 400
    covered = kish = 0
    for _ in range(simulations):
        rare = rng.random(n) < 0.2
        w = np.where(rare, 2.5, 0.625)
        d = np.where(rare, rng.normal(0.5, 1.0, n), rng.normal(-0.1, 0.3, n))
        result = metrics.paired_difference(d, np.zeros(n), sample_weight=w)
        error = abs(result["mean"] - 0.2)
        covered += error <= 1.96 * result["se"]
        sd_w = np.sqrt(np.sum(w * (d - result["mean"]) ** 2) / np.sum(w))
        kish += error <= 1.96 * sd_w / np.sqrt(result["effective_n"])
    assert abs(covered / simulations - 0.95) < 0.02, covered / simulations
    assert kish / simulations < 0.93, kish / simulations


def test_the_largest_difference_share_is_its_weighted_contribution(capsys):
    """``largest_share`` is w_j d_j / Σ w (what the CLI prints as "it adds ... to the
    mean"): it was printed as d_j / n, 0.5 here for a difference that adds 0.1."""
    a, b = np.array([0.0, 0.0, 0.0, 0.0]), np.array([0.1, -0.2, 0.3, -2.0])
    w = np.array([1.0, 1.0, 1.0, 0.2])
    weighted = metrics.paired_difference(a, b, sample_weight=w)
    assert weighted["largest_index"] == 3
    np.testing.assert_allclose(weighted["largest_share"], 0.2 * 2.0 / 3.2)
    np.testing.assert_allclose(metrics.paired_difference(a, b)["largest_share"], 2.0 / 4)
    console.print_vs_baseline({"nll_vs_baseline": weighted})
    assert "(it adds +0.1250 to the mean)" in capsys.readouterr().out
