"""The inputs of a :class:`keras_bnn.PosteriorEnsemble`'s member: one tensor, a list or a dict.

A member model takes one input tensor ``[batch, *shape]``, a list of them
(``keras.Model([a, b], ...)``) or a dict (``keras.Model({"a": a, "b": b},
...)``), and the ensemble, its predict loop and its serving signature take
the same. One example's signature is ``(shape, dtype)`` for one input, and
for several a list or a dict of shapes and one of dtypes, in the order and
with the keys of the member's inputs (:func:`signature`).

Where the signature comes from. A Functional or Sequential member has its
``keras.Input`` tensors (``model.input``: the structure it was built
with). A subclassed one has no graph (``model.inputs`` is unset even after
a call), but Keras records the shape it was built on (its build config,
``{"input_shape": ...}``, which a ``BayesianModel`` subclass's config
keeps, so a member rebuilt from a store or a ``.keras`` file has it too):
a shape gives one input, a list or a dict of shapes several. Keras records
no input dtype: an input's dtype is the model's ``serving_input_dtype``
attribute where it has one (a dtype name, or a list or dict of them in the
inputs' structure: set it in ``__init__``, e.g. ``"int32"`` for token ids),
else float32 (until 2026-11-29 always float32: a subclassed tagger's
export took float token ids). Its outputs are those of a symbolic call on
that signature. A model that is not built has no signature to give:
refused. So is one whose ``call`` takes several inputs as arguments
(``call(self, a, b)``, :func:`check_one_argument`): Keras itself cannot
feed it (``fit`` and ``predict`` call ``model(x)``: "missing a required
argument: 'b'") and records the first argument's shape only, so it is
refused with how to take them as one list or dict (until 2026-11-29 with
Keras' error from a symbolic call, "Could not automatically infer the
output shape").

Serving names (:func:`names`): ``"inputs"`` for one input, the Input
layers' names for a list (a subclassed member's: ``"inputs_0"``,
``"inputs_1"``, ...) and the keys for a dict.

This module imports Keras, NumPy, :mod:`keras_bnn.fit_data` (one input's
example check) and :mod:`keras_bnn.validation`.
"""

import inspect
import itertools

import keras
from keras import ops

from keras_bnn.fit_data import check_example_shape
from keras_bnn.validation import argument_error

#: The serving name of a member's one input (see :data:`keras_bnn.export.SERVING_INPUT`).
ONE_INPUT = "inputs"


#: The attribute of a subclassed member model that gives its inputs' dtypes (module doc).
DTYPE_ATTRIBUTE = "serving_input_dtype"


def _declared_dtypes(model, structure):
    """The dtypes ``model.serving_input_dtype`` gives the leaves of ``structure``, or None.

    Raises:
        ValueError: naming ``serving_input_dtype``, for a value that is not a dtype
            name or not of the inputs' structure.
    """
    declared = getattr(model, DTYPE_ATTRIBUTE, None)
    if declared is None:
        return None
    leaves_ = keras.tree.flatten(structure)
    given = declared if isinstance(declared, (list, tuple, dict)) else [declared] * len(leaves_)
    try:
        if isinstance(structure, dict) != isinstance(given, dict):
            raise ValueError("another structure")
        given = [given[key] for key in structure] if isinstance(given, dict) else list(given)
        if len(given) != len(leaves_):
            raise ValueError("another number of inputs")
        return [keras.backend.standardize_dtype(dtype) for dtype in given]
    except (ValueError, TypeError, KeyError) as error:
        raise ValueError(
            f"`model` {model.name!r}: `{DTYPE_ATTRIBUTE}` must be a dtype name (e.g. "
            "'int32'), or a list or dict of them with one per input, in the structure it "
            f"was built on ({len(leaves_)} input(s)); got {declared!r} ({error}).") from None


def check_one_argument(model):
    """Refuses a model whose ``call`` takes several input arguments (module doc).

    The inputs are the positional parameters of ``call`` without a default,
    other than ``training`` and ``mask``.

    Args:
        model: a Keras model.

    Raises:
        ValueError: naming ``model`` and the arguments, saying how to take them.
    """
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    arguments = [name for name, parameter in inspect.signature(model.call).parameters.items()
                 if parameter.kind in positional and parameter.default is parameter.empty
                 and name not in ("training", "mask")]
    if len(arguments) > 1:
        listed = ", ".join(arguments)
        raise ValueError(
            f"`model` {model.name!r}: its call takes {len(arguments)} input arguments "
            f"({listed}); Keras' fit, evaluate and predict give a model one input, "
            "model(x), and Keras records the first argument's shape only, so neither "
            "Keras nor the ensemble can feed it. Take the inputs as one list or dict: "
            f"def call(self, inputs, training=None): {listed} = inputs.")


def _built_on(model):
    """A subclassed ``model``'s input structure, KerasTensors of the shape it was built on
    and of the dtypes :func:`_declared_dtypes` gives (float32 where none is declared)."""
    build = model.get_build_config() if model.built else None
    shapes = list((build or {}).values())
    how = ("build it on one batch's shape (model.build(input_shape)) or call it once on a "
           "batch (model(x)), or write it as a functional model")
    if len(shapes) != 1:
        raise ValueError(
            f"`model` {model.name!r} is a subclassed model whose input signature is unknown: "
            + ("it is not built" if not shapes else
               f"its call takes {len(shapes)} arguments ({sorted(build)}); pass them as one "
               "list or dict") + f"; {how}.")

    def tensor(shape, name, dtype):
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(size, (int, type(None))) for size in shape) or not shape:
            raise ValueError(f"`model` {model.name!r} was built on {shapes[0]!r}, not on "
                             f"input shapes; {how}.")
        return keras.KerasTensor((None, *shape[1:]), dtype=dtype, name=name)

    def structure(dtypes):
        shape, dtypes = shapes[0], iter(dtypes)
        if isinstance(shape, dict):
            return {key: tensor(value, key, next(dtypes)) for key, value in shape.items()}
        if isinstance(shape, (tuple, list)) and shape and all(
                isinstance(item, (tuple, list, dict)) for item in shape):
            return [tensor(value, f"{ONE_INPUT}_{i}", next(dtypes))
                    for i, value in enumerate(shape)]
        return tensor(shape, ONE_INPUT, next(dtypes))

    floats = structure(itertools.repeat("float32"))
    return structure(_declared_dtypes(model, floats) or itertools.repeat("float32"))


def symbolic(model):
    """``model``'s input structure and its outputs, as KerasTensors.

    Args:
        model: a built Keras model.

    Returns:
        ``(inputs, outputs)``: a KerasTensor, or a list or dict of them (the
        model's ``input``, or for a subclassed model those of the shape it
        was built on), and its output tensor, or the list or dict of them.

    Raises:
        ValueError: for a subclassed model that is not built or whose call
            takes several input arguments (saying how to give it a signature).
    """
    if getattr(model, "inputs", None):
        # A Sequential's `input` reads call history it may not have: its one input.
        structure = model.inputs if isinstance(model, keras.Sequential) else model.input
        if isinstance(structure, (tuple, list)) and len(structure) == 1:
            structure = structure[0]
        output = model.outputs if isinstance(model, keras.Sequential) else model.output
        return structure, output
    check_one_argument(model)
    structure = _built_on(model)
    return structure, model.compute_output_spec(structure)


def signature(structure):
    """One example's ``(shape, dtype)`` of an input structure from :func:`symbolic`.

    Args:
        structure: a KerasTensor, or a list or dict of them.

    Returns:
        ``(shape, dtype)``: a tuple and a dtype name for one input; lists,
        or dicts with the same keys, of them for several.
    """
    def shape(tensor):
        return tuple(tensor.shape[1:])

    if isinstance(structure, dict):
        return ({k: shape(t) for k, t in structure.items()},
                {k: t.dtype for k, t in structure.items()})
    if isinstance(structure, (tuple, list)):
        return [shape(t) for t in structure], [t.dtype for t in structure]
    return shape(structure), structure.dtype


def several(shape):
    """Whether a signature's ``shape`` is that of several inputs.

    Args:
        shape: a signature's shape (:func:`signature`).

    Returns:
        bool: True for a list or a dict of shapes.
    """
    return isinstance(shape, (list, dict))


def names(model):
    """The serving names of ``model``'s inputs, in their order (see module doc).

    Args:
        model: a member model (built).

    Returns:
        list of str: ``["inputs"]`` for one input.
    """
    structure, _ = symbolic(model)
    if isinstance(structure, dict):
        return list(structure)
    if isinstance(structure, (tuple, list)):
        return [t.name for t in structure]
    return [ONE_INPUT]


def leaves(inputs, shape):
    """The items of a structure of the signature's form as a list, in its order.

    Args:
        inputs: inputs, shapes or dtypes in the form of ``shape``: one item, or
            a list or a dict of them.
        shape: the signature's shape.

    Returns:
        list: ``[inputs]`` for one input; the list's items; the dict's values
        in the order of ``shape``'s keys.
    """
    if isinstance(shape, dict):
        return [inputs[key] for key in shape]
    if isinstance(shape, list):
        return list(inputs)
    return [inputs]


def pack(tensors, shape):
    """The inverse of :func:`leaves`: ``tensors`` in the form of ``shape``.

    Args:
        tensors: a list, one item per input, in the signature's order.
        shape: the signature's shape.

    Returns:
        ``tensors[0]`` for one input; a list; a dict with ``shape``'s keys.
    """
    if isinstance(shape, dict):
        return dict(zip(shape, tensors))
    if isinstance(shape, list):
        return list(tensors)
    return tensors[0]


def convert(inputs, shape, dtype):
    """``inputs`` (an array, or a list or dict of them) as tensors of the signature's dtypes.

    Args:
        inputs: one array, or a list (any sequence) or dict of them.
        shape, dtype: the signature (:func:`signature`).

    Returns:
        tensor, or a list or dict of tensors, as the member takes them.
    """
    return pack([ops.convert_to_tensor(x, dtype=d)
                 for x, d in zip(leaves(inputs, shape), leaves(dtype, shape))], shape)


def finite_rows(inputs, shape, dtype):
    """[N] True where every floating input's row is finite; None when no input floats.

    Args:
        inputs: tensors as :func:`convert` gives them.
        shape, dtype: the signature.

    Returns:
        boolean tensor [N], or None.
    """
    mask = None
    for tensor, example, kind in zip(leaves(inputs, shape), leaves(shape, shape),
                                     leaves(dtype, shape)):
        if "float" not in str(kind):
            continue
        finite = ops.isfinite(tensor)  # all over the example's axes (none: a scalar example)
        if example:
            finite = ops.all(finite, axis=tuple(range(1, len(example) + 1)))
        mask = finite if mask is None else ops.logical_and(mask, finite)
    return mask


def input_spec(shape):
    """Keras' ``InputSpec`` of the signature, any batch size.

    Args:
        shape: the signature's shape.

    Returns:
        one ``keras.InputSpec``, or a list of one per input (named by the
        keys, for a dict: Keras matches a dict's inputs by name).
    """
    if not several(shape):
        return keras.InputSpec(shape=(None, *shape))
    if isinstance(shape, dict):
        return [keras.InputSpec(shape=(None, *shape[k]), name=k) for k in shape]
    return [keras.InputSpec(shape=(None, *s)) for s in shape]


def first_leaf(x):
    """The first array of inputs given as a list or dict of arrays.

    Args:
        x: inputs (an array, a list or dict of arrays, a dataset).

    Returns:
        the first item or value of a non-empty list, tuple or dict, else ``x``.
    """
    if isinstance(x, dict) and x:
        return next(iter(x.values()))
    if isinstance(x, (list, tuple)) and x:
        return x[0]
    return x


def is_empty_batch(x):
    """Whether ``x`` is an array or tensor of 0 examples, or a list or dict of them.

    Args:
        x: inputs (an array, a list or dict of arrays, a dataset).

    Returns:
        bool: True for 0 examples; False for a dataset.
    """
    shape = getattr(first_leaf(x), "shape", None)
    return shape is not None and len(shape) > 0 and shape[0] == 0


def by_position(x, shape, input_names):
    """The inputs in the member's structure, where Keras takes another form of them.

    A list member's arrays given as a dict keyed by its inputs' names become
    the list: Keras' functional model of a list of named ``keras.Input``
    takes its arrays as such a dict too (``model.predict({"a": a, "b":
    b})``), and the export's signature names its inputs so (until 2026-11-30
    the ensemble refused the dict: "`x` must be a list of 2 arrays ...; got a
    dict"). A one-input member's array given as a list or tuple of one
    becomes the array, as Keras' models take it (until 2026-11-29 in
    ``predict`` and 2026-11-30 in ``ensemble([x])`` its batch became one
    example of a rank too many: "Invalid input shape ... (1, 9, 4)").

    Args:
        x: the inputs given to ``predict``, ``call`` (or another method).
        shape: the signature's shape.
        input_names: the member's input names in its order (:func:`names`).

    Returns:
        ``[x[name] for name in input_names]`` for a list signature and a dict
        of exactly those keys; ``x[0]`` for one input and a list or tuple of one
        array; else ``x``.
    """
    if isinstance(shape, list) and isinstance(x, dict) and set(x) == set(input_names):
        return [x[name] for name in input_names]
    if (not several(shape) and isinstance(x, (list, tuple)) and len(x) == 1
            and hasattr(x[0], "shape")):
        return x[0]
    return x


def check_examples(x, shape, owner):
    """Refuses arrays whose examples do not have the member's input shapes.

    One input: :func:`keras_bnn.fit_data.check_example_shape`. Several: ``x``
    must be a list of as many arrays (for a list signature) or a dict with
    the signature's keys, each array's examples of its input's shape, all
    with one batch size. A dataset is left to Keras.

    Args:
        x: the inputs given to ``predict`` (or another method).
        shape: the signature's shape.
        owner: the method, for the message.

    Raises:
        ValueError: naming ``x``, what it must hold and what it holds.
    """
    if not several(shape):
        check_example_shape(x, shape, owner)
        return
    if hasattr(x, "element_spec") or hasattr(x, "__next__"):  # a dataset or generator
        return
    if isinstance(shape, dict):
        if not isinstance(x, dict) or set(x) != set(shape):
            got = f"keys {sorted(x)}" if isinstance(x, dict) else f"a {type(x).__name__}"
            raise argument_error("x", f"be a dict of arrays with keys {sorted(shape)} (the "
                                 "member's inputs)", x, owner, got=got)
        arrays = [x[key] for key in shape]
    else:
        if not isinstance(x, (list, tuple)) or len(x) != len(shape):
            got = (f"{len(x)} arrays" if isinstance(x, (list, tuple))
                   else f"a {type(x).__name__}")
            raise argument_error("x", f"be a list of {len(shape)} arrays (the member's "
                                 "inputs)", x, owner, got=got)
        arrays = list(x)
    for array, example in zip(arrays, leaves(shape, shape)):
        check_example_shape(array, example, owner)
    sizes = {int(a.shape[0]) for a in arrays if hasattr(a, "shape") and len(a.shape)}
    if len(sizes) > 1:
        raise argument_error("x", "hold arrays of one batch size", x, owner,
                             got=f"batch sizes {sorted(sizes)}")
