"""Checks that a likelihood can score ``fit``'s or ``evaluate``'s labels.

:func:`check_output_labels` is called by
:func:`keras_bnn.fit_data.check_fit_data` on arrays, and on a dataset's or
generator's first batch: it reads each output's labels and loss as Keras'
loss does (:mod:`keras_bnn.output_slots`) and checks them with
:func:`check_labels`; the messages follow :mod:`keras_bnn.validation`'s wording.

A dataset's or generator's later batches are checked in the steps (unchecked,
under JAX a class index outside [0, K) there is scored 0 nats, a zero one-hot
row, and trained on silently; an ensemble's ``evaluate`` reads NaN for K,
class K - 1 for -1; a Bernoulli label other than 0 and 1 trains silently on
either backend). The train step and
``evaluate``'s test step (a :class:`keras_bnn.PosteriorEnsemble`'s too)
count such labels (:func:`count_labels`: one comparison, a sum and an
``assign_add`` a step into :class:`LabelCounts`, summed over replicas;
measured on a 128 x 10 softmax model's SGLD step in ``fit``: +0.7 % on
TensorFlow, within noise on JAX); ``fit`` raises at the end of the epoch
that saw one (:class:`RaiseOnLabelCount`, before that epoch's sample is
collected), ``evaluate`` at its end (:func:`raising_after`). On a CPU
TensorFlow's loss stops the step at a class index out of range:
:func:`translated` raises the package's ``ValueError`` from its
``InvalidArgumentError``. On a GPU its loss is NaN for that example, which
the NaN/Inf policy (:mod:`keras_bnn.nonfinite`) may meet first.
"""

import contextlib
import re

import keras
import numpy as np
from keras import ops

from keras_bnn import backend
from keras_bnn.likelihoods import PredictiveNLL, from_loss, loss_leaves
from keras_bnn.output_slots import output_paths, path_name, reading_paths, weight_slots
from keras_bnn.validation import argument_error, counted, numeric_array

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
    outputs = getattr(model, "outputs", None) or ()
    scored, outputs_count = scored_labels(model, y)
    for index, name, leaf, output_loss in scored:
        shape = outputs[index].shape if len(outputs) == outputs_count else None
        loss_name = getattr(output_loss, "name", getattr(output_loss, "__name__", output_loss))
        check_labels(leaf, from_loss(output_loss), shape[-1] if shape else None, owner,
                     sparse=loss_name == "sparse_categorical_crossentropy", output_shape=shape,
                     ignore_class=getattr(output_loss, "ignore_class", None), name=name)


def scored_labels(model, y):
    """Each output's labels in ``y`` with the one loss that scores them, by Keras' rule.

    Keras reads output k's labels at its path in the model's outputs, or in the
    other container (:func:`keras_bnn.output_slots.reading_paths`), and scores
    them with ``compile``'s one loss or output k's entry of a list or dict of
    losses. Outputs without one loss object are left out.

    Args:
        model: the compiled model (its ``loss`` and outputs are read).
        y: labels: arrays or tensors (a step's), in any structure Keras takes.

    Returns:
        ``(scored, outputs)``: a list of ``(output index, name, labels, loss)``
        (``name``: ``"y"``, ``"y['cls']"``), and the number of outputs; an
        empty list for labels or losses without an entry per output (Keras'
        own error says so).
    """
    loss = getattr(model, "loss", None)
    paths = output_paths(model, y)
    try:
        # as the step's weights: one output's labels in a list or dict are its leaf
        # (``(y,)``, ``{"out": y}``); host labels that are not arrays (a list of
        # numbers) are the one output's whole
        whole = paths == [()] and not all(hasattr(leaf, "shape") for leaf in
                                          keras.tree.flatten(y))
        labels = [[((), y)]] if whole else weight_slots(y, reading_paths(model, y, paths), "y")
        given = loss_leaves(loss)
        losses = ([[((), given[0])]] * len(paths) if len(given) == 1
                  else weight_slots(loss, reading_paths(model, loss, paths), "loss"))
    except ValueError:  # not an entry per output: Keras' own error says so
        return [], len(paths)
    return [(index, "y" + path_name(path), leaf, scored_by[0][1])
            for index, (leaves, scored_by) in enumerate(zip(labels, losses))
            if len(scored_by) == 1 for path, leaf in leaves], len(paths)


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
    labels = numeric_array(labels)
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


#: The slots of :class:`LabelCounts`: the train step's labels, ``evaluate``'s (validation's).
TRAINING, EVALUATION = 0, 1

#: How to find the labels the step refused (:func:`raise_if_counted`, :func:`translated`).
_FIND = ("fit and evaluate check arrays and a dataset's first batch before the loop, later "
         "batches in the steps: find them in the labels, e.g. `dataset.filter(lambda x, y: "
         "tf.reduce_any((y < 0) | (y >= K)))` for K classes, and fix or drop them.")

#: TensorFlow's errors for a class index out of range (the value, then K): a sparse
#: categorical loss's, and an ensemble's ``PredictiveNLL``'s gather.
_TF_LABEL_ERRORS = (
    re.compile(r"Received a label value of (-?\d+) which is outside the valid range of "
               r"\[0, (\d+)\)"),
    re.compile(r"predictive_nll/GatherV2.*?indices\[[\d,]*\] = (-?\d+) is not in \[0, (\d+)\)",
               re.DOTALL))


class LabelCounts(keras.metrics.Metric):
    """The labels outside what their loss scores that the train step (slot
    :data:`TRAINING`) and ``evaluate`` (slot :data:`EVALUATION`) have seen since
    :meth:`clear`, as :func:`count_labels` counts them.

    A Keras metric so that its state is the step's on every backend (JAX passes
    it in and out of the compiled step; ``tf.distribute`` keeps a copy per
    replica, summed when read). :meth:`reset_state` does nothing: Keras resets
    every metric at each epoch and at validation, before the epoch's count is
    read. Its ``result()`` is empty: it logs nothing. A ``.keras`` file holds
    no metric's state: files are the same with it or without it.

    Args:
        name: the metric's name.
    """

    def __init__(self, name="label_counts", **kwargs):
        super().__init__(name=name, **kwargs)
        self.counts = [self.add_variable(shape=(), initializer="zeros", name=part,
                                         aggregation="sum")
                       for part in ("training", "evaluation")]
        self.rules = {}  # what each output's labels must be: set where the step is traced

    def update_state(self, labels, slot):
        """Adds the labels out of range (a 0/1 tensor of any shape) to a slot's count.

        Args:
            labels: 1 where a label is outside what its loss scores.
            slot: :data:`TRAINING` or :data:`EVALUATION`.
        """
        self.counts[slot].assign_add(ops.sum(ops.cast(labels, self.dtype)))

    def reset_state(self):
        """Nothing: the counts last across Keras' resets (see :meth:`clear`)."""

    def clear(self, slot):
        """Sets a slot's count to 0 (``fit``'s start, ``evaluate``'s)."""
        self.counts[slot].assign(ops.zeros((), self.dtype))

    def read(self, slot):
        """A slot's count, on the host (a float)."""
        return float(backend.to_numpy(self.counts[slot]))

    def result(self):
        """``{}``: nothing logged."""
        return {}


def attach_counts(model):
    """Gives ``model`` its :class:`LabelCounts` (once), for the steps to count in.

    Made in the model's ``tf.distribute`` strategy, tracked by Keras (unlocked
    for it, as :func:`keras_bnn.models.subclassing.make_sampling_trackers`
    does), so that ``model.metrics`` holds it. A step function traced before
    it existed is made again (once: later calls find it).

    Args:
        model: a compiled ``keras.Model`` (a :class:`keras_bnn.BayesianModel`,
            a :class:`keras_bnn.PosteriorEnsemble`).

    Returns:
        The model's :class:`LabelCounts`.
    """
    counts = getattr(model, "_label_counts", None)
    if counts is not None:
        return counts
    strategy = getattr(model, "_distribute_strategy", None)  # TensorFlow only
    tracker = model._tracker
    locked = tracker.locked
    tracker.unlock()
    try:
        with strategy.scope() if strategy is not None else contextlib.nullcontext():
            model._label_counts = LabelCounts()
    finally:
        if locked:
            tracker.lock()
    model.train_function = model.test_function = None  # traced without it
    return model._label_counts


def count_labels(model, y, y_pred, slot):
    """Counts, in the step, the labels that their loss cannot score (decided at trace time).

    A sparse categorical loss's labels outside [0, K) (K: the output's width;
    its ``ignore_class`` allowed), a Bernoulli loss's (binary cross-entropy,
    an ensemble's :class:`keras_bnn.likelihoods.PredictiveNLL` of one
    output) other than 0 and 1; other losses' are not counted. One
    comparison of the labels, a sum and an ``assign_add`` a step; nothing
    where ``model`` has no :class:`LabelCounts` (:func:`attach_counts`).

    Args:
        model: the model whose train or test step calls this.
        y, y_pred: the batch's labels and predictions (before a loss reads them).
        slot: :data:`TRAINING` or :data:`EVALUATION`.
    """
    counts = getattr(model, "_label_counts", None)
    if counts is None or y is None:
        return
    outputs = keras.tree.flatten(y_pred)
    scored, _ = scored_labels(model, y)
    outside = []
    for index, name, labels, loss in scored:
        classes = outputs[index].shape[-1] if index < len(outputs) else None
        kind = _counted_kind(loss, classes)
        if kind == "bernoulli":
            labels = ops.cast(labels, counts.dtype)
            outside.append(ops.sum(ops.cast(labels * (1.0 - labels) != 0.0, counts.dtype)))
            counts.rules[name] = "be 0 or 1 for a Bernoulli likelihood"
        elif kind == "categorical":
            ignore_class = getattr(loss, "ignore_class", None)
            labels = ops.cast(labels, "int32")
            # one comparison: a negative index is above K - 1 as an unsigned integer
            wrong = ops.cast(labels, "uint32") >= classes
            if ignore_class is not None:
                wrong = ops.logical_and(wrong, labels != ignore_class)
            outside.append(ops.sum(ops.cast(wrong, counts.dtype)))
            padding = "" if ignore_class is None else f", or the loss's ignore_class={ignore_class}"
            counts.rules[name] = (f"be class indices in [0, {classes}) (the model outputs "
                                  f"{classes} classes{padding})")
    if outside:
        counts.update_state(outside[0] if len(outside) == 1 else ops.stack(outside), slot)


def _counted_kind(loss, classes):
    """``"categorical"`` (sparse), ``"bernoulli"`` or None: the labels :func:`count_labels`
    counts for ``loss`` on an output of ``classes`` (its last axis; None: unknown)."""
    if isinstance(loss, PredictiveNLL):  # an ensemble's: of p̄ [N, K], or p(y=1) [N, 1]
        return None if classes is None else "categorical" if classes > 1 else "bernoulli"
    name = getattr(loss, "name", getattr(loss, "__name__", loss))
    if name == "sparse_categorical_crossentropy" and classes:
        return "categorical"
    return "bernoulli" if from_loss(loss) == "bernoulli" else None


def raise_if_counted(model, slot, owner, where):
    """Raises where ``model``'s steps counted labels out of range in ``slot``.

    Args:
        model: the model (nothing is read from one without :class:`LabelCounts`).
        slot: :data:`TRAINING` or :data:`EVALUATION`.
        owner: the caller, for the message (``"fit"``, ``"evaluate"``).
        where: what the steps were (``"epoch 3"``, ``"the data"``).

    Raises:
        ValueError: naming the labels (``y``, ``y['cls']``), what they must be,
            how many were not, and how to find them.
    """
    counts = getattr(model, "_label_counts", None)
    count = 0.0 if counts is None else counts.read(slot)
    if not count:
        return
    names = sorted(counts.rules) or ["y"]
    requirement = "; ".join(f"`{name}` must {counts.rules.get(name, 'be scored')}"
                            for name in names)
    raise ValueError(
        f"{owner}: {counted(int(count), 'label')} in {where} outside what the loss scores: "
        f"{requirement}. Under JAX a class index out of range is scored 0 nats (an "
        f"ensemble's NaN) and trained on silently. {_FIND}")


@contextlib.contextmanager
def translated(owner):
    """Raises the package's ``ValueError`` in place of TensorFlow's error for a class index
    out of range (on a CPU its loss stops the step at one: ``InvalidArgumentError``).

    Args:
        owner: the caller, for the message (``"fit"``, ``"evaluate"``).

    Yields:
        None.

    Raises:
        ValueError: naming ``y``, the allowed range and the label found, from
            TensorFlow's error; any other error passes unchanged.
    """
    try:
        yield
    except Exception as error:  # TensorFlow's InvalidArgumentError, found by its message
        found = next(filter(None, (pattern.search(str(error)) for pattern in _TF_LABEL_ERRORS)),
                     None)
        if found is None:
            raise
        value, classes = found.groups()
        raise ValueError(
            f"{owner}: `y` must be class indices in [0, {classes}) (the model outputs "
            f"{classes} classes); got {value} in a batch, where TensorFlow stopped (on a GPU "
            f"it scores NaN). {_FIND}") from error


class RaiseOnLabelCount(keras.callbacks.Callback):
    """Raises at the end of a ``fit`` epoch whose train steps counted labels out of range.

    ``fit`` puts it first among the callbacks (as
    :class:`keras_bnn.nonfinite.StopOnNonFinite`): no sample of that epoch is
    collected, and the samples collected before stay on disk.

    Args:
        model: the compiled model: its :class:`LabelCounts` is made now
            (:func:`attach_counts`), before ``fit`` traces the step.
    """

    def __init__(self, model):
        super().__init__()
        self.counts = attach_counts(model)

    def on_train_begin(self, logs=None):
        self.counts.clear(TRAINING)

    def on_epoch_end(self, epoch, logs=None):
        raise_if_counted(self.model, TRAINING, "fit", f"epoch {epoch}'s batches")


@contextlib.contextmanager
def raising_after(model, owner):
    """Runs ``evaluate``'s loop, then raises where its steps counted labels out of range.

    Args:
        model: the compiled model (given its :class:`LabelCounts`: :func:`attach_counts`).
        owner: the caller, for the message (``"evaluate"``, ``"fit(validation_data)"``).

    Yields:
        None.

    Raises:
        ValueError: as :func:`raise_if_counted`, after a loop that ended normally.
    """
    attach_counts(model).clear(EVALUATION)
    with translated(owner):
        yield
    raise_if_counted(model, EVALUATION, owner, "the data's batches")
