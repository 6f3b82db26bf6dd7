"""Tests of keras_bnn.plots: PNG files written atomically with content."""

import os

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread

from keras_bnn import metrics, plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _probs_labels(seed=0, n=500, k=4):
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.standard_normal((n, k))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return probs, rng.integers(0, k, size=n)


def _check_png(path, width, height):
    with open(path, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    image = imread(path)
    # figsize (inches) x dpi 100 gives the pixel size.
    assert image.shape[:2] == (height, width)
    # A blank canvas has zero variance; drawn bars, lines and text do not.
    assert image[..., :3].std() > 0.05
    return image


def test_reliability_diagram_writes_png(tmp_path):
    probs, labels = _probs_labels()
    target = tmp_path / "sub" / "reliability.png"
    returned = plots.reliability_diagram(probs, labels, target, num_bins=10,
                                         title="test model")
    assert returned == str(target)
    _check_png(target, width=550, height=650)
    assert os.listdir(target.parent) == ["reliability.png"]  # no temp file left


def test_reliability_diagram_depends_on_the_data(tmp_path):
    probs, labels = _probs_labels()
    first = _check_png(plots.reliability_diagram(probs, labels, tmp_path / "a.png"),
                       550, 650)
    overconfident = np.full_like(probs, 0.01 / 3)
    overconfident[:, 0] = 0.99
    second = _check_png(plots.reliability_diagram(overconfident, labels,
                                                  tmp_path / "b.png"), 550, 650)
    assert not np.array_equal(first, second)


def test_reliability_diagram_validates_before_writing(tmp_path):
    probs, labels = _probs_labels()
    with pytest.raises(ValueError, match="num_bins"):
        plots.reliability_diagram(probs, labels, tmp_path / "x.png", num_bins=0)
    assert os.listdir(tmp_path) == []


def test_failed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "old.png"
    target.write_bytes(b"previous")

    def broken_savefig(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", broken_savefig)
    probs, labels = _probs_labels()
    with pytest.raises(RuntimeError, match="disk full"):
        plots.reliability_diagram(probs, labels, target)
    assert os.listdir(tmp_path) == ["old.png"]
    assert target.read_bytes() == b"previous"


def test_metric_vs_samples_plot_writes_png(tmp_path):
    members = np.stack([_probs_labels(seed=s)[0] for s in range(5)])
    labels = _probs_labels()[1]
    curve = metrics.evaluate_members(members, labels)["metric_vs_num_samples"]
    path = plots.metric_vs_samples_plot(
        curve, tmp_path / "curve.png", title="ensemble",
        baseline=metrics.evaluate_probs(members[0], labels), baseline_label="SGD")
    _check_png(path, width=900, height=380)
    assert os.listdir(tmp_path) == ["curve.png"]


@pytest.mark.parametrize("curve, baseline, match", [
    ({"num_samples": [1, 2], "accuracy": [0.5, 0.6]}, None, "curve"),
    ({"num_samples": [1, 2], "accuracy": [0.5], "nll": [1.0, 0.9]}, None, "curve"),
    ({"num_samples": [], "accuracy": [], "nll": []}, None, "curve"),
    ({"num_samples": [1], "accuracy": [0.5], "nll": [1.0]}, {"nll": 1.0}, "baseline"),
])
def test_metric_vs_samples_plot_validates(tmp_path, curve, baseline, match):
    with pytest.raises(ValueError, match=match):
        plots.metric_vs_samples_plot(curve, tmp_path / "c.png", baseline=baseline)


@pytest.mark.parametrize("path, says", [(None, "be a filesystem path ending in .png"),
                                        ("plot.pdf", "end in .png"),
                                        ("a_file/plot.png", "is a file")])
def test_a_plot_path_that_is_not_a_png_file_is_refused(tmp_path, path, says):
    """A ``.pdf`` path got PNG bytes; None gave os.fspath's TypeError."""
    probs = np.array([[0.8, 0.2], [0.3, 0.7]])
    (tmp_path / "a_file").write_text("x")
    target = path if path is None else str(tmp_path / path)
    with pytest.raises(ValueError, match=says):
        plots.reliability_diagram(probs, [0, 1], target)
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]
