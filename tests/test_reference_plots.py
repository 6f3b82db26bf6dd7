"""Plots of one metric: matplotlib's ``subplots(1, 1)`` is one Axes, not an array.

Until 2026-11-29 ``metric_vs_samples_plot`` and ``sweep_plot`` with one
``(key, label)`` pair in ``metrics`` failed with "TypeError: 'Axes' object
is not iterable".
"""

import numpy as np
import pytest

from keras_bnn import metrics, plots

PNG = b"\x89PNG\r\n\x1a\n"


def _curve():
    rng = np.random.default_rng(0)
    members = rng.dirichlet(np.ones(3), size=(4, 30))
    return metrics.evaluate_members(members, rng.integers(0, 3, size=30))


@pytest.mark.parametrize("panels", [(("nll", "NLL (nats)"),),
                                    (("nll", "NLL"), ("ece", "ECE"), ("brier", "Brier"))])
def test_any_number_of_panels(tmp_path, panels):
    scored = _curve()
    path = plots.metric_vs_samples_plot(scored["metric_vs_num_samples"], tmp_path / "s.png",
                                        baseline=scored["members"][0], metrics=panels)
    parts = {"single_sample": scored["members"][-1], "ensemble": scored["ensemble"]}
    rows = [{"temperature": t} | {f"{part}_{name}": scores[name] for part, scores in
                                  parts.items() for name, _ in panels} for t in (0.1, 1.0)]
    swept = plots.sweep_plot(rows, tmp_path / "w.png", metrics=panels)
    for written in (path, swept):
        with open(written, "rb") as file:
            assert file.read(8) == PNG
