"""``keras-bnn evaluate --baseline-run-dir``'s verdict on the paired NLL difference."""

import numpy as np

from keras_bnn import console, metrics


def _verdict(a, b, capsys):
    console.print_vs_baseline({"nll_vs_baseline": metrics.paired_difference(a, b)})
    return capsys.readouterr().out.splitlines()[0].rsplit(": ", 1)[1]


def test_identical_runs_show_no_difference(capsys):
    """A run against itself, or its rerun with the same seed (sampler noise is a
    function of the seed), has Δ̄ = SE = 0; until 2026-11-29 the verdict was
    "the baseline is better" (``0 < 2·0`` is False, and Δ̄ < 0 False)."""
    nll = np.random.default_rng(0).uniform(0.0, 3.0, size=50)
    assert _verdict(nll, nll.copy(), capsys) == "no difference detectable at 2 SE"


def test_a_consistent_difference_is_still_called(capsys):
    """Δ̄ = ∓0.1 with SE ≈ 0.01/√50: far beyond 2 SE, called either way."""
    rng = np.random.default_rng(1)
    nll = rng.uniform(0.0, 3.0, size=50)
    shift = 0.1 + 0.01 * rng.standard_normal(50)
    assert _verdict(nll - shift, nll, capsys) == "the ensemble is better"
    assert _verdict(nll + shift, nll, capsys) == "the baseline is better"
