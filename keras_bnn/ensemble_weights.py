"""How a :class:`keras_bnn.PosteriorEnsemble` holds its S weight sets.

A weight that differs between members is held as one ``[S, *shape]``
stack; a weight whose value is the same, bit for bit, in every member (a
frozen backbone's kernels, a frozen ``BatchNormalization``'s statistics,
anything a :class:`keras_bnn.SampleStore` keeps in its shared file) is held
once, with its own shape, and every member's call reads that one copy. So an
ensemble of S samples of a sampled head on a frozen backbone holds the
backbone once, in memory, in ``.keras`` files and in its SavedModel export.
"""

import numpy as np

from keras_bnn.shared_weights import same_bytes
from keras_bnn.validation import argument_error


def _checked(model, weight_sets):
    """The weight sets as lists of numpy arrays of the model's dtypes, checked
    against ``model.weights`` (count, shapes, finiteness)."""
    weight_sets = [list(weights) for weights in weight_sets]
    if not weight_sets:
        raise ValueError("`weight_sets` must hold at least one weight set; got none.")
    expected = [(tuple(w.shape), w.dtype) for w in model.weights]
    for s, weights in enumerate(weight_sets):
        if len(weights) != len(expected):
            raise ValueError(
                f"`weight_sets[{s}]` has {len(weights)} arrays; `model` has "
                f"{len(expected)} weights (pass them in `model.weights` order)."
            )
        for j, (array, (shape, dtype)) in enumerate(zip(weights, expected)):
            if s and array is weight_sets[0][j]:
                continue  # one array in every set (a store's shared weights): checked once
            if tuple(np.shape(array)) != shape:
                raise ValueError(
                    f"`weight_sets[{s}][{j}]` has shape {tuple(np.shape(array))}; "
                    f"`model.weights[{j}]` ({model.weights[j].path}) has shape {shape}."
                )
            if not np.all(np.isfinite(np.asarray(array, dtype=np.float64))):
                raise ValueError(f"`weight_sets[{s}][{j}]` ({model.weights[j].path}) holds "
                                 "NaN or inf: a member must be a finite sample (the store "
                                 "refuses such samples too).")
    return [[np.asarray(weights[j], dtype=dtype) for j, (_, dtype) in enumerate(expected)]
            for weights in weight_sets]


def same_in_every_set(weight_sets, j):
    """Whether weight ``j`` is the same, bit for bit, in every weight set.

    Args:
        weight_sets: lists of arrays, one list per set (member, draw).
        j: the weight's index.

    Returns:
        bool; True at once for one array shared by every set (a store's shared file).
    """
    first = weight_sets[0][j]
    return all(same_bytes(weights[j], first) for weights in weight_sets[1:])


def arrange(model, weight_sets, shared_weights=None):
    """Checks S weight sets against ``model.weights`` and lays them out.

    Args:
        model: the member model.
        weight_sets: S ≥ 1 lists of arrays in ``model.weights`` order.
        shared_weights: indices of the weights to hold once; None: every
            weight whose value is the same, bit for bit, in all S sets.

    Returns:
        ``(values, shared, S)``: per weight a numpy array, ``[S, *shape]``
        or, for a weight in ``shared`` (sorted tuple of indices), ``shape``;
        and the number S of weight sets.

    Raises:
        ValueError: if ``weight_sets`` is empty or does not match
            ``model.weights``, or naming ``shared_weights`` for an index out of
            range or of a weight that differs between the sets.
    """
    weight_sets = _checked(model, weight_sets)
    count = len(model.weights)
    if shared_weights is None:
        shared = tuple(j for j in range(count) if same_in_every_set(weight_sets, j))
    else:
        requested = list(shared_weights)
        wrong = [j for j in requested if not isinstance(j, (int, np.integer))
                 or isinstance(j, bool) or not 0 <= j < count
                 or not same_in_every_set(weight_sets, j)]
        shared = tuple(sorted({int(j) for j in requested})) if not wrong else ()
        if wrong:
            raise argument_error(
                "shared_weights", f"list indices in [0, {count}) of weights whose value is "
                "the same in every weight set", shared_weights, "PosteriorEnsemble",
                got=f"{shared_weights!r} ({wrong} are not)")
    values = [weight_sets[0][j] if j in shared else np.stack([w[j] for w in weight_sets])
              for j in range(count)]
    return values, shared, len(weight_sets)


def as_stacks(values, shared, num_members):
    """Every weight as ``[S, *shape]``: a weight held once is a read-only view
    broadcast over the members (no S copies).

    Args:
        values: per weight the array the ensemble holds (see :func:`arrange`).
        shared: the indices of the weights held once.
        num_members: S.

    Returns:
        list of numpy arrays.
    """
    return [np.broadcast_to(v, (num_members, *v.shape)) if j in shared else v
            for j, v in enumerate(values)]
