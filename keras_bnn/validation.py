"""Argument checks shared by the package: each raises a ValueError naming the argument.

Numbers that reach a graph are float32 there: a value that is positive and
finite in float64 but 0 or inf in float32 (``1e-46``, ``1e300``) would freeze
a chain or inject no noise, so the checks below refuse them.
"""

import math
import operator

import numpy as np

_FLOAT32 = np.finfo(np.float32)


def _as_float(value):
    """``float(value)`` for real numbers (not bools or strings), else NaN."""
    if isinstance(value, (bool, str, bytes)):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def check_positive(value, argument, owner):
    """Returns ``float(value)`` for a number that is positive and finite in float32.

    Args:
        value: the number.
        argument: its name, for the message.
        owner: the class or function it belongs to, for the message.

    Returns:
        float.

    Raises:
        ValueError: naming ``argument`` for a non-number, 0, a negative,
            NaN or inf, or a value that rounds to 0 or overflows to inf in
            float32 (outside [1.2e-38, 3.4e38]; subnormals lose precision).
    """
    number = _as_float(value)
    if not (number > 0.0 and math.isfinite(number)):
        raise ValueError(
            f"{owner}: `{argument}` must be a positive finite number; "
            f"received {argument}={value!r}."
        )
    if not float(_FLOAT32.tiny) <= number <= float(_FLOAT32.max):
        raise ValueError(
            f"{owner}: `{argument}` must lie in float32's normal range "
            f"[{float(_FLOAT32.tiny):.3g}, {float(_FLOAT32.max):.3g}] (it is used in "
            f"float32, where {value!r} is 0, subnormal or inf); received {argument}={value!r}."
        )
    return number


def check_finite(value, argument, owner):
    """Returns ``float(value)`` for a number that is finite in float32.

    Raises:
        ValueError: naming ``argument`` for a non-number, NaN, inf, or a
            value beyond float32's range.
    """
    number = _as_float(value)
    if not (math.isfinite(number) and abs(number) <= float(_FLOAT32.max)):
        raise ValueError(
            f"{owner}: `{argument}` must be a finite number (in float32's range); "
            f"received {argument}={value!r}."
        )
    return number


def check_fraction(value, argument, owner):
    """Returns ``float(value)`` if it lies in (0, 1), else raises a ValueError."""
    number = _as_float(value)
    if not 0.0 < number < 1.0:
        raise ValueError(
            f"{owner}: `{argument}` must be in (0, 1); received {argument}={value!r}."
        )
    return number


def check_choice(value, argument, allowed):
    """Returns ``value`` if it is in ``allowed``, else raises a ValueError."""
    try:
        known = value in allowed
    except TypeError:  # unhashable value
        known = False
    if not known:
        raise ValueError(
            f"`{argument}` must be one of {', '.join(map(repr, allowed))}; "
            f"received {value!r}."
        )
    return value


def check_int(value, argument, minimum, maximum=None):
    """Returns ``int(value)`` for an integer (Python or NumPy) in [minimum, maximum].

    Raises:
        ValueError: naming ``argument`` otherwise (bools and floats such as
            1.9 are not integers here).
    """
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        number = None
    if number is None or number < minimum or (maximum is not None and number > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"`{argument}` must be an int {bound}; received {value!r}.")
    return number


def check_seed(value, owner):
    """Returns ``seed`` as an int in [0, 2**31 - 1] (a stateless-RNG key).

    Raises:
        ValueError: naming ``seed`` for a float (1.9 is not silently 1), a
            bool, a negative or too large value.
    """
    try:
        return check_int(value, "seed", 0, maximum=2**31 - 1)
    except ValueError as error:
        raise ValueError(f"{owner}: {error}") from None


def _fit_argument(args, kwargs, position, name):
    return args[position] if len(args) > position else kwargs.get(name)


def check_fit_data(model, args, kwargs):
    """Checks the data of ``model.fit(*args, **kwargs)`` before any graph runs.

    Array inputs (numpy arrays, lists) are checked; datasets only for being
    empty when their length is known. For a sparse categorical loss the labels
    must be integers in [0, K) for a K-class output, in one column.

    Raises:
        ValueError: naming ``x`` for no examples, or ``y`` for labels that
            are not integers, out of range, or one-hot.
    """
    x = _fit_argument(args, kwargs, 0, "x")
    y = _fit_argument(args, kwargs, 1, "y")
    if hasattr(x, "cardinality"):  # tf.data.Dataset: length known or -1/-2
        if int(x.cardinality()) == 0:
            raise ValueError("`x` is an empty dataset: fit needs at least one batch.")
        return
    first = x[0] if isinstance(x, (list, tuple)) and x and hasattr(x[0], "shape") else x
    if first is not None and hasattr(first, "shape") and len(first.shape) and first.shape[0] == 0:
        raise ValueError(f"`x` holds no examples (shape {tuple(first.shape)}).")
    loss = getattr(model, "loss", None)
    name = getattr(loss, "name", getattr(loss, "__name__", loss))
    if y is None or name != "sparse_categorical_crossentropy" or not model.outputs:
        return
    labels = np.asarray(y)
    classes = model.outputs[0].shape[-1]
    if labels.ndim > 1 and labels.shape[-1] > 1:
        raise ValueError(
            f"`y` has shape {labels.shape}: a sparse categorical loss takes class indices "
            "[N] (one-hot labels need loss='categorical_crossentropy')."
        )
    if labels.size == 0:
        raise ValueError("`y` holds no labels.")
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"`y` must hold integer class indices; received dtype {labels.dtype}.")
    if labels.dtype.kind == "f" and not np.all(np.isfinite(labels) & (labels == np.round(labels))):
        raise ValueError("`y` must hold integer class indices for a categorical likelihood; "
                         f"received non-integer floats such as {labels[labels != np.round(labels)][:3]}.")
    low, high = labels.min(), labels.max()
    if classes is not None and (low < 0 or high >= classes):
        raise ValueError(f"`y` holds class indices in [{low:g}, {high:g}]; the model "
                         f"outputs {classes} classes, so they must lie in [0, {classes - 1}].")
