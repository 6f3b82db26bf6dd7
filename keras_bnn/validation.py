"""Argument checks shared by the package: one signature, one wording.

Every check has the common signature
``check_<kind>(value, name, [requirement parameters,] owner=None)``:
``value`` is what the caller passed, ``name`` the argument's name (for the
message) and ``owner`` the class or function it belongs to (optional, for
the message). A check returns the
value converted to the type the caller needs (``float``, ``int``, ...) or
raises a ``ValueError`` (wrong values *and* wrong types: callers catch one
exception type) whose message always reads::

    <owner>: `<name>` must <requirement>; got <value!r>.

(without the ``<owner>: `` prefix when no owner is given), naming the allowed
values or range. :func:`argument_error` builds that message for checks that
live next to the code they guard (shapes of arrays, ``depth = 9k + 2``).

Numbers that reach a graph are float32 there: a value that is positive and
finite in float64 but 0 or inf in float32 (``1e-46``, ``1e300``) would freeze
a chain or inject no noise, so :func:`check_positive` and :func:`check_finite`
refuse them.

This module imports numpy only (no Keras, no TensorFlow).
"""

import math
import operator
import os
import warnings

import numpy as np

_FLOAT32 = np.finfo(np.float32)
_TINY, _MAX = float(_FLOAT32.tiny), float(_FLOAT32.max)


def argument_error(name, requirement, value, owner=None, *, got=None):
    """The package's ``ValueError`` for a bad argument, in the common wording.

    Args:
        name: the argument's name (``"step_size"``, ``"hidden[1]"``).
        requirement: what it must be, as the phrase that follows "must"
            (``"be an int >= 1"``, ``"be one of 'a', 'b'"``, ``"lie in [0, 1]"``).
        value: the value received (shown with ``repr``).
        owner: the class or function the argument belongs to, or None.
        got: text shown instead of ``repr(value)`` when the value itself is
            too large to print (``"shape (0, 4)"``, ``"an empty dataset"``).

    Returns:
        ``ValueError("<owner>: `<name>` must <requirement>; got <value!r>.")``
        (to ``raise``).
    """
    prefix = f"{owner}: " if owner else ""
    shown = repr(value) if got is None else got
    return ValueError(f"{prefix}`{name}` must {requirement}; got {shown}.")


def _as_float(value):
    """``float(value)`` for real numbers (not bools or strings), else NaN."""
    if isinstance(value, (bool, str, bytes)):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _float_that(value, name, owner, holds, requirement):
    """``float(value)`` if ``holds(float(value))``, else the common ValueError."""
    number = _as_float(value)
    if not holds(number):
        raise argument_error(name, requirement, value, owner)
    return number


def check_positive(value, name, owner=None):
    """Returns ``float(value)`` for a number that is positive and finite in float32.

    Requirement: ``0 < value`` and ``float32.tiny <= value <= float32.max``
    (about [1.2e-38, 3.4e38]: below, float32 rounds it to 0 or a subnormal
    that has lost its precision; above, to inf).

    Args:
        value, name, owner: the number, its argument's name and the class or
            function it belongs to (the common signature above).

    Returns:
        float in [float32.tiny, float32.max].

    Raises:
        ValueError: naming ``name`` for a non-number, 0, a negative, NaN,
            inf, or a value outside float32's normal range.
    """
    number = _float_that(value, name, owner, lambda x: x > 0.0 and math.isfinite(x),
                         "be a positive finite number")
    if not _TINY <= number <= _MAX:
        raise argument_error(
            name, f"lie in float32's normal range [{_TINY:.3g}, {_MAX:.3g}] (it is used in "
            "float32, where this value is 0, subnormal or inf)", value, owner)
    return number


def check_finite(value, name, owner=None):
    """Returns ``float(value)`` for a number that is finite in float32 (``|value| <= float32.max``).

    Args:
        value, name, owner: as in the common signature above.

    Returns:
        float with ``|value| <= float32.max``.

    Raises:
        ValueError: naming ``name`` for a non-number, NaN, inf, or a value
            beyond float32's range.
    """
    return _float_that(value, name, owner, lambda x: math.isfinite(x) and abs(x) <= _MAX,
                       "be a finite number (in float32's range)")


def check_fraction(value, name, owner=None):
    """Returns ``float(value)`` for a number in the open interval (0, 1): a
    decay rate or probability that must be neither 0 nor 1.

    Args:
        value, name, owner: as in the common signature above.

    Returns:
        float in (0, 1).

    Raises:
        ValueError: naming ``name`` for a non-number or a value outside (0, 1).
    """
    return _float_that(value, name, owner, lambda x: 0.0 < x < 1.0, "be a number in (0, 1)")


def check_directory_path(path, name, owner=None):
    """Returns ``path`` if a directory is there, or can be made there.

    Args:
        path, name, owner: as ``value, name, owner`` in the common signature.

    Raises:
        ValueError: naming ``name`` for a path that is a file, or lies below
            one (``os.makedirs`` would raise ``FileExistsError`` or
            ``NotADirectoryError``).
    """
    probe = os.path.abspath(path)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise argument_error(name, "be a directory, or a path where one can be made", path,
                             owner, got=f"{os.fspath(path)!r}, where {probe!r} is a file")
    return path


def check_choice(value, name, allowed, owner=None):
    """Returns ``value`` if it is one of ``allowed``.

    Args:
        value, name, owner: as in the common signature above.
        allowed: the allowed values (any container; listed in the message).

    Returns:
        ``value`` unchanged.

    Raises:
        ValueError: naming ``name`` and every allowed value otherwise
            (also for an unhashable ``value``).
    """
    try:
        known = value in allowed
    except TypeError:  # unhashable value
        known = False
    if not known:
        raise argument_error(name, f"be one of {', '.join(map(repr, allowed))}", value, owner)
    return value


def check_bool(value, name, owner=None):
    """Returns ``value`` if it is a bool (``"no"`` or 0 must not silently mean a truth value).

    Args:
        value, name, owner: as in the common signature above.

    Returns:
        ``value`` unchanged.

    Raises:
        ValueError: naming ``name`` for anything but True or False (NumPy's
            ``bool_`` included).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise argument_error(name, "be True or False", value, owner)
    return bool(value)


def _as_int(value):
    """``operator.index(value)`` for a Python or NumPy integer (not a bool), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_int(value, name, minimum=None, maximum=None, owner=None):
    """Returns ``int(value)`` for an integer (Python or NumPy) in [minimum, maximum].

    Args:
        value, name, owner: as in the common signature above. Bools and
            floats (also 2.0) are refused: 1.9 must not silently become 1.
        minimum: smallest allowed value, or None for no lower bound.
        maximum: largest allowed value, or None for no upper bound.

    Returns:
        int.

    Raises:
        ValueError: naming ``name`` and the allowed range otherwise.
    """
    number = _as_int(value)
    if (number is None or (minimum is not None and number < minimum)
            or (maximum is not None and number > maximum)):
        if maximum is None:
            bound = "" if minimum is None else f" >= {minimum}"
        else:
            bound = f" <= {maximum}" if minimum is None else f" in [{minimum}, {maximum}]"
        raise argument_error(name, f"be an int{bound}", value, owner)
    return number


def check_positive_int(value, name, owner=None):
    """Returns ``int(value)`` for a count n >= 1 (``train_size``, ``num_steps``).

    The requirement is ``value ∈ {1, 2, 3, ...}``: a Python or NumPy
    integer, or a float with an integral value (``60000.0``: counts come back
    as floats from JSON and from the samplers' saved configs). A fractional
    count (``1.5``), NaN, inf, a bool, a string or None is refused; nothing
    is rounded.

    Args:
        value, name, owner: as in the common signature above.

    Returns:
        int >= 1.

    Raises:
        ValueError: naming ``name`` and saying it must be "an integer >= 1".
    """
    number = _as_int(value)
    if number is None and isinstance(value, (float, np.floating)) and float(value).is_integer():
        number = int(value)
    if number is None or number < 1:
        raise argument_error(name, "be an integer >= 1", value, owner)
    return number


def check_shape(value, name, rank=None, layout="a tuple of ints >= 1", owner=None, *,
                open_axes=()):
    """Returns ``tuple(value)`` for the shape of one example (``input_shape``).

    Args:
        value, name, owner: as in the common signature above.
        rank: the number of sizes required, or None for any number >= 1.
        layout: the requirement, for the message: what the shape holds and
            which sizes may be None (``"(height, width, channels) of ints >= 1"``).
        open_axes: the axes whose size may be None (left open: images of any
            height and width before a global pooling).

    Returns:
        tuple of ints >= 1 (None on ``open_axes``).

    Raises:
        ValueError: naming ``name`` for anything but a tuple or list of
            ``rank`` (or at least one) sizes, each an int >= 1 or, on
            ``open_axes``, None.
    """
    sizes = tuple(value) if isinstance(value, (tuple, list)) else ()
    fixed = [size for axis, size in enumerate(sizes) if size is not None or axis not in open_axes]
    if (not sizes or (rank is not None and len(sizes) != rank)
            or any((_as_int(size) or 0) < 1 for size in fixed)):
        raise argument_error(name, f"be {layout}", value, owner)
    return tuple(None if size is None else _as_int(size) for size in sizes)


def check_seed(value, name="seed", owner=None):
    """Returns a stateless-RNG seed: an int in [0, 2**31 - 1].

    Args:
        value, name, owner: as in the common signature above.

    Returns:
        int.

    Raises:
        ValueError: naming ``name`` for a float (1.9 is not silently 1), a
            bool, a negative or too large value.
    """
    return check_int(value, name, 0, 2**31 - 1, owner)


def _fit_argument(args, kwargs, position, name):
    return args[position] if len(args) > position else kwargs.get(name)


def first_batch(data):
    """The first batch of a ``tf.data.Dataset`` or a ``keras.utils.PyDataset``.

    Read once per ``fit`` (one ``take(1)``, or ``data[0]``), before any graph runs.

    Args:
        data: ``fit``'s ``x``.

    Returns:
        ``(x, y, sample_weight)`` of the first batch (``y`` and
        ``sample_weight`` None where the batch has none), or None for arrays,
        generators, and an empty dataset.
    """
    import keras  # noqa: PLC0415 - this module is read before Keras is imported

    if hasattr(data, "element_spec"):
        element = next(iter(data.take(1)), None)
    elif isinstance(data, keras.utils.PyDataset) and data.num_batches != 0:
        element = data[0]
    else:
        return None
    if element is None:
        return None
    return keras.utils.unpack_x_y_sample_weight(
        tuple(element) if isinstance(element, list) else element)


def batch_length(inputs):
    """The number of examples in a batch of inputs: its first leaf's first axis.

    Args:
        inputs: a batch's ``x`` (an array, a tensor, or a nest of them).

    Returns:
        int, or None where the first leaf has no leading axis of known size.
    """
    import keras  # noqa: PLC0415 - this module is read before Keras is imported

    leaves = keras.tree.flatten(inputs)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    return None if shape is None or not len(shape) or shape[0] is None else int(shape[0])


def _check_batched(model, inputs, owner):
    """Refuses a dataset whose elements are single examples of a one-input model."""
    import keras  # noqa: PLC0415 - this module is read before Keras is imported

    expected = getattr(model, "inputs", None)
    leaves = keras.tree.flatten(inputs)
    if not expected or len(expected) != 1 or len(leaves) != 1:
        return
    shape, expected = tuple(leaves[0].shape), tuple(expected[0].shape)
    if len(shape) == len(expected) - 1 and all(
            e is None or e == g for e, g in zip(expected[1:], shape)):
        raise argument_error(
            "x", f"yield batches of examples of shape {expected[1:]} (the model's input): "
            "batch the dataset, dataset.batch(batch_size)", inputs, owner,
            got=f"single examples of shape {shape}")


def check_labels(labels, likelihood, classes=None, owner="fit", sparse=True):
    """Checks that a likelihood can score ``labels`` (named ``y`` in the message).

    Requirements: ``"categorical"`` with a sparse loss: integer class indices
    in [0, K) in one column (K = ``classes``); ``"bernoulli"``: every label
    0 or 1; ``"gaussian"``: every label finite.

    Args:
        labels: array-like of labels.
        likelihood: ``"categorical"``, ``"bernoulli"``, ``"gaussian"`` or None
            (nothing to check).
        classes: K, the model's output width, for ``"categorical"``.
        owner: the caller, for the message.
        sparse: False for a one-hot categorical loss (then only finiteness
            is checked).

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
    if labels.ndim > 1 and labels.shape[-1] > 1:
        raise argument_error(
            "y", "be class indices of shape [N] for a sparse categorical loss (one-hot "
            "labels need keras.losses.CategoricalCrossentropy(from_logits=True))", labels,
            owner, got=f"shape {labels.shape}")
    integral = labels.dtype.kind in "biu" or (finite and np.all(labels == np.round(labels)))
    if not integral:
        bad = labels[~np.isfinite(labels) | (labels != np.round(labels))]
        raise argument_error("y", "be integer class indices", labels, owner,
                             got=f"values such as {bad[:3]}")
    low, high = labels.min(), labels.max()
    if classes is not None and (low < 0 or high >= classes):
        raise argument_error(
            "y", f"be class indices in [0, {classes - 1}] (the model outputs {classes} classes)",
            labels, owner, got=f"class indices in [{low:g}, {high:g}]")


def check_example_shape(x, expected, owner=None):
    """Refuses an array ``x`` whose examples do not have the model's input shape.

    Args:
        x: the inputs; anything without a ``shape`` (a dataset, a list of
            arrays) is left to Keras.
        expected: one example's shape (None: any size along that axis).
        owner: the function or class, for the message.

    Raises:
        ValueError: naming ``x``, the expected and the given example shape.
    """
    if not (hasattr(x, "shape") and len(x.shape) >= 1):
        return
    expected, got = tuple(expected), tuple(x.shape[1:])
    if len(expected) != len(got) or any(e is not None and e != g for e, g in zip(expected, got)):
        raise argument_error("x", f"hold examples of shape {expected} (the model's input)", x,
                             owner, got=f"examples of shape {got}")


def check_epoch_ends(data, steps, name, owner="fit"):
    """Refuses an endless ``tf.data.Dataset`` (``dataset.repeat()``) without a step count.

    Keras runs such an epoch forever: ``fit`` never reaches an epoch end,
    where samples are collected and the equilibrium is tested, and never
    returns; ``evaluate`` never returns.

    Args:
        data: the dataset (anything else passes).
        steps: the steps argument that bounds it (``steps_per_epoch``,
            ``validation_steps``, ``steps``), or None.
        name, owner: that argument's name and its function, for the message.

    Raises:
        ValueError: naming ``name`` when ``data`` is endless and ``steps`` is None.
    """
    if steps is None and hasattr(data, "cardinality") and int(data.cardinality()) == -1:
        raise argument_error(
            name, "be given for an endless dataset (dataset.repeat()): without it the epoch "
            "never ends (samples are collected and the equilibrium tested at epoch ends)",
            steps, owner)


def check_fit_data(model, args, kwargs, likelihood=None, owner="fit"):
    """Checks the data of ``model.fit(*args, **kwargs)`` (or ``evaluate``'s) before any graph runs.

    Array inputs (numpy arrays, lists) are checked whole; a
    ``tf.data.Dataset`` for being empty when its length is known, and a
    dataset or ``keras.utils.PyDataset`` by its first batch
    (:func:`first_batch`): batched, with labels the likelihood can score
    (:func:`check_labels`).

    Args:
        model: the compiled model (its ``loss`` and ``outputs`` are read).
        args, kwargs: the positional and keyword arguments of ``fit``.
        likelihood: the likelihood the model's loss implies
            (:func:`keras_bnn.likelihoods.from_loss`), or None.
        owner: ``"fit"`` or ``"evaluate"`` (their ``x`` and ``y`` take the
            same places), for the messages.

    Returns:
        The first batch that was read (:func:`first_batch`), or None.

    Raises:
        ValueError: for a model not compiled, naming ``x`` for no examples,
            examples of another shape than the model's input or a dataset of
            single examples (not batched), ``y`` for
            labels the likelihood cannot score, or ``loss`` for labels given
            to a model compiled without one (they would be ignored).
    """
    if not getattr(model, "compiled", True):
        raise ValueError(f"{owner}: the model is not compiled: call model.compile(sampler=..., "
                         "train_size=n, loss=...) first.")
    x = _fit_argument(args, kwargs, 0, "x")
    y = _fit_argument(args, kwargs, 1, "y")
    if hasattr(x, "cardinality") and int(x.cardinality()) == 0:  # else known, or -1/-2
        raise argument_error("x", "be a dataset of at least one batch", x, owner,
                             got="an empty dataset")
    batch = first_batch(x)
    if batch is not None:
        _check_batched(model, batch[0], owner)
        y = batch[1]
    else:
        first = x[0] if isinstance(x, (list, tuple)) and x and hasattr(x[0], "shape") else x
        if (first is not None and hasattr(first, "shape") and len(first.shape)
                and first.shape[0] == 0):
            raise argument_error("x", "be at least one example", x, owner,
                                 got=f"shape {tuple(first.shape)}")
        inputs = getattr(model, "inputs", None)
        if inputs and len(inputs) == 1:
            check_example_shape(x, inputs[0].shape[1:], owner)
    if y is None:
        return batch
    loss = getattr(model, "loss", None)
    if loss is None:
        raise argument_error(
            "loss", f"be given to compile when {owner} has labels `y`: without it the "
            "potential is the prior alone and the labels are ignored (nll logs 0; fit "
            "samples the prior). Pass the per-example negative log-likelihood, e.g. "
            "loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True) for class "
            "indices, keras.losses.BinaryCrossentropy(from_logits=True) for 0/1 labels (the "
            "kb.models builders output logits) or "
            "kb.likelihoods.GaussianNLL() for regression; to sample the prior on purpose, "
            "call fit without labels", loss, "compile")
    loss_name = getattr(loss, "name", getattr(loss, "__name__", loss))
    outputs = getattr(model, "outputs", None)
    classes = outputs[0].shape[-1] if outputs else None
    check_labels(y, likelihood, classes, owner,
                 sparse=loss_name == "sparse_categorical_crossentropy")
    return batch


def array_examples(x):
    """The number of examples in ``fit``'s ``x`` when it is arrays, else None.

    Args:
        x: ``fit``'s inputs: an array, a nested structure of arrays (the
            first one's length counts), or a dataset or generator (None).

    Returns:
        int, or None for inputs whose length is not at hand.
    """
    if x is None or hasattr(x, "element_spec"):  # a tf.data.Dataset: its size is not read
        return None
    import keras  # noqa: PLC0415 - this module is read before Keras is imported

    leaves = keras.tree.flatten(x)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    return int(shape[0]) if shape is not None and len(shape) else None


class TrainSizeWarning(UserWarning):
    """The likelihood weighs the training data as another number of examples than it holds.

    ``U(θ) = n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)`` with n = ``train_size``:
    ``compile(train_size=...)`` differs from the number of examples ``fit``
    trains on, or ``fit``'s ``sample_weight`` / ``class_weight`` do not
    average 1 over them (the data then weigh as ``mean(w)·n`` examples).
    """


def _epoch_batches(x):
    """The batches in one pass over a ``tf.data.Dataset`` or ``PyDataset``, or None if unknown."""
    if hasattr(x, "cardinality"):
        count = int(x.cardinality())  # -1: infinite, -2: unknown
    else:
        count = getattr(x, "num_batches", None)
    return count if isinstance(count, int) and count > 0 else None


def _class_weights(y, class_weight):
    """Each example's weight from ``fit``'s ``class_weight`` (as Keras maps it)."""
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = np.argmax(labels, -1) if labels.shape[-1] != 1 else labels[..., 0]
    labels = np.round(labels).astype("int64")
    weights = np.ones(labels.shape, "float64")
    for label, weight in class_weight.items():
        weights[labels == int(label)] = weight
    return weights


def _weight_mean(args, kwargs, count):
    """``(argument name, mean weight)`` of ``fit``'s array weights over the first
    ``count`` examples, or None (no weights, or not arrays)."""
    sample_weight = _fit_argument(args, kwargs, 10, "sample_weight")
    class_weight = _fit_argument(args, kwargs, 9, "class_weight")
    y = _fit_argument(args, kwargs, 1, "y")
    if sample_weight is not None and array_examples(sample_weight) is not None:
        return "sample_weight", float(np.mean(np.asarray(sample_weight, "float64")[:count]))
    if class_weight and y is not None and array_examples(y) is not None:
        return "class_weight", float(np.mean(_class_weights(y, class_weight)[:count]))
    return None


def warn_on_train_size(model, args, kwargs, first=None):
    """Warns when ``fit`` trains on another number of examples than n = ``train_size``.

    The potential is ``n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)``: with n below the
    real N the data weigh N/n times too little against the prior (too wide a
    posterior), above it too much. Counted: arrays, exactly (after Keras'
    ``validation_split``); a ``tf.data.Dataset`` of known cardinality or a
    ``PyDataset`` of known length, as its batches times the first batch's
    size, within a batch (not with ``steps_per_epoch``, where an epoch need
    not be one pass over the data). Array ``sample_weight`` or
    ``class_weight`` whose mean over the training examples is not 1 (within
    1 %) make the data weigh as ``mean·n`` examples, and warn too, unless the
    loss's reduction is ``"mean_with_sample_weight"``
    (``n·Σ w_i·ℓ_i / Σ w_i``: the weights normalised in each batch). A
    generator's or an unknown-length dataset's size is the user's to give.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        args, kwargs: the positional and keyword arguments of ``fit``.
        first: the first batch of a dataset (:func:`first_batch`), or None.

    Warns:
        TrainSizeWarning: naming ``train_size``, or the weights' argument.
    """
    n = model.train_size
    x = _fit_argument(args, kwargs, 0, "x")
    count, split = array_examples(x), _fit_argument(args, kwargs, 6, "validation_split")
    seen = None
    if count is not None:
        kept = int(count * (1.0 - split)) if split else count  # Keras' split point
        if kept != n:
            seen = f"{kept} examples" + (
                f" (validation_split={split} holds out {count - kept} of {count})" if split
                else "")
        # reduction="mean_with_sample_weight" normalises the weights within each batch.
        per_batch = getattr(model.loss, "reduction", None) == "mean_with_sample_weight"
        weights = None if per_batch else _weight_mean(args, kwargs, kept)
        if weights is not None and abs(weights[1] - 1.0) > 0.01:
            name, mean = weights
            warnings.warn(
                f"keras_bnn: fit's {name} has mean {mean:.4g} over the {kept} training "
                f"examples: the likelihood n·(1/b)·Σ w_i·ℓ_i weighs the data as "
                f"{mean * n:.6g} examples (compile(train_size={n}) × {mean:.4g}) against the "
                "prior, so the posterior is narrower (mean > 1) or wider (mean < 1) than "
                "with weights of mean 1. Divide the weights by their mean (or compile the "
                "loss with reduction='mean_with_sample_weight') to reweight the examples "
                "among themselves; keep them only to temper the likelihood on purpose.",
                TrainSizeWarning, stacklevel=3)
    elif first is not None and _fit_argument(args, kwargs, 12, "steps_per_epoch") is None:
        batches, size = _epoch_batches(x), batch_length(first[0])
        if batches and size and not (batches - 1) * size < n < (batches + 1) * size:
            seen = (f"{batches} batches of {size} examples an epoch (about "
                    f"{batches * size} examples)")
    if seen is not None:
        warnings.warn(
            f"keras_bnn: fit trains on {seen} but compile(train_size={n}): the potential "
            f"weighs the data as {n} examples, so the posterior is too wide (train_size too "
            "small) or too narrow (too large). Pass train_size=the number of training "
            "examples (for a dataset whose epoch passes over the data more than once, "
            "dataset.repeat(k), pass fit's steps_per_epoch: this check then stays out).",
            TrainSizeWarning, stacklevel=3)
