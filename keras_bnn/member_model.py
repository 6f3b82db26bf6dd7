"""The rules a :class:`keras_bnn.PosteriorEnsemble`'s member model follows.

One function, :func:`check_ensemble_model`, used by the ensemble when it is
built and by :class:`keras_bnn.callbacks.CollectSamples` when ``fit``
starts (so that a run whose samples no ensemble can take says so before it
trains). It imports only Keras and :mod:`keras_bnn.ensemble_inputs`, so both
can import it.
"""

import keras

from keras_bnn import ensemble_inputs, ensemble_outputs


def check_ensemble_model(model):
    """Checks that ``model`` can be the member model of a :class:`PosteriorEnsemble`.

    The rules of the ensemble and of its serving signature: a built model
    with weights (Functional, Sequential or subclassed), one input or a
    list or dict of inputs (:mod:`keras_bnn.ensemble_inputs`; dimensions
    besides the batch may be None: variable-length sequences), one output,
    or a list or dict of outputs (a multi-task model,
    :mod:`keras_bnn.ensemble_outputs`), each ``[batch, ..., units]`` of rank
    >= 2 whose last axis (the classes, or the Gaussian's ``[μ, log σ²]``)
    has a known size: a tagger's ``[N, T, K]`` and a per-pixel
    ``[N, H, W, K]`` average over members per position. The head's fit to a
    likelihood is checked by the ensemble (the likelihood is chosen there,
    per output; until 2026-11-29 a member of several outputs was refused).
    :class:`keras_bnn.callbacks.CollectSamples` checks these rules when
    ``fit`` starts, so that a run whose samples no ensemble can take says so
    before it trains.

    Args:
        model: the member model.

    Returns:
        ``(input_shape, input_dtype, units)``: one example's shape (no
        batch axis, None where the member accepts any size) and dtype (lists
        or dicts of them for several inputs,
        :func:`keras_bnn.ensemble_inputs.signature`), and the output's units
        (its last axis): an int, or for several outputs a dict of them by
        output name (:func:`keras_bnn.ensemble_outputs.output_names`' order).

    Raises:
        ValueError: naming the rule ``model`` breaks.
    """
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a keras.Model; got {type(model).__name__}.")
    if not model.built or not model.weights:
        raise ValueError(
            f"`model` {model.name!r} must be built and have weights (build it by "
            "calling it on data, or use a Functional/Sequential model)."
        )
    inputs, outputs = ensemble_inputs.symbolic(model)  # a subclassed one's: its build shape
    names = ensemble_outputs.output_names(model, outputs)
    units = {}
    for name, output in zip(names or [None], keras.tree.flatten(outputs)):
        output_shape = tuple(output.shape)
        if len(output_shape) < 2 or output_shape[-1] is None:
            raise ValueError(
                f"`model` {model.name!r} must output a [batch, ..., units] tensor (rank >= 2, "
                f"the last axis of a known size{'' if name is None else ', per output'}); its "
                "output "
                f"{'' if name is None else repr(name) + ' '}shape is {output_shape}.")
        units[name] = output_shape[-1]
    input_shape, input_dtype = ensemble_inputs.signature(inputs)
    return input_shape, input_dtype, units if names else units[None]


def derived_state_layers(model):
    """The layers whose call reads state that Keras derives from their weights.

    ``finalize_state`` derives it (an adapted ``Normalization``'s mean and
    variance, a lookup's table) when Keras loads the layer's weights, but
    not on ``set_weights`` or in ``stateless_call``: after either, call it.

    Args:
        model: a Keras model.

    Returns:
        list of layers (nested ones included) with a ``finalize_state`` and weights.
    """
    return [layer for layer in model._flatten_layers()
            if callable(getattr(layer, "finalize_state", None)) and layer.weights]
