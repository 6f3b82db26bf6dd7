"""The number of terms a model's loss averages over: examples, or (unmasked) timesteps.

Keras' loss of reduction ``"sum_over_batch_size"`` is the mean of its
unreduced values over the batch: one per example for an output ``[N, K]``,
one per timestep for a per-timestep output ``[N, T, K]`` (a tagger, a
sequence regression), and under a Keras mask (``Embedding(mask_zero=True)``)
or the loss's own (labels of its ``ignore_class``, padding: Keras masks them
out of the unreduced loss) the mean over the unmasked ones only. The potential
``U(θ) = n·mean(ℓ) − log p(θ)`` is the data's negative log-likelihood
``Σ ℓ`` (a sum over every term of every example) only when
n = ``train_size`` counts those terms: the tokens, not the sequences; for an
output ``[N, K]`` whose loss has an ``ignore_class`` (unlabelled rows), the
labels scored, not the examples.
:func:`training_terms` counts them in ``fit``'s arrays, for
:func:`keras_bnn.train_size.warn_on_train_size`; :func:`step_positions` in a
train step's batch, for a dataset's check after the first epoch
(:mod:`keras_bnn.models.weight_mean`); :func:`denominator` the terms one
output's loss divides by in a batch, for the means over a set of
``evaluate`` and validation (:mod:`keras_bnn.loss_shares`).
"""

import keras
import numpy as np
from keras import ops

from keras_bnn.keras_private import get_keras_mask  # as Keras' losses read it
from keras_bnn.keras_private import squeeze_or_expand_to_same_rank  # as Keras' reduction
from keras_bnn.likelihoods import from_loss, loss_leaves
from keras_bnn.validation import argument_error

#: Rows of ``x`` a forward pass counts the mask of at once.
CHUNK = 1024


def _unreduced(loss):
    """The loss as a function of ``(y_true, y_pred)`` giving its unreduced values, or None."""
    leaves = loss_leaves(loss)
    if len(leaves) != 1:  # no loss, or one per output of a multi-output model
        return None
    loss = leaves[0]
    if isinstance(loss, (str, dict)):
        loss = keras.losses.get(loss)
    if isinstance(loss, keras.losses.Loss):
        return type(loss).from_config(dict(loss.get_config(), reduction="none"))
    return loss if callable(loss) else None


def label_mask(loss, y_true, y_pred):
    """Where the labels are scored: not the loss's ``ignore_class`` (padding labels).

    Keras' ``sparse_categorical_crossentropy`` with ``ignore_class=c`` sets
    the mask ``m = (y ≠ c)`` on its unreduced values, and ``Loss.__call__``
    averages over ``Σ m`` (times the output's Keras mask) only:
    ``mean(ℓ) = Σ m·ℓ / Σ m``.

    Args:
        loss: one output's loss (a ``keras.losses.Loss``; anything without
            an ``ignore_class`` has no mask of its own).
        y_true: its labels, ``[N, ...]`` or ``[N, ..., 1]``.
        y_pred: its predictions ``[N, ..., K]``.

    Returns:
        A boolean tensor of ``y_pred``'s shape less its last axis, or None
        for a loss that scores every label.
    """
    ignore = getattr(loss, "ignore_class", None)
    if ignore is None:
        return None
    labels = ops.convert_to_tensor(y_true)
    if len(labels.shape) == len(y_pred.shape):  # [N, ..., 1], as Keras squeezes it
        labels = ops.squeeze(labels, -1)
    return ops.not_equal(labels, ops.cast(ignore, labels.dtype))


def denominator(y_pred, sample_weight, reduction, labels_counted=None):
    """What Keras' reduction of one output's loss on a batch divides its sum by.

    ``Σ m`` for ``"sum_over_batch_size"`` (``m`` the predictions' Keras mask
    times the loss's own, ``labels_counted``; every loss value counts where
    there is none: the predictions' shape less its last axis), ``Σ m·w`` for
    ``"mean_with_sample_weight"`` with weights ``w`` (ranks matched as Keras
    matches them). A sum over the batch's terms: summed over the batches it
    is the denominator of one batch holding them all, so a mean of the
    batches' losses weighed by it is the set's.

    Args:
        y_pred: the output's predictions ``[b, ..., K]`` (their Keras mask, if
            any, is the loss's).
        sample_weight: the output's weights, or None.
        reduction: the loss's reduction (one of
            :data:`keras_bnn.loss_checks.MEAN_REDUCTIONS`).
        labels_counted: the loss's own mask (:func:`label_mask`), or None.

    Returns:
        A float32 scalar tensor.
    """
    counted = None
    for mask in (get_keras_mask(y_pred), labels_counted):
        if mask is not None:
            mask = ops.cast(mask, "float32")
            counted = mask if counted is None else counted * mask
    if reduction == "mean_with_sample_weight" and sample_weight is not None:
        weights = ops.cast(sample_weight, "float32")
        if counted is not None:
            counted, weights = squeeze_or_expand_to_same_rank(counted, weights)
            weights = weights * counted
        return ops.sum(weights)
    if counted is not None:
        return ops.sum(counted)
    values = ops.cast(ops.size(y_pred), "float32")
    return values / ops.cast(ops.shape(y_pred)[-1], "float32") if len(y_pred.shape) > 1 else values


def ignored_class(loss):
    """The ``ignore_class`` of ``compile``'s one loss, or None (none, or several losses).

    Args:
        loss: ``compile``'s ``loss``.

    Returns:
        The class index the loss leaves out (padding labels), or None.
    """
    leaves = loss_leaves(loss)
    return getattr(leaves[0], "ignore_class", None) if len(leaves) == 1 else None


def _batch_terms(model, loss, x, y):
    """``(terms, values per example, mask)`` of one batch: the number of loss values
    Keras' mean is over (the unmasked ones), the unreduced values per example, and
    the mask of the values the loss counts: the output's Keras mask times the loss's
    own (:func:`label_mask`), broadcast to the values (None: none)."""
    predictions = model(x, training=False)
    masks = [m for m in (get_keras_mask(predictions), label_mask(loss, y, predictions))
             if m is not None]
    values = ops.convert_to_numpy(loss(y, predictions))
    per_example = int(np.prod(values.shape[1:], dtype="int64"))
    if not masks:
        return float(values.size), per_example, None
    mask = np.ones((), "float64")
    for part in masks:
        mask = mask * ops.convert_to_numpy(part).astype("float64")
    while mask.ndim > values.ndim and mask.shape[-1] == 1:
        mask = mask[..., 0]
    mask = np.broadcast_to(mask, values.shape)
    return float(np.sum(mask)), per_example, mask


def _rows(data, start, stop):
    """Rows ``start:stop`` of an array or a nest of arrays."""
    return keras.tree.map_structure(lambda array: array[start:stop], data)


def _per_position_loss(model):
    """The model's unreduced loss when its one output has positions (rank >= 3), or None."""
    outputs = getattr(model, "outputs", None)
    if not outputs or len(outputs) != 1 or len(outputs[0].shape) < 3:
        return None  # [N, K]: one loss value per example
    return _unreduced(getattr(model, "loss", None))


def _counted_loss(model):
    """The model's unreduced loss when its terms need counting, or None: one output with
    positions (rank >= 3), or an output ``[N, K]`` whose loss has an ``ignore_class``
    (its mean is over the labels scored, not over the examples)."""
    loss = _per_position_loss(model)
    if loss is None and len(getattr(model, "outputs", None) or ()) == 1:
        loss = _unreduced(getattr(model, "loss", None))
        return loss if getattr(loss, "ignore_class", None) is not None else None
    return loss


def counts_terms(model):
    """Whether the model's loss averages over other terms than its examples.

    A per-timestep output (:func:`has_positions`: its unmasked timesteps),
    or an output ``[N, K]`` whose loss has an ``ignore_class`` (its labels
    not that class: ``mean(ℓ) = Σ m_i·ℓ_i / Σ m_i``, ``m_i = (y_i ≠ c)``).

    Args:
        model: the compiled model.

    Returns:
        bool.
    """
    return _counted_loss(model) is not None


def has_positions(model):
    """Whether the model's loss has one term per position: one output ``[N, T, ..., K]``.

    Args:
        model: the compiled model.

    Returns:
        bool.
    """
    return _per_position_loss(model) is not None


def check_weight_shape(model, sample_weight, owner="fit"):
    """Refuses weights that Keras would not match one to one to the loss's values.

    Keras multiplies the unreduced values (``[N]`` for an output ``[N, K]``,
    ``[N, T]`` per timestep ``[N, T, K]``) by the weights after dropping a
    trailing axis of 1 from whichever has one more. ``[N]`` against
    ``[N, T]`` fails inside the compiled loss ("Dimensions must be equal,
    but are 8 and 6"); ``[N, 1, 1]`` against ``[N]`` broadcasts to
    ``[N, N, 1]``, every weight against every example, silently (a mean of
    1.605 for 1.451). Weights pass of the values' shape, each axis after the
    first of its size or 1 (``[N, 1]``: one weight a sequence), with a
    trailing axis of 1 allowed. Checked for one output of rank >= 2 under a
    per-position loss or a likelihood's (:func:`keras_bnn.likelihoods.from_loss`:
    values one per row of the output's last axis).

    Args:
        model: the compiled model (its ``loss`` and ``outputs`` are read).
        sample_weight: ``fit``'s or ``evaluate``'s weights (an array, or a
            first batch's), or None.
        owner: the caller, for the message.

    Raises:
        ValueError: naming ``sample_weight`` and the shapes that work.
    """
    shape = getattr(sample_weight, "shape", None)
    outputs = getattr(model, "outputs", None) or ()
    if (shape is None or len(outputs) != 1 or len(outputs[0].shape) < 2
            or not (has_positions(model) or from_loss(getattr(model, "loss", None)))):
        return
    values, given = tuple(outputs[0].shape)[:-1], tuple(shape)
    shape = given[:-1] if len(given) == len(values) + 1 and given[-1] == 1 else given
    if len(shape) == len(values) and all(
            g is None or v is None or g in (1, v) for g, v in zip(shape[1:], values[1:])):
        return
    positions = values[1:]
    ones = ", 1" * len(positions)
    steps = "".join(f", {p or 'T'}" for p in positions)
    shapes = (f"[N{ones}] (one weight a sequence, sample_weight[:, None]) or [N{steps}] (one "
              "a timestep) for a per-timestep loss" if positions
              else "[N] or [N, 1] (one weight an example)")
    raise argument_error(
        "sample_weight", f"have shape {shapes} (the model outputs {tuple(outputs[0].shape)}: "
        f"Keras matches the weights to the loss's [N{steps}] values, and fails or broadcasts "
        "other shapes against them)", sample_weight, owner, got=f"shape {given}")


def step_positions(model, y, y_pred):
    """The positions the loss averages over in a step's batch, as a tensor of 0/1.

    ``m`` over the batch's positions ``[b, T, ...]`` (the output's shape
    less its last axis), the output's Keras mask times the loss's own
    (:func:`label_mask`): ``Σ m`` is the denominator of Keras' masked mean,
    summed by the train step (one reduction, no host work) for ``fit``'s
    check of a dataset's terms against ``train_size``, and the weights'
    mean is over them (``Σ m·w / Σ m``)
    (:class:`keras_bnn.models.weight_mean.WarnOnEpochTotals`).

    Args:
        model: the compiled model (its ``loss`` and ``outputs`` are read, at
            trace time).
        y, y_pred: the batch's labels and the model's predictions on it.

    Returns:
        A float32 tensor ``[b, T, ...]``, or None for an output of rank 2 whose loss
        has no ``ignore_class`` (one term per example), a multi-output model
        or no labels, and for a
        masked output whose mask the predictions do not carry: not counted
        rather than counted wrong (under JAX, until 2026-11-29, none: the
        step's predictions came out of ``jax.value_and_grad`` without it;
        :mod:`keras_bnn.backend.jax` now sets it on them again).
    """
    loss = _counted_loss(model)
    mask = get_keras_mask(y_pred)
    if (loss is None or y is None
            or (mask is None and get_keras_mask(model.outputs[0]) is not None)):
        return None
    counted = ops.ones(ops.shape(y_pred)[:-1], "float32")
    for mask in (mask, label_mask(loss, y, y_pred)):
        if mask is not None:
            counted = counted * ops.cast(mask, "float32")
    return counted


def batch_terms(model, x, y):
    """The number of terms the loss averages over in one batch, for a per-timestep output.

    Args:
        model: the compiled, built model (its ``loss`` and ``outputs`` are read).
        x, y: a batch's inputs and labels.

    Returns:
        ``(terms, per_example)`` as :func:`training_terms`, or None for an
        output of rank 2 whose loss has no ``ignore_class`` (one term per
        example), a multi-output model or no labels.
    """
    loss = _counted_loss(model)
    if loss is None or y is None:
        return None
    return _batch_terms(model, loss, x, y)[:2]


def training_terms(model, x, y, rows):
    """The number of terms the loss averages over in the first ``rows`` examples of arrays.

    ``Σ_i m_i`` over the unreduced loss values ``ℓ_i`` of those examples,
    ``m_i`` the Keras mask times the loss's (:func:`label_mask`; 1 where
    there is none): the (unmasked, not ignored) timesteps of a per-timestep
    output ``[N, T, ...]``, the labels not the loss's ``ignore_class`` of an
    output ``[N, K]``. The likelihood term
    of the potential, ``n·mean(ℓ)`` over a batch, is the data's ``Σ ℓ`` for
    n equal to it. Read as :func:`training_positions` reads the mask.

    Args:
        model: the compiled, built model (its ``loss`` and ``outputs`` are read).
        x, y: ``fit``'s arrays (a nest of arrays for ``x``).
        rows: how many leading examples to count (after ``validation_split``).

    Returns:
        ``(terms, per_example)``: the number of terms (a float of integer
        value) and the unreduced loss values per example, or None for an
        output of rank 2 whose loss has no ``ignore_class`` (one loss value
        per example: ``rows`` terms), a multi-output model or no labels.
    """
    counted = training_positions(model, x, y, rows)
    return None if counted is None else counted[:2]


def training_positions(model, x, y, rows):
    """Which loss values of the first ``rows`` examples of arrays the loss counts.

    The ``m_i`` of :func:`training_terms`, which also averages ``fit``'s
    ``sample_weight`` over the values the loss counts
    (:func:`keras_bnn.train_size.warn_on_train_size`): Keras' masked mean is
    ``Σ m_i·w_i·ℓ_i / Σ m_i``, so the weights scale the data by
    ``Σ m_i·w_i / Σ m_i``. An output's Keras mask is read with one forward
    pass over the rows (inference mode), in chunks of :data:`CHUNK`; the
    loss's own mask alone from the labels; an unmasked loss from its first
    two rows.

    Args:
        model, x, y, rows: as :func:`training_terms`.

    Returns:
        ``(terms, per_example, mask)``: as :func:`training_terms`, and a
        float array of 0s and 1s shaped as the values of those rows (None:
        every value counts); or None as :func:`training_terms`.
    """
    loss = _counted_loss(model)
    if loss is None or y is None or rows <= 0:
        return None
    _, per_example, mask = _batch_terms(model, loss, _rows(x, 0, 2), _rows(y, 0, 2))
    if mask is None:
        return float(rows * per_example), per_example, None
    if get_keras_mask(model.outputs[0]) is None:  # the loss's own mask: the labels say it
        mask = ops.convert_to_numpy(label_mask(loss, _rows(y, 0, rows), model.outputs[0]))
        return float(np.sum(mask)), per_example, mask.astype("float64")
    mask = np.concatenate([
        _batch_terms(model, loss, _rows(x, start, min(start + CHUNK, rows)),
                     _rows(y, start, min(start + CHUNK, rows)))[2]
        for start in range(0, rows, CHUNK)])
    return float(np.sum(mask)), per_example, mask
