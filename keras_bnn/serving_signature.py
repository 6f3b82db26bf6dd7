"""TF Serving's view of a signature's inputs, read from its metadata endpoint.

:func:`signature_inputs` reads ``{input: (dtype, shape)}`` from a
``GET /v1/models/<name>/metadata`` reply; :func:`check_input` applies TF
Serving's JSON rules (``tensorflow_serving/util/json_tensor.cc``) to one batch
before :class:`keras_bnn.serving.ServingClient` sends it.
"""

import numpy as np


def is_bytes(array):
    """Whether ``array`` holds bytes: numpy ``S`` strings, or the objects of a string tensor.

    Args:
        array: a numpy array.

    Returns:
        bool.
    """
    return array.dtype.kind == "S" or (
        array.dtype == object and array.size > 0
        and all(isinstance(item, bytes) for item in array.flat))


def signature_inputs(reply, signature_name):
    """The inputs of one signature in TF Serving's metadata reply.

    Args:
        reply: the decoded JSON of ``GET /v1/models/<name>/metadata``.
        signature_name: the signature whose inputs are read.

    Returns:
        ``{input name: (dtype, shape)}`` (dtype ``"DT_FLOAT"`` and the like, shape
        a tuple with -1 for any size, or None for any rank); None when the reply
        is not TF Serving's metadata.

    Raises:
        ValueError: naming ``signature_name`` and the served ones, when the model
            has no such signature.
    """
    try:
        signatures = reply["metadata"]["signature_def"]["signature_def"]
        known = signature_name in signatures
        inputs = signatures[signature_name]["inputs"] if known else {}
        specs = {}
        for name, info in inputs.items():
            shape = info.get("tensor_shape", {})
            specs[name] = (info["dtype"], None if shape.get("unknown_rank") else
                           tuple(int(dim.get("size", -1)) for dim in shape.get("dim", [])))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if not known:
        served = sorted(name for name in signatures if not str(name).startswith("__"))
        raise ValueError(f"`signature_name` must be one of the served model's signatures "
                         f"{served}; got {signature_name!r}.")
    return specs


#: TF Serving's JSON rules for an input of each dtype (``tensorflow_serving/util/
#: json_tensor.cc``, ``AddValueToTensor``): its numpy name and the array kinds it takes.
SIGNATURE_DTYPES = {
    "DT_FLOAT": ("float32", "iuf"), "DT_DOUBLE": ("float64", "iuf"),
    "DT_INT8": ("int8", "iu"), "DT_INT16": ("int16", "iu"), "DT_INT32": ("int32", "iu"),
    "DT_INT64": ("int64", "iu"), "DT_UINT8": ("uint8", "iu"), "DT_UINT32": ("uint32", "iu"),
    "DT_UINT64": ("uint64", "iu"), "DT_BOOL": ("bool", "b"), "DT_STRING": ("string", "US"),
}
_KIND_NAMES = {"iuf": "float or int arrays", "iu": "int arrays", "b": "bool arrays",
               "US": "str or bytes arrays"}


def check_input(array, argument, name, spec):
    """Checks one batch as TF Serving's JSON rules would, before it is sent.

    Args:
        array: the batch (a numpy array).
        argument: how the user passed it, for the message (``"inputs['a']"``).
        name: the signature input it goes to.
        spec: that input's ``(dtype, shape)`` from :func:`signature_inputs`.

    Raises:
        ValueError: naming ``argument``, when the shape differs from the
            signature's outside its -1 dims, the input's dtype is one TF
            Serving's JSON cannot fill (``DT_HALF``, ``DT_BFLOAT16``: any value;
            until 2026-11-30 sent, as the server refuses every one with HTTP
            501), the dtype kind is not one the input's dtype takes, or a value
            is outside what that dtype holds (a float value: one that rounds to
            ±inf in it, as the server casts it; until 2026-11-30 any beyond its
            largest value, 3.4028235e+38, which rounds to it, was refused too).
            Integers to a float input are
            sent whatever their size: TF Serving (2.5 on, json_tensor.cc)
            rounds them to a double, then to the input's dtype (until
            2026-11-30 those above ``2**24 - 1`` to float32 were refused, the
            rule of TF Serving before 2.5).
    """
    dtype, shape = spec
    if shape is not None and (array.ndim != len(shape) or any(
            want not in (-1, got) for want, got in zip(shape, array.shape))):
        raise ValueError(f"`{argument}` has shape {array.shape}, but the signature's input "
                         f"{name!r} takes shape {list(shape)} (-1: any size).")
    if dtype not in SIGNATURE_DTYPES:
        raise ValueError(
            f"`{argument}` goes to the signature's input {name!r} of dtype {dtype}, which TF "
            "Serving's REST API cannot fill from JSON: json_tensor.cc converts JSON values "
            f"only to {', '.join(SIGNATURE_DTYPES)} and answers HTTP 501 \"Conversion of "
            f"JSON Value: ... to type\" for any other (tensorflow/serving#1639, for DT_HALF); "
            "query it over gRPC, or export the model with a float32 input (cast inside "
            "the model).")
    target, kinds = SIGNATURE_DTYPES[dtype]
    kind = "S" if is_bytes(array) else array.dtype.kind
    if kind not in kinds:
        cast = (f"; cast it with .astype({target!r}) if its values are meant as {target}"
                if kinds != "US" and kind in "biuf" else "")
        raise ValueError(f"`{argument}` has dtype {array.dtype}, but the signature's input "
                         f"{name!r} is {target} ({dtype}), which takes {_KIND_NAMES[kinds]}"
                         f"{cast}.")
    if kind == "f":  # to a float input: TF Serving casts each value, ±inf beyond its range
        low, high, server = -np.finfo(target).max, np.finfo(target).max, "rounds to ±inf"
        with np.errstate(over="ignore"):  # as TF Serving casts: to nearest, so a value
            outside = np.isinf(array.astype(target))  # just beyond `high` rounds to it
    elif kind in "iu" and kinds != "iuf":  # to an int input; a float one rounds any integer
        low, high = int(np.iinfo(target).min), int(np.iinfo(target).max)
        server = "refuses"
        outside = (array < low) | (array > high)
    else:
        return
    if np.any(outside):
        raise ValueError(f"`{argument}` holds {array[outside].flat[0].item()!r}, outside the "
                         f"range [{low!s}, {high!s}] of the signature's input {name!r} "
                         f"({target}), which TF Serving {server}.")


def check_batch(specs, arrays, argument, signature_name):
    """Checks a predict's batch against a signature's inputs (:func:`check_input`
    for each).

    Args:
        specs: the signature's inputs from :func:`signature_inputs`.
        arrays: one batch (a numpy array), or a dict ``{input_name: batch}``.
        argument: the argument that named a dict's batches (``"inputs"``, or
            ``"input_names"`` that made it from a list), for the message.
        signature_name: the signature's name, for the message.

    Raises:
        ValueError: naming ``argument`` and the signature's inputs, for one
            batch to a signature of several inputs or input names other than
            the signature's; as :func:`check_input` for a batch its input
            does not take.
    """
    names = sorted(specs)
    if not isinstance(arrays, dict):
        if len(specs) > 1:
            raise ValueError(f"`inputs` is one batch, but signature {signature_name!r} has the "
                             f"inputs {names}: give a dict {{input_name: batch}} (or the "
                             "client input_names= and a list).")
        check_input(arrays, "inputs", names[0], specs[names[0]])
        return
    unknown, missing = sorted(set(arrays) - set(specs)), sorted(set(specs) - set(arrays))
    if unknown or missing:
        wrong = "; ".join(f"{what} {found}" for what, found in
                          (("unknown", unknown), ("missing", missing)) if found)
        raise ValueError(f"`{argument}` must name the inputs of signature {signature_name!r}, "
                         f"{names}; {wrong}.")
    for name, array in arrays.items():
        check_input(array, f"inputs[{name!r}]", name, specs[name])
