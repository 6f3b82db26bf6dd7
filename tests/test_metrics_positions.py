"""kb.metrics, ood, diagnostics and plots on per-position predictions, with a mask.

A tagger's probabilities [N, T, K] (members [S, N, T, K]), labels [N, T] and
mask [N, T] (True = scored, x != 0): every metric equals the same function on
the selected positions flattened, probs[mask] [M, K] and labels[mask] [M],
exactly (the same numbers in the same order, summed the same way). Until
2026-11-29 every one of them refused [N, T, K] with a ValueError and had no
``mask``; [N, K] results are unchanged, bit for bit.
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import diagnostics, metrics, ood, plots

N, T, K, S = 7, 5, 4, 6


def simplex(rng, shape, sharpness=2.0):
    """Softmax rows of Gaussian logits (sharpness scales the logits): [..., K]."""
    logits = sharpness * rng.standard_normal(shape)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def padded(rng, n=N, length=T):
    """A padding mask: each sequence has 1..length leading tokens (x != 0)."""
    sizes = rng.integers(1, length + 1, n)
    return np.arange(length)[None, :] < sizes[:, None]


@pytest.fixture
def tagged():
    """Members [S, N, T, K], labels [N, T] (-100 at padding: an ignore_class) and mask [N, T]."""
    rng = np.random.default_rng(0)
    members = simplex(rng, (S, N, T, K))
    mask = padded(rng)
    labels = np.where(mask, rng.integers(0, K, (N, T)), -100)
    assert 0 < mask.sum() < mask.size
    return members, labels, mask


CLASS_METRICS = [metrics.accuracy, metrics.nll, metrics.brier, metrics.ece,
                 metrics.evaluate_probs]


@pytest.mark.parametrize("metric", CLASS_METRICS, ids=lambda f: f.__name__)
def test_a_masked_metric_is_the_metric_of_the_flattened_selected_positions(tagged, metric):
    members, labels, mask = tagged
    probs = members.mean(0)
    assert metric(probs, labels, mask=mask) == metric(probs[mask], labels[mask])


@pytest.mark.parametrize("metric", CLASS_METRICS, ids=lambda f: f.__name__)
def test_without_a_mask_every_position_is_scored(tagged, metric):
    members, labels, mask = tagged
    labels = np.where(mask, labels, 0)
    probs = members.mean(0)
    flat = metric(probs.reshape(-1, K), labels.ravel())
    assert metric(probs, labels) == flat
    assert metric(probs, labels, mask=np.ones((N, T), int)) == flat  # 0/1 numbers as booleans


def test_per_position_terms_keep_the_positions_shape(tagged):
    members, labels, mask = tagged
    probs = members.mean(0)
    terms = metrics.nll_per_example(probs, labels, mask=mask)
    np.testing.assert_array_equal(terms, metrics.nll_per_example(probs[mask], labels[mask]))
    full = metrics.nll_per_example(probs, np.where(mask, labels, 0))
    assert full.shape == (N, T)
    np.testing.assert_array_equal(full[mask], terms)


def test_reliability_and_its_plot(tagged, tmp_path):
    members, labels, mask = tagged
    probs = members.mean(0)
    masked = metrics.reliability(probs, labels, 5, mask=mask)
    flat = metrics.reliability(probs[mask], labels[mask], 5)
    for key, value in flat.items():
        np.testing.assert_array_equal(masked[key], value, err_msg=key)
    assert masked["count"].sum() == mask.sum()  # the bins count tokens
    a = plots.reliability_diagram(probs, labels, tmp_path / "a.png", 5, mask=mask)
    b = plots.reliability_diagram(probs[mask], labels[mask], tmp_path / "b.png", 5)
    assert open(a, "rb").read() == open(b, "rb").read()


def test_evaluate_members_per_token(tagged):
    members, labels, mask = tagged
    masked = metrics.evaluate_members(members, labels, num_bins=5, mask=mask)
    assert masked == metrics.evaluate_members(members[:, mask], labels[mask], num_bins=5)
    assert masked["ensemble"] == metrics.evaluate_probs(members.mean(0), labels, 5, mask=mask)


def test_binary_and_per_pixel_predictions():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.01, 0.99, (S, 3, 4, 5, 1))  # Bernoulli p(y=1) per pixel
    labels = rng.integers(0, 2, (3, 4, 5))
    mask = rng.uniform(size=(3, 4, 5)) < 0.6
    for metric in CLASS_METRICS:
        assert metric(p[0], labels, mask=mask) == metric(p[0][mask], labels[mask])
    assert metrics.evaluate_members(p, labels, mask=mask) == metrics.evaluate_members(
        p[:, mask], labels[mask])
    pixels = simplex(rng, (3, 4, 5, K))
    classes = rng.integers(0, K, (3, 4, 5))
    assert metrics.evaluate_probs(pixels, classes, mask=mask) == metrics.evaluate_probs(
        pixels[mask], classes[mask])


def test_gaussian_metrics_per_position():
    rng = np.random.default_rng(2)
    mean, variance = rng.standard_normal((S, N, T, 2)), rng.uniform(0.5, 2.0, (S, N, T, 2))
    targets = rng.standard_normal((N, T, 2))
    targets[0, -1] = np.nan  # a padding target: not scored
    mask = np.ones((N, T), bool)
    mask[0, -1] = False
    one = (mean[0], variance[0], targets)
    selected = tuple(v[mask] for v in one)
    assert metrics.evaluate_gaussian(*one, mask=mask) == metrics.evaluate_gaussian(*selected)
    np.testing.assert_array_equal(metrics.gaussian_nll_per_example(*one, mask=mask),
                                  metrics.gaussian_nll_per_example(*selected))
    members = (mean, variance, targets)
    flat = (mean[:, mask], variance[:, mask], targets[mask])
    assert (metrics.evaluate_gaussian_members(*members, mask=mask)
            == metrics.evaluate_gaussian_members(*flat))
    np.testing.assert_array_equal(
        metrics.gaussian_mixture_nll_per_example(*members, mask=mask),
        metrics.gaussian_mixture_nll_per_example(*flat))
    # One target per token, [S, N, T] under a mask [N, T]: D = 1.
    assert metrics.evaluate_gaussian(mean[0, ..., 0], variance[0, ..., 0], targets[..., 0],
                                     mask=mask) == metrics.evaluate_gaussian(
        mean[0, ..., 0][mask], variance[0, ..., 0][mask], targets[..., 0][mask])
    # Without a mask, the positions' terms keep their shape [N, T].
    clean = np.nan_to_num(targets)
    assert metrics.gaussian_nll_per_example(mean[0], variance[0], clean).shape == (N, T)


def test_ood_scores_per_token_and_per_sequence(tagged):
    members, _, mask = tagged
    scores = ood.uncertainty_scores(members, mask=mask)
    flat = ood.uncertainty_scores(members[:, mask])
    for name in ood.OOD_SCORES:
        np.testing.assert_array_equal(scores[name], flat[name])
        assert ood.uncertainty_scores(members)[name].shape == (N, T)
    rng = np.random.default_rng(3)
    out = simplex(rng, (S, 9, T, K), sharpness=0.5)  # flatter: more uncertain
    out_mask = padded(rng, 9)
    tokens = ood.ood_auroc(members, out, mask, out_mask)
    assert tokens == ood.ood_auroc(members[:, mask], out[:, out_mask])
    sequences = ood.ood_auroc(members, out, mask, out_mask, per="example")
    full_in, full_out = ood.uncertainty_scores(members), ood.uncertainty_scores(out)
    for name in ood.OOD_SCORES:
        mean_in = (full_in[name] * mask).sum(1) / mask.sum(1)
        mean_out = (full_out[name] * out_mask).sum(1) / out_mask.sum(1)
        assert sequences[name] == pytest.approx(ood.auroc(mean_in, mean_out), abs=1e-12)
    assert sequences != tokens
    # One position per example ([S, N, K]): the two units are the same.
    first = (members[:, :, 0], out[:, :, 0])
    assert ood.ood_auroc(*first, per="example") == ood.ood_auroc(*first)


def test_prediction_diagnostics_per_position():
    rng = np.random.default_rng(4)
    chains = simplex(rng, (2, 8, 3, T, K))  # [C, S, N, T, K]
    mask = padded(rng, 3)
    assert diagnostics.predictive_rhat(chains, mask=mask) == diagnostics.predictive_rhat(
        chains[:, :, mask])
    assert diagnostics.predictive_ess(chains[0], mask=mask) == diagnostics.predictive_ess(
        chains[0][:, mask])
    assert diagnostics.predictive_ess(chains, mask=mask) == diagnostics.predictive_ess(
        chains[:, :, mask], chains=True)  # 4-D without a mask: the layout said
    assert diagnostics.predictive_rhat(chains) == diagnostics.predictive_rhat(
        chains.reshape(2, 8, 3 * T, K))


def test_results_of_n_by_k_arrays_are_unchanged():
    """[N, K], [S, N, K] and [S, N, D] bit for bit as before 2026-11-29 (values of
    branch dev, printed with float.hex)."""
    rng = np.random.default_rng(5)
    members = simplex(rng, (S, 40, K))
    labels = rng.integers(0, K, 40)
    probs = members.mean(0)
    scored = metrics.evaluate_members(members, labels, num_bins=10)
    assert {key: value.hex() for key, value in scored["ensemble"].items()} == PINNED
    assert metrics.evaluate_probs(probs, labels, 10) == scored["ensemble"]
    assert metrics.nll_per_example(probs, labels).sum().hex() == PINNED_TERMS
    mean, variance = rng.standard_normal((3, 40, 2)), rng.uniform(0.5, 2, (3, 40, 2))
    gaussian = metrics.evaluate_gaussian_members(mean, variance, rng.standard_normal((40, 2)))
    assert {key: value.hex() for key, value in gaussian["ensemble"].items()} == PINNED_GAUSSIAN
    # A mask over examples: [N] booleans.
    mask = np.arange(40) % 3 != 0
    assert metrics.evaluate_probs(probs, labels, 10, mask=mask) == metrics.evaluate_probs(
        probs[mask], labels[mask], 10)


PINNED = {"accuracy": "0x1.0000000000000p-2", "nll": "0x1.88839664c77dbp+0",
          "ece": "0x1.6464e2e72680fp-3", "brier": "0x1.a03edb5cd07eap-1"}
PINNED_TERMS = "0x1.eaa47bfdf95d2p+5"
PINNED_GAUSSIAN = {"nll": "0x1.becc99705386ap+1", "rmse": "0x1.4c55f59c8f03dp+0",
                   "coverage_0.5": "0x1.2666666666666p-1",
                   "coverage_0.9": "0x1.acccccccccccdp-1",
                   "coverage_0.95": "0x1.d333333333333p-1"}


@pytest.mark.parametrize("call, says", [
    (lambda p, y, m: metrics.nll(p.mean(0), y, mask=m[:, :3]),
     r"`mask` must have the positions' shape \(7, 5\) of `probs`.*got shape \(7, 3\)"),
    (lambda p, y, m: metrics.accuracy(p.mean(0), y[:, :3], mask=m),
     r"`labels` must have the positions' axes \[7, 5\], those of `probs`.*got shape \(7, 3\)"),
    (lambda p, y, m: metrics.accuracy(p.mean(0), y.ravel()),
     r"`labels` must have the positions' axes \[7, 5\].*got shape \(35,\)"),
    (lambda p, y, m: metrics.brier(p.mean(0), y, mask=np.zeros_like(m)),
     "`mask` must select at least one position"),
    (lambda p, y, m: metrics.ece(p.mean(0), y, mask=m * 2), r"`mask` must be booleans.*0/1"),
    (lambda p, y, m: metrics.nll(p.mean(0), y),  # the padding's -100, scored without a mask
     r"`labels` must be class indices in \[0, 3\]"),
    (lambda p, y, m: metrics.evaluate_members(p, y, mask=m.T),
     r"`mask` must have the positions' shape \(7, 5\) of `member_probs`.*got shape \(5, 7\)"),
    (lambda p, y, m: metrics.evaluate_members(p, y[:, :4], mask=m),
     r"`labels` must have the positions' axes \[7, 5\], those of `member_probs`"),
    (lambda p, y, m: metrics.evaluate_gaussian(p[0, ..., 0], p[1, ..., 0], p[2, ..., 0],
                                               mask=m[:2]),
     r"`mask` must have the positions' shape \(7, 5\) of `mean`"),
    (lambda p, y, m: ood.ood_auroc(p, p, out_mask=m[:, :1]),
     r"`out_mask` must have the positions' shape \(7, 5\) of `out_member_probs`"),
    (lambda p, y, m: ood.ood_auroc(p, p, per="token"),
     r"ood_auroc: `per` must be one of 'position', 'example'"),
    (lambda p, y, m: diagnostics.predictive_rhat(p[None], mask=m[:1]),
     r"`mask` must have the positions' shape \(7, 5\) of `chains_probs`"),
])
def test_bad_masks_and_labels_are_named_with_their_shapes(tagged, call, says):
    with pytest.raises(ValueError, match=says):
        call(*tagged)


def test_a_tagger_ensemble_scored_with_its_mask_is_its_evaluate():
    """One batch: ensemble.evaluate's loss is the mean NLL over the unmasked tokens."""
    rng = np.random.default_rng(6)
    x = np.where(padded(rng, 12, 6), rng.integers(1, 10, (12, 6)), 0).astype("int32")
    y = (x % 3).astype("int32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None,), dtype="int32"),
                              keras.layers.Embedding(10, 3, mask_zero=True),
                              keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(3)])
    sets = [[0.7 * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()]
            for _ in range(3)]
    ensemble = kb.PosteriorEnsemble(model, sets)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL(),
                     metrics=["sparse_categorical_accuracy"])
    result = ensemble.evaluate(x, y, batch_size=len(x), verbose=0, return_dict=True)
    members = ensemble.predict_members(x)
    scored = metrics.evaluate_members(members, y, mask=x != 0)["ensemble"]
    unmasked = metrics.nll(members.mean(0), y)
    # float32 softmax and mean in the ensemble, float64 here: a few ulps of ~1.
    assert scored["nll"] == pytest.approx(result["loss"], abs=2e-6)
    assert abs(unmasked - result["loss"]) > 1e-3  # the padding would show
    assert scored["accuracy"] == pytest.approx(result["sparse_categorical_accuracy"], abs=1e-6)
    assert kb.metrics.nll(ensemble.predict(x, verbose=0), y, mask=x != 0) == pytest.approx(
        result["loss"], abs=2e-6)
