"""Checks of the data given to ``BayesianModel.fit`` and ``evaluate``, before any graph runs.

Arrays are checked whole; a ``tf.data.Dataset`` or ``keras.utils.PyDataset``
by its first batch (:func:`first_batch`): batched, of the model's input
shape, with labels the likelihood can score (:func:`check_fit_data`), and
bounded (:func:`check_epoch_ends`). Whether the data weigh as ``train_size``
examples is :mod:`keras_bnn.train_size`'s. The messages follow
:mod:`keras_bnn.validation`'s wording.
"""

import inspect

import keras

from keras_bnn import loss_terms
from keras_bnn.label_checks import check_output_labels
from keras_bnn.validation import argument_error


def first_batch(data):
    """The first batch of a ``tf.data.Dataset`` or a ``keras.utils.PyDataset``.

    Read once per ``fit`` (one ``take(1)``, or ``data[0]``), before any graph
    runs; of a ``tf.distribute`` dataset, the global batch (its replicas'
    shards concatenated).

    Args:
        data: ``fit``'s ``x``.

    Returns:
        ``(x, y, sample_weight)`` of the first batch (``y`` and
        ``sample_weight`` None where the batch has none), or None for arrays,
        generators, and an empty dataset.
    """
    if is_distributed(data):
        return _global_batch(next(iter(data), None))
    if hasattr(data, "element_spec"):
        element = next(iter(data.take(1)), None)
    elif isinstance(data, keras.utils.PyDataset) and data.num_batches != 0:
        element = data[0]
    else:
        return None
    return None if element is None else _unpack(element)


def is_distributed(data):
    """Whether ``data`` is a ``tf.distribute`` dataset (an element spec, no ``take``)."""
    return hasattr(data, "element_spec") and not hasattr(data, "take")


def _unpack(element):
    """``(x, y, sample_weight)`` of one batch as a dataset or generator yields it."""
    return keras.utils.unpack_x_y_sample_weight(
        tuple(element) if isinstance(element, list) else element)


def peek(data):
    """``data``'s first batch, for a Python generator too, which cannot be read twice.

    Args:
        data: ``fit``'s or ``evaluate``'s ``x``, or a ``validation_data`` that
            is not a tuple.

    Returns:
        ``(data, first)``: ``first`` as :func:`first_batch` gives it; ``data``
        itself, or for a generator a generator that yields the batch read,
        then the rest (what ``fit`` must be given instead).
    """
    if not inspect.isgenerator(data):
        return data, first_batch(data)
    try:
        element = next(data)
    except StopIteration:  # empty: Keras says so itself
        return data, None
    return _yield_again(element, data), _unpack(element)


def _yield_again(element, rest):
    yield element
    yield from rest


def _global_batch(element):
    """A ``tf.distribute`` dataset's batch: each value's replicas' shards, concatenated.

    ``strategy.experimental_distribute_dataset(dataset.batch(b))`` yields
    the global batch of b split over the replicas; counted per replica,
    ``train_size`` would be checked against half the data on 2 replicas.
    (Under ``MultiWorkerMirroredStrategy`` this is the worker's share:
    :func:`keras_bnn.distribute.workers_per_batch`.)
    """
    if element is None:
        return None
    import tensorflow as tf  # a distributed dataset exists only on TensorFlow

    element = tf.nest.map_structure(
        lambda value: tf.concat(value.values, 0) if hasattr(value, "values") else value, element)
    return _unpack(element)


def cardinality(data):
    """A dataset's number of batches (-1: endless, -2: unknown), or None for other data.

    ``tf.data.Dataset.cardinality`` is a method, a ``tf.distribute``
    dataset's a property.
    """
    count = getattr(data, "cardinality", None)
    if count is None:
        return None
    return int(count() if callable(count) else count)


def batch_length(inputs):
    """The number of examples in a batch of inputs: its first leaf's first axis.

    Args:
        inputs: a batch's ``x`` (an array, a tensor, or a nest of them).

    Returns:
        int, or None where the first leaf has no leading axis of known size.
    """
    leaves = keras.tree.flatten(inputs)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    return None if shape is None or not len(shape) or shape[0] is None else int(shape[0])


def _check_batched(model, inputs, owner):
    """Refuses a dataset whose elements are single examples: every input one axis short."""
    expected = getattr(model, "inputs", None)
    leaves = keras.tree.flatten(inputs)
    if not expected or len(expected) != len(leaves):
        return
    shapes = [(tuple(leaf.shape), tuple(want.shape)[1:]) for leaf, want in zip(leaves, expected)]
    if all(len(shape) == len(want) and all(w is None or w == g for w, g in zip(want, shape))
           for shape, want in shapes):
        wanted, got = (", ".join(str(pair[i]) for pair in shapes) for i in (1, 0))
        raise argument_error(
            "x", f"yield batches of examples of shape {wanted} (the model's input"
            f"{'s' if len(shapes) > 1 else ''}): batch the dataset, dataset.batch(batch_size)",
            inputs, owner, got=f"single examples of shape {got}")


def check_dataset_batched(model, data, owner):
    """Refuses a ``tf.data.Dataset`` of single examples, read from its ``element_spec``
    (nothing is read from the dataset): ``predict``'s check that ``fit`` and
    ``evaluate`` make on their first batch.

    Args:
        model: the model (its ``inputs`` are read).
        data: ``predict``'s ``x``; anything but a ``tf.data.Dataset`` passes.
        owner: the method, for the message.

    Raises:
        ValueError: naming ``x`` for a dataset whose elements are single
            examples (until 2026-11-30 Keras' "Exception encountered when
            calling BayesianModel.call()" or a graph's InvalidArgumentError).
    """
    spec = getattr(data, "element_spec", None)
    if spec is None or is_distributed(data):
        return
    inputs = _unpack(spec)[0]
    if all(getattr(leaf, "shape", None) is not None and leaf.shape.rank is not None
           for leaf in keras.tree.flatten(inputs)):  # of unknown rank: Keras finds out
        _check_batched(model, inputs, owner)


def single_output(model, value):
    """``y`` or ``sample_weight`` as a one-output model's loss reads it.

    Keras takes ``[y]``, ``(y,)`` or ``{name: y}`` (one array, tensor or
    ``pandas`` object in a list, tuple or dict) for a model of one output
    as ``y`` itself; the checks read the array.

    Args:
        model: the model (its ``outputs`` are read; a subclassed model's
            unknown ones count as one).
        value: ``fit``'s or ``evaluate``'s ``y`` or ``sample_weight``, or a
            batch's.

    Returns:
        The element of a one-element list, tuple or dict, for a model not of
        several outputs; else ``value``.
    """
    outputs = getattr(model, "outputs", None) or ()
    if not isinstance(value, (list, tuple, dict)) or len(value) != 1 or len(outputs) > 1:
        return value
    element = next(iter(value.values())) if isinstance(value, dict) else value[0]
    return element if hasattr(element, "shape") else value


def check_example_shape(x, expected, owner=None, name="x"):
    """Refuses an array ``x`` whose examples do not have the model's input shape.

    Args:
        x: the inputs; anything without a ``shape`` (a dataset, a list of
            arrays) is left to Keras.
        expected: one example's shape (None: any size along that axis).
        owner: the function or class, for the message.
        name: ``x`` as the message names it (``"x['b']"``: one input's array).

    Raises:
        ValueError: naming ``name``, the expected and the given example shape.
    """
    if not (hasattr(x, "shape") and len(x.shape) >= 1):
        return
    expected, got = tuple(expected), tuple(x.shape[1:])
    if len(expected) != len(got) or any(e is not None and e != g for e, g in zip(expected, got)):
        raise argument_error(name, f"hold examples of shape {expected} (the model's input)", x,
                             owner, got=f"examples of shape {got}")


def _check_input_arrays(model, x, owner):
    """Checks each array of ``x`` against the input Keras feeds it to: a dict's by the
    model's dict of inputs' keys, a list's by position; other forms are left to Keras."""
    structure = getattr(model, "input", None)
    if isinstance(x, dict) and isinstance(structure, dict) and set(x) == set(structure):
        pairs = [(f"x[{key!r}]", x[key], structure[key]) for key in structure]
    elif (isinstance(x, (list, tuple)) and isinstance(structure, (list, tuple))
          and len(x) == len(structure)):
        pairs = [(f"x[{index}]", *pair) for index, pair in enumerate(zip(x, structure))]
    else:
        return
    for name, array, tensor in pairs:
        check_example_shape(array, tensor.shape[1:], owner, name)


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
    if steps is None and cardinality(data) == -1:
        raise argument_error(
            name, "be given for an endless dataset (dataset.repeat()): without it the epoch "
            "never ends (samples are collected and the equilibrium tested at epoch ends)",
            steps, owner)


def check_fit_data(model, arguments, owner="fit"):
    """Checks the data of ``model.fit(**arguments)`` (or ``evaluate``'s) before any graph runs.

    Array inputs (numpy arrays, lists) are checked whole (``[y]`` or
    ``{name: y}`` for a one-output model as ``y``, :func:`single_output`); a
    ``tf.data.Dataset`` for being empty when its length is known, and a
    dataset, ``keras.utils.PyDataset`` or Python generator by its first batch
    (:func:`peek`): batched, with labels the likelihood can score
    (:func:`keras_bnn.label_checks.check_output_labels`).

    Args:
        model: the compiled model (its ``loss`` and ``outputs`` are read).
        arguments: the arguments of ``fit`` or ``evaluate`` by name (``x``,
            ``y``; ``BayesianModel`` binds positional ones to their names).
        owner: ``"fit"`` or ``"evaluate"``, for the messages.

    Returns:
        ``(x, first)``: the ``x`` to give Keras (a generator whose first batch
        was read is replaced, :func:`peek`), and that first batch, or None.

    Raises:
        ValueError: for a model not compiled, naming ``x`` for no examples,
            examples of another shape than the model's input (``x['b']``, ``x[1]``:
            one of several inputs' arrays) or a dataset of
            single examples (not batched), ``y`` for
            labels the likelihood cannot score, ``sample_weight`` of one
            weight a sequence ``[N]`` for a per-timestep loss
            (:func:`keras_bnn.loss_terms.check_weight_shape`), or ``loss``
            for labels given to a model compiled without one (they would be
            ignored).
    """
    if not getattr(model, "compiled", True):
        raise ValueError(f"{owner}: the model is not compiled: call model.compile(sampler=..., "
                         "train_size=n, loss=...) first.")
    x, y = arguments.get("x"), arguments.get("y")
    if cardinality(x) == 0:  # else known, or -1/-2
        raise argument_error("x", "be a dataset of at least one batch", x, owner,
                             got="an empty dataset")
    x, batch = peek(x)
    weights = arguments.get("sample_weight")
    if batch is not None:
        _check_batched(model, batch[0], owner)
        y, weights = batch[1], batch[2]
    else:
        first = x[0] if isinstance(x, (list, tuple)) and x and hasattr(x[0], "shape") else x
        if (first is not None and hasattr(first, "shape") and len(first.shape)
                and first.shape[0] == 0):
            raise argument_error("x", "be at least one example", x, owner,
                                 got=f"shape {tuple(first.shape)}")
        inputs = getattr(model, "inputs", None)
        if inputs and len(inputs) == 1:
            check_example_shape(x, inputs[0].shape[1:], owner)
        elif inputs:
            _check_input_arrays(model, x, owner)
    y, weights = single_output(model, y), single_output(model, weights)
    if y is None:
        return x, batch
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
    check_output_labels(model, y, owner)
    loss_terms.check_weight_shape(model, weights, owner)
    return x, batch


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
    leaves = keras.tree.flatten(x)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    return int(shape[0]) if shape is not None and len(shape) else None
