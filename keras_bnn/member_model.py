"""The rules a :class:`keras_bnn.PosteriorEnsemble`'s member model follows.

One function, :func:`check_ensemble_model`, used by the ensemble when it is
built and by :class:`keras_bnn.callbacks.CollectSamples` when ``fit``
starts (so that a run whose samples no ensemble can take says so before it
trains). It imports only Keras, so both can import it.
"""

import keras


def check_ensemble_model(model):
    """Checks that ``model`` can be the member model of a :class:`PosteriorEnsemble`.

    The rules of the ensemble and of its serving signature: a built
    Functional or Sequential model with weights, one input (its dimensions
    besides the batch may be None: variable-length sequences), one output
    ``[batch, ..., units]`` of rank >= 2 whose last axis (the classes, or
    the Gaussian's ``[μ, log σ²]``) has a known size: a tagger's
    ``[N, T, K]`` and a per-pixel ``[N, H, W, K]`` average over members per
    position. The head's
    fit to a likelihood is checked by the ensemble (the likelihood is
    chosen there). :class:`keras_bnn.callbacks.CollectSamples` checks these
    rules when ``fit`` starts, so that a run whose samples no ensemble can
    take says so before it trains.

    Args:
        model: the member model.

    Returns:
        ``(input_shape, input_dtype, units)``: one example's shape (no
        batch axis, None where the member accepts any size) and dtype, and
        the output's units (its last axis).

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
    inputs = getattr(model, "inputs", None)
    outputs = getattr(model, "outputs", None)
    if not inputs or len(inputs) != 1 or not outputs or len(outputs) != 1:
        counts = (f"it has {len(inputs or ())} input(s) and {len(outputs or ())} output(s)"
                  if inputs is not None else "a subclassed model has no graph")
        raise ValueError(
            f"`model` {model.name!r} must be a Functional or Sequential model with "
            f"one input and one output (its input shape becomes the serving "
            f"signature); {counts}. A model of several inputs is not supported: "
            "concatenate them into one input."
        )
    output_shape = tuple(outputs[0].shape)
    if len(output_shape) < 2 or output_shape[-1] is None:
        raise ValueError(
            f"`model` {model.name!r} must output a [batch, ..., units] tensor (rank >= 2, "
            f"the last axis of a known size); its output shape is {output_shape}."
        )
    return tuple(inputs[0].shape[1:]), inputs[0].dtype, output_shape[-1]


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
