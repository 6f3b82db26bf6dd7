"""Checks that a likelihood can score ``fit``'s or ``evaluate``'s labels.

:func:`check_output_labels` is called by
:func:`keras_bnn.fit_data.check_fit_data` on arrays, and on a dataset's or
generator's first batch: it reads each output's labels and loss as Keras'
loss does (:mod:`keras_bnn.output_slots`) and checks them with
:func:`check_labels`; the messages follow :mod:`keras_bnn.validation`'s wording.

A dataset's or generator's later batches are not read here. A class index
outside [0, K) in one of them meets the sparse loss itself: under TensorFlow
on CPU ``fit`` stops at that step with ``InvalidArgumentError: Received a
label value of 10 which is outside the valid range of [0, 10)``; on a GPU
TensorFlow's loss is NaN for that example (TensorFlow's documented
behaviour); under JAX the example is scored 0 nats (a zero one-hot row) and
training goes on silently. An in-graph range check costs every step of every
run (a TensorFlow assertion: +11 µs a step, +17 %, on a 128 x 10 softmax
step, measured in a 500-step graph loop) to catch what TensorFlow on CPU
already catches, and JAX cannot raise from a compiled step: check a
dataset's labels before ``fit`` (e.g. ``dataset.reduce``) when they come
from an untrusted source.
"""

import numpy as np

from keras_bnn.likelihoods import from_loss, loss_leaves
from keras_bnn.output_slots import output_paths, path_name, reading_paths, weight_slots
from keras_bnn.validation import argument_error

#: How far from 1 a one-hot or soft label's row may sum (:func:`check_labels`): a row
#: summing to s weighs its example as s examples, and ``fit``'s weights may make the data
#: weigh 1 % more or fewer before it warns (``keras_bnn.train_size.WEIGHT_MEAN_TOLERANCE``).
ROW_SUM_TOLERANCE = 0.01


def check_output_labels(model, y, owner="fit"):
    """Checks each output's labels against the loss Keras scores them with.

    Keras' loss reads output k's labels at its path in the model's outputs (a
    list's k-th entry, a dict's entry of the output's name; a subclassed
    model's outputs are the labels' own entries; a dict by output name for
    list outputs, a list in the keys' order for dict outputs:
    :func:`keras_bnn.output_slots.reading_paths`) and scores them with
    ``compile``'s one loss (broadcast to every output) or with output k's
    entry of a list or dict of losses (read so too). Each is checked as :func:`check_labels`
    says, against output k's shape where the model has that many outputs.
    Labels or losses without an entry per output are left to Keras' own error.
    For a dataset or generator, ``y`` is its first batch only (see the module).

    Args:
        model: the compiled model (its ``loss`` and ``outputs`` are read).
        y: ``fit``'s or ``evaluate``'s labels, or a batch's (not None).
        owner: the caller, for the message.

    Raises:
        ValueError: naming ``y`` (``y[1]``, ``y['cls']``: the output's
            labels) and what they must be.
    """
    loss = getattr(model, "loss", None)
    outputs = getattr(model, "outputs", None) or ()
    paths = output_paths(model, y)
    try:
        labels = ([[((), y)]] if paths == [()]  # y: one array
                  else weight_slots(y, reading_paths(model, y, paths), "y"))
        given = loss_leaves(loss)
        losses = ([[((), given[0])]] * len(paths) if len(given) == 1
                  else weight_slots(loss, reading_paths(model, loss, paths), "loss"))
    except ValueError:  # not an entry per output: Keras' own error says so
        return
    for index, (leaves, scored_by) in enumerate(zip(labels, losses)):
        if len(scored_by) != 1:  # no loss for this output, or not one loss object
            continue
        output_loss = scored_by[0][1]
        shape = outputs[index].shape if len(outputs) == len(paths) else None
        loss_name = getattr(output_loss, "name", getattr(output_loss, "__name__", output_loss))
        for path, leaf in leaves:
            check_labels(leaf, from_loss(output_loss), shape[-1] if shape else None, owner,
                         sparse=loss_name == "sparse_categorical_crossentropy", output_shape=shape,
                         ignore_class=getattr(output_loss, "ignore_class", None),
                         name="y" + path_name(path))


def check_labels(labels, likelihood, classes=None, owner="fit", sparse=True,
                 output_shape=None, ignore_class=None, name="y"):
    """Checks that a likelihood can score ``labels`` (named ``name`` in the message).

    Requirements: ``"categorical"`` with a sparse loss: integer class indices
    in [0, K) (K = ``classes``), one per output row: ``[N]`` (or ``[N, 1]``)
    for an output ``[N, K]``, ``[N, T]`` (or ``[N, T, 1]``) for a
    per-timestep output ``[N, T, K]`` (a tagger: ``y_nt`` scored by
    ``softmax(f(x_n)_t)``); ``"bernoulli"``: every label 0 or 1;
    ``"gaussian"``: every label finite; ``"categorical"`` with a one-hot
    loss: finite, of the output's shape, in [0, 1], rows summing to 1 (or
    0: padding).

    Args:
        labels: array-like of labels.
        likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or None
            (nothing to check).
        classes: K, the model's output width, for ``"categorical"``.
        owner: the caller, for the message.
        sparse: False for a one-hot categorical loss (one-hot or soft labels).
        output_shape: the model's output shape (batch axis first, None for
            a size not known), or None: then only ``[N]`` or ``[N, 1]``
            sparse labels pass.
        ignore_class: the sparse loss's ``ignore_class`` (padding labels it
            leaves out of its mean: allowed besides [0, K)), or None.
        name: the labels as the message names them (``"y"``, ``"y['cls']"``).

    Raises:
        ValueError: naming ``name`` and what it must be.
    """
    if likelihood is None:
        return
    labels = np.asarray(labels)
    if labels.size == 0:
        raise argument_error(name, "be at least one label", labels, owner, got="no labels")
    if labels.dtype.kind not in "biuf":
        raise argument_error(name, "be numeric labels", labels, owner,
                             got=f"dtype {labels.dtype}")
    finite = labels.dtype.kind != "f" or bool(np.all(np.isfinite(labels)))
    if likelihood == "gaussian" or (likelihood == "categorical" and not sparse):
        if not finite:
            raise argument_error(name, f"be finite for a {likelihood} likelihood", labels,
                                 owner, got="NaN or inf values")
        if likelihood == "categorical":
            _check_distributions(labels, output_shape, owner, name)
        return
    if likelihood == "bernoulli":
        outside = labels[~((labels == 0) | (labels == 1))]
        if outside.size:
            raise argument_error(
                name, "be 0 or 1 for a Bernoulli likelihood (one logit; K classes need a "
                "categorical head and loss)", labels, owner,
                got=f"values such as {np.unique(outside)[:3]}")
        return
    _check_sparse_shape(labels, output_shape, owner, name)
    integral = labels.dtype.kind in "biu" or (finite and np.all(labels == np.round(labels)))
    if not integral:
        bad = labels[~np.isfinite(labels) | (labels != np.round(labels))]
        raise argument_error(name, "be integer class indices", labels, owner,
                             got=f"values such as {bad[:3]}")
    scored = labels if ignore_class is None else labels[labels != ignore_class]
    if classes is None or not scored.size:
        return
    low, high = scored.min(), scored.max()
    if low < 0 or high >= classes:
        padding = "" if ignore_class is None else f", or the loss's ignore_class={ignore_class}"
        raise argument_error(
            name, f"be class indices in [0, {classes - 1}] (the model outputs {classes} classes)"
            f"{padding}", labels, owner, got=f"class indices in [{low:g}, {high:g}]")


def _check_distributions(labels, output_shape, owner, name):
    """Refuses one-hot or soft labels that are not a distribution over the output's classes.

    ``-Σ_k y_k log p_k`` is the negative log-likelihood of a label drawn from
    ``y`` only for ``y`` in [0, 1] summing to 1 (to :data:`ROW_SUM_TOLERANCE`):
    a row summing to s weighs its example as s examples, a negative entry
    rewards the class it names. All-zero rows (padding, scored 0) pass; so
    do labels of the output's shape ``[N, ..., K]`` only.
    """
    rows = None if output_shape is None else tuple(output_shape)[1:]
    if rows is not None and (len(labels.shape) != len(rows) + 1 or any(
            r is not None and r != g for r, g in zip(rows, labels.shape[1:]))):
        raise argument_error(
            name, f"be one-hot labels or class probabilities of the output's shape "
            f"{tuple(output_shape)} for a categorical loss; class indices need "
            "keras.losses.SparseCategoricalCrossentropy(from_logits=True)", labels, owner,
            got=f"shape {labels.shape}")
    if labels.min() < 0 or labels.max() > 1:
        raise argument_error(name, "be one-hot labels or class probabilities, in [0, 1], for "
                             "a categorical loss", labels, owner,
                             got=f"values in [{labels.min() + 0.0:g}, {labels.max() + 0.0:g}]")
    sums = labels.reshape(-1, labels.shape[-1]).sum(-1) if labels.ndim >= 2 else np.ones(1)
    bad = sums[(np.abs(sums - 1) > ROW_SUM_TOLERANCE) & (sums != 0)]
    if bad.size:
        raise argument_error(
            name, "have rows summing to 1 for a categorical loss (a distribution over the "
            "classes; all-zero padding rows score 0): a row summing to s weighs its example "
            "as s examples", labels, owner, got=f"row sums such as {np.unique(bad)[:3]}")


def _check_sparse_shape(labels, output_shape, owner, name):
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
            name, f"be class indices of shape {expected} for a sparse categorical loss"
            f"{outputs}; one-hot labels need "
            "keras.losses.CategoricalCrossentropy(from_logits=True)", labels, owner,
            got=f"shape {labels.shape}")
