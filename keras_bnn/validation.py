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

import inspect
import math
import operator
import os

import numpy as np

_FLOAT32 = np.finfo(np.float32)
_TINY, _MAX = float(_FLOAT32.tiny), float(_FLOAT32.max)


def bound_arguments(method, args, kwargs):
    """The arguments of a call of a Keras method (``fit``, ``evaluate``, ``compile``) by name.

    A method that reads or extends some of them (``callbacks``, ``loss``)
    must find them however they were given: by position they were missed,
    or passed twice.

    Args:
        method: the unbound method whose signature binds them (``keras.Model.fit``).
        args, kwargs: the call's positional (``self`` left out) and keyword arguments.

    Returns:
        dict of every argument given, by name (``**kwargs`` ones included).

    Raises:
        TypeError: as the call itself would, for too many positional
            arguments or one given twice.
    """
    bound = inspect.signature(method).bind_partial(None, *args, **kwargs).arguments
    keywords = {name: value for name, value in bound.items() if name not in ("self", "kwargs")}
    return {**keywords, **bound.get("kwargs", {})}


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


def counted(number, noun):
    """A count in the package's messages: ``"1 sample"``, ``"0 samples"``, ``"2 samples"``.

    Args:
        number: the count (an int).
        noun: the singular noun; its plural adds "s".

    Returns:
        str.
    """
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def numeric_array(values):
    """``values`` as a numpy array, ml_dtypes' floats (bfloat16, float8) as float32.

    NumPy does not count them as floating (dtype kind ``"V"``), so a check of
    ``np.issubdtype(..., np.floating)`` or of the kind would refuse them.

    Args:
        values: array-like.

    Returns:
        A numpy array.
    """
    array = np.asarray(values)
    if array.dtype.kind == "V" and "float" in array.dtype.name:
        array = array.astype(np.float32)
    return array


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


def check_bool(value, name, owner=None, allow_none=False):
    """Returns ``value`` if it is a bool (``"no"`` or 0 must not silently mean a truth value).

    Args:
        value, name, owner: as in the common signature above.
        allow_none: whether None (an argument's "read it from the input") is allowed too.

    Returns:
        ``value`` as a Python bool, or None.

    Raises:
        ValueError: naming ``name`` for anything but True or False (NumPy's
            ``bool_`` included), or None where ``allow_none``.
    """
    if allow_none and value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        allowed = "be True, False or None" if allow_none else "be True or False"
        raise argument_error(name, allowed, value, owner)
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
