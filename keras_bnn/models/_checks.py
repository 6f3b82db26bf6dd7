"""Argument checks shared by the model builders."""

import operator


def check_positive_ints(**values):
    """Raises a ValueError naming the first argument that is not an int > 0.

    Args:
        **values: argument name -> value.

    Raises:
        ValueError: naming the offending argument.
    """
    for argument, value in values.items():
        try:
            valid = not isinstance(value, bool) and operator.index(value) > 0
        except TypeError:
            valid = False
        if not valid:
            raise ValueError(
                f"`{argument}` must be a positive integer; received {value!r}."
            )
