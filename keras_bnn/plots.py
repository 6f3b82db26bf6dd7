"""PNG figures for evaluation reports (matplotlib, no display needed).

Figures are drawn on a bare `matplotlib.figure.Figure` (Agg canvas, no pyplot
global state) and written with `keras_bnn.durable.atomic_write` (temporary
file, fsync, rename), so a reader never sees a half-written PNG.
"""

import os

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from keras_bnn import durable
from keras_bnn import metrics
from keras_bnn.validation import argument_error, check_directory_path

_CURVE_METRICS = (("accuracy", "accuracy"), ("nll", "NLL (nats)"))


def _save_png(fig, path):
    """Writes `fig` to `path` atomically; returns path.

    Raises:
      ValueError: for a `path` that is not a filesystem path (str, bytes or
        os.PathLike) or holds a NUL byte, does not end in ``.png`` (a ``.pdf``
        named file would hold PNG bytes), or is a directory.
    """
    try:
        path = os.fsdecode(path)
    except TypeError:
        raise argument_error("path", "be a filesystem path ending in .png", path) from None
    if "\0" in path:  # else os.makedirs' "embedded null byte", naming no argument
        raise argument_error("path", "be a filesystem path without NUL bytes", path)
    if not path.lower().endswith(".png"):
        raise argument_error("path", "end in .png (the plots are written as PNG)", path)
    if os.path.isdir(path):
        raise argument_error("path", "be a file to write, not a directory", path)
    check_directory_path(os.path.dirname(os.path.abspath(path)), "path")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    FigureCanvasAgg(fig)
    durable.atomic_write(path, lambda handle: fig.savefig(handle, format="png"))
    return path


def _amount_text(n):
    """A bin's count or weight as printed above its bar, without an exponent: a
    whole number or one of 1000 or more to the unit (12345, not 1.234e+04), a
    smaller one to 4 significant digits."""
    if float(n).is_integer() or n >= 1000:
        return f"{n:.0f}"
    return np.format_float_positional(n, precision=4, unique=False, fractional=False,
                                      trim="-")


def reliability_diagram(probs, labels, path, num_bins=15, title=None, mask=None,
                        sample_weight=None):
    """Draws a reliability diagram and writes it as a PNG.

    Top panel: accuracy acc_b of each equal-width confidence bin as a bar over
    [b/B, (b+1)/B), the gap to the bin's mean confidence conf_b in red, and the
    diagonal acc = conf of perfect calibration. Bottom panel: the number of
    examples per bin, printed above each bar. The title gives
    ECE = Σ_b (n_b/N)|acc_b - conf_b| (see `metrics.ece`).

    Args:
      probs: [N, ..., K] class probabilities (per position: a tagger's
        [N, T, K], whose bins then count tokens).
      labels: [N, ...] integer labels in [0, K).
      path: output file; parent directories are created.
      num_bins: number B of confidence bins, B >= 1.
      title: optional text placed before the ECE in the title.
      mask: optional [N, ...] booleans, True = scored (`metrics`).
      sample_weight: optional weights w ≥ 0 (`metrics`): weighted bins, the
        bottom panel their weight W_b, the ECE Σ_b (W_b/W)|acc_b - conf_b|.

    Returns:
      `path` as a string.

    Raises:
      ValueError: as for `metrics.reliability`, or naming `path` for one that is not a
        ``.png`` file path (a directory, a path below a file).
    """
    stats = metrics.reliability(probs, labels, num_bins, mask, sample_weight)
    ece = metrics.ece(probs, labels, num_bins, mask, sample_weight)
    lower, width = stats["bin_lower"], 1.0 / num_bins
    amount = "count" if sample_weight is None else "weight"
    filled = stats[amount] > 0
    fig = Figure(figsize=(5.5, 6.5), dpi=100)
    ax_acc, ax_count = fig.subplots(2, 1, sharex=True,
                                    gridspec_kw={"height_ratios": [3, 1]})
    ax_acc.bar(lower[filled], stats["accuracy"][filled], width=width, align="edge",
               color="tab:blue", edgecolor="black", label="accuracy")
    gap = stats["confidence"][filled] - stats["accuracy"][filled]
    ax_acc.bar(lower[filled], gap, bottom=stats["accuracy"][filled], width=width,
               align="edge", color="tab:red", alpha=0.35, edgecolor="tab:red",
               label="gap to confidence")
    ax_acc.plot([0, 1], [0, 1], "k--", label="perfect calibration")
    ax_acc.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy")
    ax_acc.legend(loc="upper left")
    heading = f"ECE = {ece:.4f} ({num_bins} bins)"
    ax_acc.set_title(f"{title}\n{heading}" if title else heading)
    ax_count.bar(lower, stats[amount], width=width, align="edge",
                 color="tab:gray", edgecolor="black")
    for x, n in zip(lower[filled] + width / 2, stats[amount][filled]):
        ax_count.annotate(_amount_text(n), (x, n), ha="center", va="bottom", fontsize=7)
    ax_count.set(xlabel="confidence (max predicted probability)", ylabel=amount,
                 ylim=(0, 1.25 * stats[amount].max()))
    fig.tight_layout()
    return _save_png(fig, path)


def metric_vs_samples_plot(curve, path, title=None, baseline=None,
                           baseline_label="baseline", metrics=_CURVE_METRICS):
    """Plots metrics of the running ensemble against its size.

    Args:
      curve: dict with lists "num_samples" and one per metric of equal
        length, e.g. `metrics.evaluate_members(...)["metric_vs_num_samples"]`.
      path: output file; parent directories are created.
      title: optional figure title.
      baseline: optional dict with the same metrics (e.g. a single SGD/MAP
        model from `metrics.evaluate_probs`) drawn as horizontal dashed lines.
      baseline_label: legend text for `baseline`.
      metrics: (key, axis label) pairs, one panel each; default accuracy
        and NLL (regression: e.g. (("rmse", "RMSE"), ("nll", "NLL"))).

    Returns:
      `path` as a string.

    Raises:
      ValueError: if `curve` or `baseline` lacks a key or the lists are empty
        or of different lengths.
    """
    names = ["num_samples"] + [name for name, _ in metrics]
    missing = [name for name in names if name not in curve]
    if missing:
        raise ValueError(f"curve is missing keys {missing}; needs {names}")
    x = np.asarray(curve["num_samples"])
    if x.ndim != 1 or x.size == 0 or any(np.shape(curve[n]) != x.shape for n in names):
        raise ValueError(f"curve entries {names} must be non-empty lists of "
                         "equal length")
    if baseline is not None and any(n not in baseline for n, _ in metrics):
        raise ValueError(f"baseline must have keys {[n for n, _ in metrics]}")
    fig = Figure(figsize=(9, 3.8), dpi=100)
    for ax, (name, label) in zip(fig.subplots(1, len(metrics), squeeze=False)[0], metrics):
        ax.plot(x, curve[name], "o-", markersize=3, label="ensemble")
        if baseline is not None:
            ax.axhline(baseline[name], color="tab:red", linestyle="--",
                       label=baseline_label)
        ax.set(xlabel="number of samples in ensemble", ylabel=label)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save_png(fig, path)


def sweep_plot(rows, path, param="temperature", metrics=_CURVE_METRICS, title=None):
    """The cold-posterior plot: metrics against a swept value, over seeds.

    For each value v of ``param`` and each part (ensemble, single sample) it
    draws the mean over the rows (seeds) with value v, with error bars of ±
    the sample standard deviation over those rows,
    sqrt(Σ (x_i − x̄)² / (r − 1)) for r rows (none for a single seed). NaN
    scores (a run that collected no sample) are left out; a value with no
    other score has no point.

    Args:
      rows: dicts with key ``param`` and, for "single_sample" and
        "ensemble", keys "<part>_<metric>" for each metric (as written by
        `keras_bnn.runs.sweep`).
      path: output file; parent directories are created.
      param: the swept key, e.g. "temperature" or "prior_scale" (log axis).
      metrics: (key, axis label) pairs, one panel each.
      title: figure title (default: "<param> sweep").

    Returns:
      `path` as a string.

    Raises:
      ValueError: if `rows` is empty or lacks a key.
    """
    if not rows:
        raise ValueError("rows must hold at least one run")
    needed = [param] + [f"{part}_{name}" for part in ("single_sample", "ensemble")
                        for name, _ in metrics]
    missing = [key for key in needed if any(key not in row for row in rows)]
    if missing:
        raise ValueError(f"rows are missing keys {missing}")
    values = sorted({row[param] for row in rows})
    fig = Figure(figsize=(9, 3.8), dpi=100)
    for ax, (name, label) in zip(fig.subplots(1, len(metrics), squeeze=False)[0], metrics):
        for part, style in (("ensemble", "o-"), ("single_sample", "s--")):
            scores = [np.array([row[f"{part}_{name}"] for row in rows if row[param] == v])
                      for v in values]
            scores = [v[np.isfinite(v)] for v in scores]
            ax.errorbar(values, [v.mean() if v.size else np.nan for v in scores],
                        yerr=[v.std(ddof=1) if v.size > 1 else np.nan for v in scores],
                        fmt=style, capsize=3, label=part.replace("_", " "))
        if param == "temperature":
            ax.axvline(1.0, color="gray", linewidth=0.8)
        ax.set(xscale="log", xlabel=f"{param} (log scale)", ylabel=label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title or f"{param} sweep (mean ± std over seeds)")
    fig.tight_layout()
    return _save_png(fig, path)
