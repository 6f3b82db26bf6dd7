"""A batch as :class:`keras_bnn.serving.ServingClient` sends it: a finite numeric
(or str, bytes) numpy array, or a dict of them by input name, and its JSON form
(nested lists; bytes as TF Serving's ``{"b64": ...}``)."""

import base64

import numpy as np

from keras_bnn.serving_signature import is_bytes


def _b64(item):
    """TF Serving's JSON form of one binary string: ``{"b64": base64}``."""
    return {"b64": base64.b64encode(item).decode("ascii")}


def as_array(value, argument="inputs"):
    """One input's batch as a numpy array.

    Args:
        value: a numpy array, nested lists or a tensor of examples.
        argument: how the user passed it, for the message.

    Returns:
        The numpy array (rank >= 1).

    Raises:
        ValueError: naming ``argument``, for ragged nested lists, a dtype
            other than numeric, str or bytes, NaN or Inf values, a scalar, or
            an empty batch (until 2026-11-30 one of rank 1 was sent).
    """
    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f"`{argument}` must be a rectangular numeric array ({error}).") from None
    if array.dtype.kind not in "biufU" and not is_bytes(array):
        raise ValueError(f"`{argument}` must be numeric, or str or bytes for a text input; got "
                         f"dtype {array.dtype}.")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError(f"`{argument}` holds NaN or Inf values; inputs must be finite "
                         "(JSON cannot carry them, and the model refuses them).")
    if array.ndim == 0:
        raise ValueError(f"`{argument}` must have a batch axis; got a scalar.")
    if not len(array):  # of rank 1 too: TF Serving answers HTTP 400 for `instances` []
        raise ValueError(f"`{argument}` has no examples (shape {array.shape}): JSON's [] "
                         "cannot carry their shape or the outputs' (TF Serving reads it as "
                         "shape [0]); send at least one example.")
    return array


def to_json(array):
    """A batch as nested lists for the JSON body.

    Args:
        array: a batch from :func:`as_array`.

    Returns:
        Nested lists: str (a text input's) as JSON strings, bytes (a
        ``tf.string`` tensor's) as ``{"b64": ...}``.
    """
    if is_bytes(array):
        return np.vectorize(_b64, otypes=[object])(array).tolist()
    return array.tolist()


def named(inputs, input_names):
    """A list of several inputs' batches as a dict by ``input_names``; a list of one
    array as that array (one input's batch, as Keras and
    :meth:`keras_bnn.PosteriorEnsemble.predict` read ``[x]``); anything else as is.

    Args:
        inputs: what :meth:`keras_bnn.serving.ServingClient.predict` was given.
        input_names: the client's ``input_names`` (a list), or None.

    Returns:
        A dict ``{input_name: batch}``, one batch, or ``inputs`` unchanged.

    Raises:
        ValueError: for a list of another length than ``input_names``, or a
            list of two or more numpy arrays without ``input_names``.
    """
    if not isinstance(inputs, (list, tuple)):
        return inputs
    if len(inputs) == 1 and isinstance(inputs[0], np.ndarray) and (
            not input_names or len(input_names) == 1):
        return inputs[0]
    if input_names and len(input_names) > 1:
        if len(inputs) != len(input_names):
            raise ValueError(f"`inputs` must be a list of {len(input_names)} batches, "
                             f"one per input {input_names}; got {len(inputs)}.")
        return dict(zip(input_names, inputs))
    if (input_names is None and len(inputs) > 1
            and all(isinstance(item, np.ndarray) for item in inputs)):
        shapes = sorted({item.shape for item in inputs})
        raise ValueError(
            "`inputs` is a list of arrays, which Keras reads as several inputs: give "
            "them as a dict {input_name: batch}, or the client input_names= "
            "(ensemble.member_input_names); for one input's examples pass "
            f"np.stack(inputs); got shapes {shapes}.")
    return inputs


def as_arrays(inputs, listed):
    """The batch of :meth:`keras_bnn.serving.ServingClient.predict` (after
    :func:`named`) as arrays and their JSON.

    Args:
        inputs: one batch, or a dict ``{input_name: batch}``.
        listed: whether the user gave a list (read by ``input_names``), for the
            message's argument.

    Returns:
        ``(arrays, columns, batch, argument)``: one array or a dict of them,
        their JSON (:func:`to_json`), the batch size, and the argument that
        named them (``"inputs"`` or ``"input_names"``).

    Raises:
        ValueError: as :func:`as_array`, for an empty dict or one with keys
            that are not str, or for batches of different sizes.
    """
    if not isinstance(inputs, dict):
        array = as_array(inputs)
        return array, to_json(array), len(array), "inputs"
    if not inputs or not all(isinstance(name, str) for name in inputs):
        raise ValueError("`inputs` must be a non-empty dict {input_name: batch}; "
                         f"got keys {list(inputs)!r}.")
    arrays = {name: as_array(value, f"inputs[{name!r}]") for name, value in inputs.items()}
    sizes = {name: len(array) for name, array in arrays.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"`inputs` must share the batch size; got sizes {sizes}.")
    columns = {name: to_json(array) for name, array in arrays.items()}
    return arrays, columns, next(iter(sizes.values())), "input_names" if listed else "inputs"
