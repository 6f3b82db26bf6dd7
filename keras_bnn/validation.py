"""Argument checks shared by the package: each raises a ValueError naming the argument."""

import math
import operator


def check_positive(value, argument, owner):
    """Returns ``float(value)`` or raises a ValueError naming ``argument``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (number > 0.0 and math.isfinite(number)):
        raise ValueError(
            f"{owner}: `{argument}` must be a positive finite number; "
            f"received {argument}={value!r}."
        )
    return number


def check_fraction(value, argument, owner):
    """Returns ``float(value)`` if it lies in (0, 1), else raises a ValueError."""
    number = float(value)
    if not 0.0 < number < 1.0:
        raise ValueError(
            f"{owner}: `{argument}` must be in (0, 1); received {argument}={value!r}."
        )
    return number


def check_choice(value, argument, allowed):
    """Returns ``value`` if it is in ``allowed``, else raises a ValueError."""
    if value not in allowed:
        raise ValueError(
            f"`{argument}` must be one of {', '.join(map(repr, allowed))}; "
            f"received {value!r}."
        )
    return value


def check_int(value, argument, minimum):
    """Returns ``int(value)`` for an integer (Python or NumPy) >= ``minimum``.

    Raises:
        ValueError: naming ``argument`` otherwise (bools are not integers here).
    """
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        number = None
    if number is None or number < minimum:
        raise ValueError(f"`{argument}` must be an int >= {minimum}; received {value!r}.")
    return number
