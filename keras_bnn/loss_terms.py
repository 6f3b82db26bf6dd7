"""The number of terms a model's loss averages over: examples, or (unmasked) timesteps.

Keras' loss of reduction ``"sum_over_batch_size"`` is the mean of its
unreduced values over the batch: one per example for an output ``[N, K]``,
one per timestep for a per-timestep output ``[N, T, K]`` (a tagger, a
sequence regression), and under a Keras mask (``Embedding(mask_zero=True)``)
the mean over the unmasked ones only. The potential
``U(θ) = n·mean(ℓ) − log p(θ)`` is the data's negative log-likelihood
``Σ ℓ`` (a sum over every term of every example) only when
n = ``train_size`` counts those terms: the tokens, not the sequences.
:func:`training_terms` counts them in ``fit``'s arrays, for
:func:`keras_bnn.fit_data.warn_on_train_size`.
"""

import keras
import numpy as np
from keras.src.backend.common.masking import get_keras_mask  # as Keras' losses read it

from keras_bnn.likelihoods import loss_leaves

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


def _batch_terms(model, loss, x, y):
    """``(terms, values per example, mask)`` of one batch: the number of loss values
    Keras' mean is over (the unmasked ones), the unreduced values per example, and
    the output's mask (None: none)."""
    predictions = model(x, training=False)
    mask = get_keras_mask(predictions)
    values = keras.ops.convert_to_numpy(loss(y, predictions))
    per_example = int(np.prod(values.shape[1:], dtype="int64"))
    if mask is None:
        return float(values.size), per_example, None
    mask = keras.ops.convert_to_numpy(mask).astype("float64")
    while mask.ndim > values.ndim and mask.shape[-1] == 1:
        mask = mask[..., 0]
    return float(np.sum(np.broadcast_to(mask, values.shape))), per_example, mask


def _rows(data, start, stop):
    """Rows ``start:stop`` of an array or a nest of arrays."""
    return keras.tree.map_structure(lambda array: array[start:stop], data)


def _per_position_loss(model):
    """The model's unreduced loss when its one output has positions (rank >= 3), or None."""
    outputs = getattr(model, "outputs", None)
    if not outputs or len(outputs) != 1 or len(outputs[0].shape) < 3:
        return None  # [N, K]: one loss value per example
    return _unreduced(getattr(model, "loss", None))


def batch_terms(model, x, y):
    """The number of terms the loss averages over in one batch, for a per-timestep output.

    Args:
        model: the compiled, built model (its ``loss`` and ``outputs`` are read).
        x, y: a batch's inputs and labels.

    Returns:
        ``(terms, per_example)`` as :func:`training_terms`, or None for an
        output of rank 2 (one loss value per example), a multi-output model
        or no labels.
    """
    loss = _per_position_loss(model)
    if loss is None or y is None:
        return None
    return _batch_terms(model, loss, x, y)[:2]


def training_terms(model, x, y, rows):
    """The number of terms the loss averages over in the first ``rows`` examples of arrays.

    ``Σ_i m_i`` over the unreduced loss values ``ℓ_i`` of those examples,
    ``m_i`` the Keras mask (1 where there is none): the (unmasked)
    timesteps of a per-timestep output ``[N, T, ...]``. The likelihood term
    of the potential, ``n·mean(ℓ)`` over a batch, is the data's ``Σ ℓ`` for
    n equal to it. A masked loss is counted with one forward pass over the
    rows (inference mode), in chunks of :data:`CHUNK`; an unmasked one from
    its first two rows.

    Args:
        model: the compiled, built model (its ``loss`` and ``outputs`` are read).
        x, y: ``fit``'s arrays (a nest of arrays for ``x``).
        rows: how many leading examples to count (after ``validation_split``).

    Returns:
        ``(terms, per_example)``: the number of terms (a float of integer
        value) and the unreduced loss values per example, or None for an
        output of rank 2 (one loss value per example: ``rows`` terms), a
        multi-output model or no labels.
    """
    loss = _per_position_loss(model)
    if loss is None or y is None or rows <= 0:
        return None
    _, per_example, mask = _batch_terms(model, loss, _rows(x, 0, 2), _rows(y, 0, 2))
    if mask is None:
        return float(rows * per_example), per_example
    terms = sum(_batch_terms(model, loss, _rows(x, start, min(start + CHUNK, rows)),
                             _rows(y, start, min(start + CHUNK, rows)))[0]
                for start in range(0, rows, CHUNK))
    return float(terms), per_example
