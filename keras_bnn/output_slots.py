"""Where each of a model's outputs finds its labels and weights, by Keras' rule.

Keras' loss reads output k's labels and ``sample_weight`` at output k's path in
the structure of the model's predictions (:func:`output_paths`): a list's k-th
entry, a dict's entry of the output's name. :func:`weight_slots` splits weights
(and labels, :mod:`keras_bnn.label_checks`) so; :mod:`keras_bnn.train_size`,
:mod:`keras_bnn.models.weight_mean` and :mod:`keras_bnn.label_checks` read them
through it. Labels and losses Keras also reads from the other container (a
dict by output name for list outputs, a list for dict outputs):
:func:`reading_paths`. This module imports Keras only.
"""

import keras


def output_paths(model, structure=None):
    """Where each of ``model``'s outputs sits in the structure of its predictions, as Keras'
    loss finds its labels and ``sample_weight`` there.

    Args:
        model: the model: a functional one's ``output`` structure is read; a
            subclassed one's outputs are unknown, and ``structure`` stands for them.
        structure: what has the outputs' structure where the model does not
            say: ``fit``'s labels (Keras broadcasts one loss to every output, so
            ``y`` has one label array per output), or ``compile``'s loss given
            one per output (a list, a dict); None: one output.

    Returns:
        list: one ``keras.tree.flatten_with_path`` path per output, in Keras'
        order (a list's; a dict's keys sorted); ``[()]`` for one output.
    """
    if getattr(model, "outputs", None):  # functional (or a built Sequential): its own
        structure = model.outputs if isinstance(model, keras.Sequential) else model.output
    if not keras.tree.is_nested(structure) or len(keras.tree.flatten(structure)) < 2:
        return [()]
    return [path for path, _ in keras.tree.flatten_with_path(structure)]


def reading_paths(model, value, paths):
    """Where Keras' loss reads each output's labels or loss in ``value``, by output.

    Keras reads labels and ``compile``'s losses given in another container
    than the model's outputs: a dict by output name for list outputs (its
    ``output_names`` order), a list or tuple for dict outputs (their paths'
    order: the keys sorted). Sample weights it reads at the outputs' own
    paths only.

    Args:
        model: the model (its ``output_names`` are read).
        value: labels, or ``compile``'s loss.
        paths: the outputs' paths (:func:`output_paths`).

    Returns:
        list: the path in ``value`` of each output's entry, in ``paths``'
        order: ``[("out_a",), ("out_b",)]``, ``[(0,), (1,)]``, or ``paths``.
    """
    keys = [path[0] for path in paths if len(path) == 1]
    if len(keys) != len(paths) or len(paths) < 2:
        return paths
    names = list(getattr(model, "output_names", None) or ())
    if (isinstance(value, dict) and all(isinstance(key, int) for key in keys)
            and len(names) == len(paths) and set(value) == set(names)):
        return [(name,) for name in names]
    if (isinstance(value, (list, tuple)) and all(isinstance(key, str) for key in keys)
            and len(value) == len(paths)):
        return [(index,) for index in range(len(paths))]
    return paths


def weight_slots(sample_weight, paths, name="sample_weight"):
    """The leaves of ``sample_weight`` that each output's loss reads, by Keras' rule.

    Keras' loss reads output k's weights at its path in ``sample_weight``
    (a list's k-th entry, a dict's entry of the output's name; entries no
    output reads are left out), or the whole of a ``sample_weight`` that is
    not nested (one array shared by every output). Both checks read
    weights so: arrays before ``fit`` (:func:`weight_mean`) and a dataset's in
    the train step's graph (:mod:`keras_bnn.models.weight_mean`). An array
    shared by every output is counted once, in the first slot.

    Args:
        sample_weight: one array or tensor, a structure of them, or None.
        paths: the outputs' paths (:func:`output_paths`).
        name: ``sample_weight`` as an error names it.

    Returns:
        list: for each output, a list of ``(path, weights)``
        (``keras.tree.flatten_with_path``'s paths, None leaves left out).

    Raises:
        ValueError: naming ``name``, for a structure without an entry at an
            output's path (Keras' loss would fail on it).
    """
    slots = [[] for _ in paths]
    if sample_weight is None:
        return slots
    if not keras.tree.is_nested(sample_weight):
        slots[0].append(((), sample_weight))
        return slots
    for slot, path in zip(slots, paths):
        part = sample_weight
        for key in path:
            if isinstance(part, dict) and key in part or (
                    isinstance(part, (list, tuple)) and isinstance(key, int) and key < len(part)):
                part = part[key]
                continue
            raise ValueError(
                f"{name} has no weights for the model's output at [{key!r}] (its outputs: "
                f"{', '.join(path_name(p) for p in paths)}): pass one array (shared by every "
                "output) or one per output, a list in the outputs' order for a model of "
                "list outputs, a dict by output name for one of dict outputs; got "
                f"{keras.tree.map_structure(lambda _: '*', sample_weight)}.")
        slot.extend((path + tuple(inner), leaf) for inner, leaf in
                    keras.tree.flatten_with_path(part) if leaf is not None)
    return slots


def path_name(path):
    """A ``keras.tree.flatten_with_path`` path as a subscript.

    Args:
        path: a tuple of keys and indices (``("bin",)``, ``(0,)``, ``()``).

    Returns:
        str: ``"['bin']"``, ``"[0]"``, ``""``.
    """
    return "".join(f"[{part!r}]" for part in path)


def slot_name(leaves):
    """The subscript that names a slot's weights (:func:`weight_slots`): its one leaf's
    path (``"['bin']"``, ``"[1]"``), or ``""`` (one array shared, or several leaves)."""
    return path_name(leaves[0][0]) if len(leaves) == 1 else ""
