"""The priors of a functional ``BayesianModel`` carried to its ``keras.models.clone_model``.

Keras clones a functional model by running its graph on new layers, each
made from its layer's config (``clone_function``), so a clone has only the
priors that layer configs record: not those of a ``MultiHeadAttention``'s
projections, a custom layer's ``add_weight``, or a ``kb.layers.ResNetPPBlock``
convolution given a prior of its own (until 2026-11-29 a
``MultiHeadAttention`` clone had 8 of its 10 weights without a prior).
Keras runs that graph through the model's ``_run_through_graph``, which
``BayesianModel`` routes here (:func:`run_through_graph`): each operation
that ``operation_fn`` replaces by another layer (a clone) is noted, and once
the graph has run (the new layers built) each new trainable weight gets the
prior of the original's weight at its position
(:func:`keras_bnn.prior_attachment.attach`: its regularizer, the layer's
regularizer attribute and ``kb.layers`` argument). A clone layer whose weights
differ from its original's in number or shapes (a ``clone_function`` of
your own that changed it) gets none of them, with a ``UserWarning`` naming
its weights. Weights made flat on purpose (the original's
``flat_prior_weights``) stay without a prior and are marked
(:data:`FLAT_MARK`); the clone ``BayesianModel`` lists them in its own
``flat_prior_weights`` (:func:`keep_flat`), so that its ``fit`` warns of
no other weight than the original's (until 2026-11-29 the clone's ``fit``
named them in a :class:`keras_bnn.MissingPriorWarning`). A model's own call
runs the same graph with ``operation_fn`` returning functions, not layers:
nothing is noted.
"""

import warnings

import keras

from keras_bnn.prior_attachment import attach, places

#: The attribute that marks a clone's weight whose original was made flat on purpose.
FLAT_MARK = "_keras_bnn_flat_on_purpose"


def run_through_graph(run, args, kwargs):
    """Keras' ``Function._run_through_graph``, giving layer clones their originals' priors.

    Args:
        run: the bound ``_run_through_graph`` of Keras.
        args, kwargs: its arguments (``inputs``, ``operation_fn``, ``call_fn``).

    Returns:
        What ``run`` returns.
    """
    operation_fn = kwargs.get("operation_fn")
    if operation_fn is None:
        return run(*args, **kwargs)
    made = []

    def noted(operation):
        new = operation_fn(operation)
        if (new is not operation and isinstance(new, keras.layers.Layer)
                and isinstance(operation, keras.layers.Layer)):
            made.append((operation, new))
        return new

    outputs = run(*args, **dict(kwargs, operation_fn=noted))
    flat = set(getattr(run.__self__, "flat_prior_weights", ()))
    for original, clone in made:
        carry(original, clone, flat)
    return outputs


def keep_flat(model):
    """Sets ``model.flat_prior_weights`` to its weights marked flat by :func:`carry`, if any.

    Args:
        model: a functional ``BayesianModel``, just made (a clone's).
    """
    flat = [v.path for v in model.trainable_variables if getattr(v, FLAT_MARK, False)]
    if flat:
        model.flat_prior_weights = flat


def carry(original, clone, flat):
    """Gives each trainable weight of ``clone`` the prior of ``original``'s at its position.

    Args:
        original: a layer of the cloned model.
        clone: the layer made from it (built).
        flat: the paths of the cloned model's weights made flat on purpose:
            their clones are marked (:data:`FLAT_MARK`).

    Warns:
        UserWarning: naming ``clone``'s weights without a prior, where its
            trainable weights differ from ``original``'s (which had priors)
            in number or shapes: none is carried.
    """
    theirs, mine = original.trainable_variables, clone.trainable_variables
    if [tuple(v.shape) for v in theirs] != [tuple(v.shape) for v in mine]:
        lost = [v.path for v in mine if v.regularizer is None]
        if lost and any(v.regularizer is not None for v in theirs):
            warnings.warn(
                f"clone_model: the clone of layer {original.name!r} has other weights than the "
                f"original (shapes {[tuple(v.shape) for v in mine]}, not "
                f"{[tuple(v.shape) for v in theirs]}), so none of the original's priors was "
                f"carried: {lost} have no prior; give them priors with kb.bayesian(clone).",
                UserWarning, stacklevel=2)
        return
    found = places(clone)
    for before, after in zip(theirs, mine):
        if before.path in flat and after.regularizer is None:
            setattr(after, FLAT_MARK, True)
        if before.regularizer is not None and after.regularizer is not before.regularizer:
            layer, enclosing = found.get(id(after), (clone, ()))
            attach(after, layer, enclosing, before.regularizer, [])
