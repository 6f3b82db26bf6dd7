"""Evaluation figures against their definitions where members agree, and the
reliability diagram's printed counts."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from keras_bnn import ood, plots, uncertainty


def _agreeing_members(seed, concentration, members=10, n=500, k=10):
    """``[S, N, K]`` float32 probabilities, every member the same network's."""
    rows = np.random.default_rng(seed).dirichlet(np.full(k, concentration), size=(1, n))
    return np.repeat(rows, members, axis=0).astype(np.float32)


def test_members_that_agree_carry_no_information_and_rank_at_chance():
    # Confident in-distribution rows, flat OOD rows; the members of each set agree,
    # so their information is 0 and cannot tell the sets apart (the entropy can).
    inside, outside = _agreeing_members(0, 0.05), _agreeing_members(1, 5.0)
    for probs in (inside, outside):
        assert np.all(ood.uncertainty_scores(probs)["mutual_information"] == 0.0)
    scores = ood.ood_auroc(inside, outside)
    assert scores["mutual_information"] == 0.5  # was 0.5472: round-off ranked
    entropy = [ood.uncertainty_scores(p)["entropy"] for p in (inside, outside)]
    truth = np.r_[np.zeros(entropy[0].size), np.ones(entropy[1].size)]
    assert scores["entropy"] == pytest.approx(roc_auc_score(truth, np.concatenate(entropy)),
                                              abs=1e-12)


def test_agreement_is_per_position():
    probs = _agreeing_members(2, 1.0, members=3, n=4).astype(np.float64)
    probs[1, 0] = probs[1, 0, ::-1]  # member 1 disagrees on example 0 only
    information = ood.uncertainty_scores(probs)["mutual_information"]
    assert information[0] > 0.01 and np.all(information[1:] == 0.0)


@pytest.mark.parametrize("likelihood, units", [("categorical", 10), ("bernoulli", 1)])
def test_summary_information_is_zero_where_members_agree(likelihood, units):
    logits = 3.0 * np.random.default_rng(3).normal(size=(1, 300, units))
    members = np.repeat(logits, 10, axis=0).astype(np.float32)
    members[4, 0, 0] -= 5.0  # one member disagrees on example 0
    information = np.asarray(uncertainty.summary(members, likelihood)["mutual_information"])
    # Before: up to 2.4e-7 of round-off on 35 % of the agreeing examples.
    assert information[0] > 1e-3 and np.all(information[1:] == 0.0)


def test_reliability_diagram_prints_counts_in_full(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(plots, "_save_png", lambda fig, path: figures.append(fig) or path)
    confidence = np.r_[np.full(12345, 0.97), np.full(678, 0.55)]
    probs = np.stack([confidence, 1.0 - confidence], axis=1)
    labels = np.zeros(confidence.size, dtype=int)
    weights = np.r_[np.full(12345, 1.5), np.full(678, 0.5)]
    for sample_weight, printed in ((None, ["678", "12345"]), (weights, ["339", "18518"])):
        plots.reliability_diagram(probs, labels, tmp_path / "r.png", num_bins=10,
                                  sample_weight=sample_weight)
        counts = figures.pop().axes[1]
        assert [text.get_text() for text in counts.texts] == printed  # was 1.234e+04


def test_sweep_plot_error_bars_are_the_sample_standard_deviation(tmp_path, monkeypatch):
    """Error bars over seeds are sqrt(Σ(x − x̄)²/(r − 1)): three seeds scoring
    1, 2, 3 give ±1. Until 2026-11-30 they were numpy's population sd
    (ddof=0), ±0.816, 18 % short, and a single seed drew a bar of 0."""
    from matplotlib.axes import Axes

    drawn = []
    original = Axes.errorbar

    def record(self, x, y, yerr=None, **kwargs):
        drawn.append(np.asarray(yerr, dtype=float))
        return original(self, x, y, yerr=yerr, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", record)
    rows = [{"temperature": 1.0, "ensemble_nll": s, "single_sample_nll": s}
            for s in (1.0, 2.0, 3.0)]
    rows.append({"temperature": 0.1, "ensemble_nll": 5.0, "single_sample_nll": 5.0})
    plots.sweep_plot(rows, tmp_path / "w.png", metrics=(("nll", "NLL"),))
    assert len(drawn) == 2
    for yerr in drawn:  # values sorted: 0.1 (one seed), then 1.0
        assert np.isnan(yerr[0])
        np.testing.assert_allclose(yerr[1], 1.0, rtol=1e-12)
