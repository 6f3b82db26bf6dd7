"""Checks that a likelihood can score ``fit``'s or ``evaluate``'s labels.

:func:`check_labels` is called by :func:`keras_bnn.fit_data.check_fit_data`
on arrays, and on a dataset's or generator's first batch; the messages
follow :mod:`keras_bnn.validation`'s wording.
"""

import numpy as np

from keras_bnn.validation import argument_error


def check_labels(labels, likelihood, classes=None, owner="fit", sparse=True,
                 output_shape=None, ignore_class=None):
    """Checks that a likelihood can score ``labels`` (named ``y`` in the message).

    Requirements: ``"categorical"`` with a sparse loss: integer class indices
    in [0, K) (K = ``classes``), one per output row: ``[N]`` (or ``[N, 1]``)
    for an output ``[N, K]``, ``[N, T]`` (or ``[N, T, 1]``) for a
    per-timestep output ``[N, T, K]`` (a tagger: ``y_nt`` scored by
    ``softmax(f(x_n)_t)``); ``"bernoulli"``: every label 0 or 1;
    ``"gaussian"``: every label finite.

    Args:
        labels: array-like of labels.
        likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or None
            (nothing to check).
        classes: K, the model's output width, for ``"categorical"``.
        owner: the caller, for the message.
        sparse: False for a one-hot categorical loss (then only finiteness
            is checked).
        output_shape: the model's output shape (batch axis first, None for
            a size not known), or None: then only ``[N]`` or ``[N, 1]``
            sparse labels pass.
        ignore_class: the sparse loss's ``ignore_class`` (padding labels it
            leaves out of its mean: allowed besides [0, K)), or None.

    Raises:
        ValueError: naming ``y`` and what it must be.
    """
    if likelihood is None:
        return
    labels = np.asarray(labels)
    if labels.size == 0:
        raise argument_error("y", "be at least one label", labels, owner, got="no labels")
    if labels.dtype.kind not in "biuf":
        raise argument_error("y", "be numeric labels", labels, owner,
                             got=f"dtype {labels.dtype}")
    finite = labels.dtype.kind != "f" or bool(np.all(np.isfinite(labels)))
    if likelihood == "gaussian" or (likelihood == "categorical" and not sparse):
        if not finite:
            raise argument_error("y", f"be finite for a {likelihood} likelihood", labels,
                                 owner, got="NaN or inf values")
        return
    if likelihood == "bernoulli":
        outside = labels[~((labels == 0) | (labels == 1))]
        if outside.size:
            raise argument_error(
                "y", "be 0 or 1 for a Bernoulli likelihood (one logit; K classes need a "
                "categorical head and loss)", labels, owner,
                got=f"values such as {np.unique(outside)[:3]}")
        return
    _check_sparse_shape(labels, output_shape, owner)
    integral = labels.dtype.kind in "biu" or (finite and np.all(labels == np.round(labels)))
    if not integral:
        bad = labels[~np.isfinite(labels) | (labels != np.round(labels))]
        raise argument_error("y", "be integer class indices", labels, owner,
                             got=f"values such as {bad[:3]}")
    scored = labels if ignore_class is None else labels[labels != ignore_class]
    if classes is None or not scored.size:
        return
    low, high = scored.min(), scored.max()
    if low < 0 or high >= classes:
        padding = "" if ignore_class is None else f", or the loss's ignore_class={ignore_class}"
        raise argument_error(
            "y", f"be class indices in [0, {classes - 1}] (the model outputs {classes} classes)"
            f"{padding}", labels, owner, got=f"class indices in [{low:g}, {high:g}]")


def _check_sparse_shape(labels, output_shape, owner):
    """Refuses sparse labels that are not one class index per row of the output's logits.

    The output ``[N, ..., K]`` has rows ``[N, ...]``; the labels must have
    that shape, with a trailing axis of 1 allowed.
    """
    rows = None if output_shape is None else tuple(output_shape)[1:-1]
    shape = labels.shape[1:]
    if shape and shape[-1] == 1 and len(shape) == (len(rows) + 1 if rows is not None else 1):
        shape = shape[:-1]
    if rows is None:
        fits = len(shape) == 0
    else:
        fits = len(shape) == len(rows) and all(r is None or r == g for r, g in zip(rows, shape))
    if not fits:
        expected = "[N" + "".join(f", {r or 'T'}" for r in (rows or ())) + "]"
        outputs = (f" (the model outputs {tuple(output_shape)}: one class index per row of "
                   "logits)" if output_shape is not None else "")
        raise argument_error(
            "y", f"be class indices of shape {expected} for a sparse categorical loss"
            f"{outputs}; one-hot labels need "
            "keras.losses.CategoricalCrossentropy(from_logits=True)", labels, owner,
            got=f"shape {labels.shape}")
