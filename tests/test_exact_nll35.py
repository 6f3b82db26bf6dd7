"""Exact NLL from the members' log-probabilities: ``kb.metrics`` and ``keras-bnn evaluate``.

The NLL of a posterior ensemble is −log p̄_y with p̄ = (1/S) Σ_s p_s; from the
members' log-probabilities log p_s it is −(logsumexp_s log p_{s,y} − log S),
computed here in float64 by scipy. Until 2026-11-30 ``kb.runs.evaluate``
(``keras-bnn evaluate``) and ``kb.metrics.nll`` read the float32 probabilities
p̄, floored at float32 ``tiny``, so an example whose p̄_y underflows (members
certain of a wrong class) cost 87.3 nats instead of its true NLL (hundreds
of nats here): the run below scored an NLL of 87.3 per example where the
exact one is several times that. Where p̄ is not tiny the numbers are those
of the probabilities, to float32 round-off (1e-6).
"""

import numpy as np
import pytest
from scipy.special import log_expit, log_softmax, logsumexp
from sklearn.datasets import load_digits

import keras_bnn as kb
from keras_bnn import data, metrics, runs

FLOOR_NATS = -np.log(np.finfo(np.float32).tiny)  # 87.3: the most a floored term costs


def _exact(member_log_probs, labels):
    """−log p̄_y per example, float64 (scipy): logsumexp_s log p_{s,y} − log S."""
    picked = np.take_along_axis(member_log_probs, labels[None, :, None], axis=-1)[..., 0]
    return np.log(len(member_log_probs)) - logsumexp(picked, axis=0)


def _agreeing_logits(rng, scale, shape):
    """S members' logits near one another (a shared draw plus a quarter as much noise)."""
    return scale * (rng.standard_normal(shape[1:]) + 0.25 * rng.standard_normal(shape))


def _confident_members(seed=0, scale=100.0, shape=(4, 12, 3)):
    """Float32 log-softmax of large agreeing logits, and the labels they rate least likely."""
    logits = _agreeing_logits(np.random.default_rng(seed), scale, shape)
    labels = logits.sum(0).argmin(-1)
    return log_softmax(logits, axis=-1).astype(np.float32), labels


def test_nll_of_log_probabilities_is_the_exact_log_mean_exp():
    """``nll(predictive_log_probs(m), y, log_probs=True)`` is the log-mean-exp NLL, where
    the probabilities' NLL floors every underflowing term at 87.3 nats."""
    member_log_probs, labels = _confident_members()
    exact = _exact(member_log_probs.astype(np.float64), labels)
    assert exact.max() > 2 * FLOOR_NATS  # the floor would cut this term
    log_mean = metrics.predictive_log_probs(member_log_probs)
    tolerance = 1e-12 * exact.max()  # float64 sums of the same float32 inputs
    np.testing.assert_allclose(metrics.nll_per_example(log_mean, labels, log_probs=True),
                               exact, rtol=0, atol=tolerance)
    np.testing.assert_allclose(metrics.nll(log_mean, labels, log_probs=True), exact.mean(),
                               rtol=0, atol=tolerance)
    floored = metrics.nll(np.exp(member_log_probs).mean(0), labels)
    assert floored < exact.mean() - 10.0  # what the probabilities give


def test_evaluate_members_scores_every_nll_exactly_from_log_probabilities():
    """Members, ensemble and the curve over s = 1..S: each NLL the exact one."""
    member_log_probs, labels = _confident_members(seed=1)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, len(labels))
    lp = member_log_probs.astype(np.float64)
    picked = np.take_along_axis(lp, labels[None, :, None], axis=-1)[..., 0]  # [S, N]
    scored = metrics.evaluate_members(np.exp(member_log_probs), labels, sample_weight=weights,
                                      member_log_probs=member_log_probs)
    tolerance = 1e-12 * np.abs(picked).max()
    for s in range(len(lp)):
        running = np.log(s + 1) - logsumexp(picked[:s + 1], axis=0)
        np.testing.assert_allclose(scored["metric_vs_num_samples"]["nll"][s],
                                   np.average(running, weights=weights), atol=tolerance)
        np.testing.assert_allclose(scored["members"][s]["nll"],
                                   np.average(-picked[s], weights=weights), atol=tolerance)
    assert scored["ensemble"]["nll"] == scored["metric_vs_num_samples"]["nll"][-1]
    assert np.average(np.log(len(lp)) - logsumexp(picked, axis=0), weights=weights) > FLOOR_NATS


def test_binary_log_probabilities_are_the_two_outcomes():
    """A Bernoulli member's log σ(∓f): exact for y = 0 where p̄(y=1) rounds to 1."""
    f = _agreeing_logits(np.random.default_rng(3), 300.0, (3, 10, 1))
    labels = (f.sum(0)[:, 0] < 0).astype(int)  # the outcome the members rate unlikely
    two = np.concatenate([log_expit(-f), log_expit(f)], axis=-1).astype(np.float32)
    exact = _exact(two.astype(np.float64), labels)
    assert exact.max() > 2 * FLOOR_NATS
    np.testing.assert_allclose(metrics.nll(metrics.predictive_log_probs(two), labels,
                                           log_probs=True), exact.mean(), rtol=1e-12)
    binary = metrics.evaluate_members(np.exp(two[..., 1:]), labels, member_log_probs=two)
    plain = metrics.evaluate_members(np.exp(two[..., 1:]), labels)
    assert binary["ensemble"]["brier"] == plain["ensemble"]["brier"]  # the binary score
    np.testing.assert_allclose(binary["ensemble"]["nll"], exact.mean(), rtol=1e-12)
    with pytest.raises(ValueError, match=r"`probs` must be log-probabilities of shape .*two "
                                         r"outcomes.*got shape \(10, 1\)"):
        metrics.nll(two[0, :, 1:], labels, log_probs=True)


def test_probabilities_passed_as_log_probabilities_are_refused():
    """Probabilities (positive) or logits under ``log_probs=True`` name the argument."""
    member_log_probs, labels = _confident_members(scale=1.0)
    with pytest.raises(ValueError, match=r"`probs` must be rows of log-probabilities"):
        metrics.nll(np.exp(member_log_probs[0]), labels, log_probs=True)
    with pytest.raises(ValueError, match=r"`member_log_probs` must be rows of log-prob"):
        metrics.predictive_log_probs(10.0 * member_log_probs)
    with pytest.raises(ValueError, match=r"`member_log_probs` must have the shape .*"
                                         r"\[4, N, \.\.\., 3\]; got shape \(4, 12, 2\)"):
        metrics.evaluate_members(np.exp(member_log_probs), labels,
                                 member_log_probs=member_log_probs[..., :2])


def test_predict_members_log_probabilities_are_exact_for_large_logits():
    """``predict_members(x, log_probabilities=True)``: log-softmax, and a Bernoulli's
    two outcomes log σ(∓f), finite where the probabilities underflow float32."""
    import keras  # noqa: PLC0415 - the ensemble's tests need a backend; the metrics' do not

    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 4)).astype("float32")
    for units, likelihood in ((3, "categorical"), (1, "bernoulli")):
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
        sets = [[(200.0 * rng.standard_normal(w.shape)).astype("float32")
                 for w in model.get_weights()] for _ in range(3)]
        ensemble = kb.PosteriorEnsemble(model, sets, likelihood=likelihood)
        logits = np.stack([x.astype(np.float64) @ w + b for w, b in sets])
        expected = (log_softmax(logits, axis=-1) if units > 1 else
                    np.concatenate([log_expit(-logits), log_expit(logits)], axis=-1))
        got = ensemble.predict_members(x, log_probabilities=True)
        assert got.shape == expected.shape and np.all(np.isfinite(got))
        assert expected.min() < 2 * np.log(np.finfo(np.float32).tiny)  # p underflows
        tolerance = 16 * np.finfo(np.float32).eps * np.abs(logits).max()
        np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance)


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """An SGHMC run on the digits (1297 train, 500 test, hidden 16): its samples, ~12 s."""
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    given = runs.arrays_data(x[:1297], y[:1297], 100, 0, "categorical", x[1297:], y[1297:])
    config = runs.RunConfig(output_dir=str(tmp_path_factory.mktemp("digits") / "run"),
                            dataset=runs.ARRAYS, sampler="sghmc", epochs=3, burn_in_epochs=1,
                            model_args={"hidden": [16]}, batch_size=100, step_size=0.01)
    runs.train(config.validate(), verbose=0, data=given)
    return config.output_dir, given, x[1297:], y[1297:]


def _evaluate(run, x, y):
    run_dir, given, _, _ = run
    return runs.evaluate(run_dir, data=(given[0], data.make_dataset(x, y, 100), given[2]))


def test_evaluate_is_unchanged_where_the_predictive_is_not_tiny(digits_run):
    """The digits' test set: every score as from the members' probabilities, to 1e-6
    (float32 probabilities: −log p̄ is within a few ulps / p̄ of the log-space value)."""
    run_dir, _, x, y = digits_run
    result = _evaluate(digits_run, x, y)
    ensemble = kb.PosteriorEnsemble.from_store(runs.load_chains(run_dir)[1])
    probs = ensemble.predict_members(x)
    before = metrics.evaluate_members(probs, y)  # the scores until 2026-11-30
    for key, value in before["ensemble"].items():
        assert result["ensemble"][key] == pytest.approx(value, rel=1e-6, abs=1e-7), key
    for key in metrics.METRIC_NAMES:
        np.testing.assert_allclose(result["metric_vs_num_samples"][key],
                                   before["metric_vs_num_samples"][key], rtol=1e-6, atol=1e-7)
    for key, value in before["members"][-1].items():
        assert result["single_sample"][key] == pytest.approx(value, rel=1e-6, abs=1e-7), key
    np.testing.assert_allclose(result["nll_per_example"],
                               metrics.nll_per_example(probs.mean(0), y), rtol=1e-6, atol=1e-6)


def test_evaluate_nll_is_exact_where_the_predictive_underflows(digits_run):
    """Inputs scaled ×300 and labels the members rate least likely: the ensemble's NLL
    (and each example's) is the log-mean-exp of the members' log-softmax, not 87.3."""
    run_dir, _, x, _ = digits_run
    store = runs.load_chains(run_dir)[1][0]
    model, big = store.build_model(), 300.0 * x[:100]
    logits = []
    for sample in store:
        model.set_weights(sample.weights)
        logits.append(model.predict(big, verbose=0).astype(np.float64))
    assert len(logits) >= 2  # a log-mean-exp over several members
    member_log_probs = log_softmax(np.stack(logits), axis=-1)
    labels = member_log_probs.sum(0).argmin(-1)
    exact = _exact(member_log_probs, labels)
    assert np.median(exact) > 2 * FLOOR_NATS
    result = _evaluate(digits_run, big, labels)
    # float32 logits: a few ulps of the largest, and of the matrix products' sums
    tolerance = 1e-5 * np.abs(np.stack(logits)).max()
    np.testing.assert_allclose(result["nll_per_example"], exact, rtol=0, atol=tolerance)
    np.testing.assert_allclose(result["ensemble"]["nll"], exact.mean(), rtol=0, atol=tolerance)


def test_uncertainty_of_a_class_ruled_out_by_an_infinite_logit_is_finite():
    """A logit of −inf (a class masked out, which Keras' cross-entropy takes): p = 0
    adds 0 · log 0 = 0 to the entropies, as scipy's ``entr``; until 2026-11-30 NaN."""
    import keras  # noqa: PLC0415 - the ensemble's tests need a backend; the metrics' do not
    from scipy.special import entr, softmax  # noqa: PLC0415

    from keras_bnn import uncertainty  # noqa: PLC0415

    logits = np.random.default_rng(6).standard_normal((3, 5, 3)).astype(np.float32)
    logits[..., 2] = -np.inf
    got = {key: keras.ops.convert_to_numpy(value) for key, value in uncertainty.summary(
        keras.ops.convert_to_tensor(logits), "categorical").items()}
    probs = softmax(logits[..., :2].astype(np.float64), axis=-1)  # the class of p = 0 left out
    total, aleatoric = entr(probs.mean(0)).sum(-1), entr(probs).sum(-1).mean(0)
    np.testing.assert_allclose(got["predictive_entropy"], total, rtol=1e-5)
    np.testing.assert_allclose(got["expected_entropy"], aleatoric, rtol=1e-5)
    np.testing.assert_allclose(got["mutual_information"], total - aleatoric, atol=1e-6)
    certain = uncertainty.summary(keras.ops.convert_to_tensor(
        np.full((2, 4, 1), np.inf, np.float32)), "bernoulli")
    for key in ("predictive_entropy", "expected_entropy", "mutual_information"):
        np.testing.assert_array_equal(np.abs(keras.ops.convert_to_numpy(certain[key])), 0.0)
