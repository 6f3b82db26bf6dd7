"""The NLL a PosteriorEnsemble's ``evaluate`` reports, exact in log space.

The exact NLL of the posterior predictive is −log((1/S) Σ_s p(y|x,θ_s)),
computed here in float64 as logsumexp over members of log_softmax (or
log_sigmoid) minus log S. Until 2026-11-30 ``evaluate`` with
``kb.likelihoods.PredictiveNLL`` read the ensemble's float32 p̄, which
underflows for members certain of a wrong class, floored at float32 ``tiny``
(87.3 nats an example): a categorical ensemble scored 49.85 where the exact
NLL is 125.05, a Bernoulli one 22.44 for 37.39. Tolerance: float32 log-space
arithmetic is exact to a few ulps of the largest logit.
"""

import keras
import numpy as np
from scipy.special import log_expit, log_softmax, logsumexp

import keras_bnn as kb

N, S = 16, 4
FLOOR_NATS = -np.log(np.finfo(np.float32).tiny)  # 87.3: the most a floored term costs


def _tolerance(logits):
    """A few float32 ulps of the largest logit (the log-space sums' rounding)."""
    return 16 * np.finfo(np.float32).eps * max(1.0, np.abs(logits).max())


def _dense_ensemble(units, likelihood, scale, seed=0):
    """Dense(units) members whose weights are scaled by ``scale``, and their float64 logits."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
    rng = np.random.default_rng(seed)
    sets = _agreeing_sets(model, scale, rng)
    x = rng.standard_normal((N, 4)).astype("float32")
    logits = np.stack([x.astype(np.float64) @ w + b for w, b in sets])  # [S, N, units]
    return kb.PosteriorEnsemble(model, sets, likelihood=likelihood), x, logits


def _agreeing_sets(model, scale, rng):
    """S weight sets near one another (shared draw plus a quarter as much noise), × scale."""
    shared = [rng.standard_normal(w.shape) for w in model.get_weights()]
    return [[(scale * (w + 0.25 * rng.standard_normal(w.shape))).astype("float32")
             for w in shared] for _ in range(S)]


def _wrong_labels(logits, rng):
    """The class the members rate least likely for even examples, a random one for odd."""
    labels = rng.integers(0, logits.shape[-1], logits.shape[1:-1])
    labels[::2] = logits.sum(0).argmin(-1)[::2]
    return labels


def _exact_categorical(logits, labels):
    """−log p̄_y per position, float64: logsumexp_s log_softmax f_s − log S."""
    log_probs = logsumexp(log_softmax(logits, axis=-1), axis=0) - np.log(logits.shape[0])
    return -np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]


def _evaluate(ensemble, x, y, **kwargs):
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    return ensemble.evaluate(x, y, verbose=0, return_dict=True, **kwargs)["loss"]


def test_categorical_loss_is_exact_where_the_predictive_underflows():
    """Members certain of wrong classes: the loss is the exact NLL, not a floored one."""
    ensemble, x, logits = _dense_ensemble(3, "categorical", scale=60.0)
    labels = _wrong_labels(logits, np.random.default_rng(5))
    terms = _exact_categorical(logits, labels)
    assert terms.max() > 2 * FLOOR_NATS  # the floor would cut these terms
    np.testing.assert_allclose(_evaluate(ensemble, x, labels), terms.mean(), rtol=0,
                               atol=_tolerance(logits))


def test_bernoulli_loss_is_exact_for_both_labels():
    """log p̄(y=0) and log p̄(y=1) both from log_sigmoid(∓f): exact when p̄(y=1) rounds to 1."""
    ensemble, x, logits = _dense_ensemble(1, "bernoulli", scale=300.0)
    f = logits[..., 0]
    labels = np.where(np.arange(N) % 2 == 0, f.sum(0) < 0, np.arange(N) % 3 == 0).astype(int)
    log_one = logsumexp(log_expit(f), axis=0) - np.log(S)
    log_zero = logsumexp(log_expit(-f), axis=0) - np.log(S)
    terms = -np.where(labels == 1, log_one, log_zero)
    assert terms.max() > 2 * FLOOR_NATS
    np.testing.assert_allclose(_evaluate(ensemble, x, labels.astype("float32")), terms.mean(),
                               rtol=0, atol=_tolerance(logits))


def test_per_position_loss_is_exact_over_unmasked_positions_with_weights():
    """A tagger (Embedding(mask_zero) → Dense(3)): the weighted mean over unmasked tokens."""
    vocab, steps = 6, 5
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((steps,), dtype="int32"),
                              keras.layers.Embedding(vocab, 2, mask_zero=True),
                              keras.layers.Dense(3)])
    rng = np.random.default_rng(1)
    sets = _agreeing_sets(model, 40.0, rng)
    ensemble = kb.PosteriorEnsemble(model, sets)
    x = rng.integers(0, vocab, (N, steps)).astype("int32")
    x[:, 0] = 1  # every example has a token
    weights = rng.uniform(0.5, 2.0, (N, steps)).astype("float32")  # per token, as Keras takes
    logits = np.stack([table[x].astype(np.float64) @ w + b for table, w, b in sets])
    labels = _wrong_labels(logits, rng)
    terms = _exact_categorical(logits, labels)  # [N, T]
    mask = x != 0
    assert terms[mask].max() > 2 * FLOOR_NATS
    expected = (weights * terms * mask).sum() / mask.sum()
    np.testing.assert_allclose(_evaluate(ensemble, x, labels, sample_weight=weights), expected,
                               rtol=0, atol=_tolerance(logits) * weights.max())


def test_several_outputs_each_score_their_exact_nll():
    """A categorical and a Gaussian output: ``cls_loss`` exact, ``reg_loss`` the mixture's."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, {"cls": keras.layers.Dense(3)(inputs),
                                 "reg": keras.layers.Dense(2)(inputs)})
    rng = np.random.default_rng(2)
    sets = [cls + [0.5 * rng.standard_normal(w.shape).astype("float32")
                   for w in model.get_weights()[2:]]
            for cls in _agreeing_sets(keras.Model(inputs, model.outputs[0]), 60.0, rng)]
    ensemble = kb.PosteriorEnsemble(model, sets, likelihood={"cls": "categorical",
                                                             "reg": "gaussian"})
    x = rng.standard_normal((N, 4)).astype("float32")
    targets = rng.standard_normal(N).astype("float32")
    ensemble.compile(loss={"cls": kb.likelihoods.PredictiveNLL(),
                           "reg": kb.likelihoods.GaussianNLL()})
    x64 = x.astype(np.float64)
    logits = np.stack([x64 @ w[0] + w[1] for w in sets])
    labels = _wrong_labels(logits, rng)
    heads = np.stack([x64 @ w[2] + w[3] for w in sets])  # [S, N, 2]: mean, log variance
    log_density = -0.5 * (np.log(2 * np.pi) + heads[..., 1]
                          + (targets - heads[..., 0]) ** 2 * np.exp(-heads[..., 1]))
    logs = ensemble.evaluate(x, {"cls": labels, "reg": targets}, verbose=0, return_dict=True)
    mixture = np.log(S) - logsumexp(log_density, axis=0)
    np.testing.assert_allclose(logs["cls_loss"], _exact_categorical(logits, labels).mean(),
                               rtol=0, atol=_tolerance(logits))
    np.testing.assert_allclose(logs["reg_loss"], mixture.mean(), rtol=1e-5)


def test_loss_where_the_predictive_is_not_tiny_is_kb_metrics_nll():
    """Moderate logits: the loss is ``kb.metrics.nll`` of ``predict`` as before (1e-6)."""
    ensemble, x, _ = _dense_ensemble(3, "categorical", scale=0.7)
    labels = np.random.default_rng(5).integers(0, 3, N)
    expected = kb.metrics.nll(ensemble.predict(x, verbose=0), labels)
    np.testing.assert_allclose(_evaluate(ensemble, x, labels), expected, rtol=1e-6)
