"""Argument checks shared by the model builders."""

from keras_bnn.validation import check_int


def check_positive_ints(**values):
    """Raises a ValueError naming the first argument that is not an int > 0.

    Args:
        **values: argument name -> value.

    Raises:
        ValueError: naming the offending argument.
    """
    for argument, value in values.items():
        check_int(value, argument, 1)
