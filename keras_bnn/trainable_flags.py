"""The ``trainable`` flags a model config records, set again after Keras rebuilds it.

Keras' ``Sequential.from_config`` drops the Sequential's own ``trainable``:
a frozen Sequential backbone (``backbone.trainable = False``, the common
shape of transfer learning) used as one layer of a model comes back from
``keras.saving.load_model`` or ``deserialize_keras_object`` with
``trainable=True``. Its layers keep their own flags, so the same weights are
trainable, but the rebuilt model's config is no longer the saved one: a
:class:`keras_bnn.SampleStore` refused to rebuild its model ("the model
config in store.json does not match its fingerprint"), so
``PosteriorEnsemble.from_store`` failed, and a reloaded model could not
append to the store it had written ("holds samples of another
architecture"). :func:`restore` sets every nested layer's flag to the one its
config records; :func:`deserialize` rebuilds a serialized model with them.

A layer inside a subclassed model or layer has no config of its own: Keras
rebuilds it from the class's code, trainable, and so does ``keras.saving.load_model``
for a plain Keras model (its frozen weights come back trainable). A
``BayesianModel``'s config records its frozen weights (``"weight_priors_frozen"``,
:func:`frozen`: their positions in ``model.weights``) and
:func:`keras_bnn.prior_attachment.restore` freezes their layers again (:func:`freeze`)
before it sets the priors. Until 2026-11-29 ``kb.bayesian`` of a subclassed model with a
frozen part (a pretrained backbone under a sampled head) could not be reloaded:
``load_model`` and ``PosteriorEnsemble.from_store`` raised that the recorded priors
did not fit the rebuilt model's trainable weights.
"""

import copy

import keras


#: The key of a ``BayesianModel``'s config that records its frozen weights (:func:`frozen`).
FROZEN_KEY = "weight_priors_frozen"


def _owners(model):
    """``{id(variable): layer}``: the innermost layer that made each weight trainable."""
    return {id(variable): layer for layer in model._flatten_layers(include_self=True)
            for variable in layer._trainable_variables}  # outer layers first: inner ones win


def frozen(model):
    """The positions in ``model.weights`` of the weights made trainable but frozen now.

    Args:
        model: a built Keras model.

    Returns:
        list of int: the weights of layers set ``trainable=False``, and those
        frozen by themselves (not a ``BatchNormalization``'s moving statistics,
        which are never trainable).
    """
    made, now = _owners(model), {id(variable) for variable in model.trainable_variables}
    return [index for index, variable in enumerate(model.weights)
            if id(variable) in made and id(variable) not in now]


def freeze(model, positions):
    """Freezes again the weights that :func:`frozen` recorded, where they are trainable.

    Sets ``trainable=False`` on the layer that made each such weight (one
    inside a subclassed model or layer, which Keras rebuilt trainable) where
    all that layer's weights are recorded, else on the weight alone: one
    frozen by itself (``layer.bias.trainable = False``, which no Keras config
    records) comes back frozen, its layer's other weights trainable (until
    2026-11-30 its whole layer was frozen, and the reload refused the recorded
    priors as another architecture's).

    Args:
        model: the built model rebuilt from a config.
        positions: :func:`frozen` of the model that config was taken from.

    Returns:
        None.
    """
    owners, weights = _owners(model), model.weights
    now = {id(variable) for variable in model.trainable_variables}
    recorded = [weights[index] for index in positions
                if isinstance(index, int) and index < len(weights)]
    kept = {id(variable) for variable in recorded}
    for variable in recorded:
        if id(variable) not in now:
            continue
        owner = owners[id(variable)]
        if all(id(own) in kept for own in owner._trainable_variables):
            owner.trainable = False
        else:
            variable.trainable = False


def restore(layer, config):
    """Sets ``layer``'s and its nested layers' ``trainable`` to those ``config`` records.

    The flags are set from the outside in, so that a container's flag (which
    Keras propagates to its layers) is set before its layers' own.

    Args:
        layer: a layer or model rebuilt from ``config``.
        config: its config dict (the ``"config"`` of a serialized layer);
            the nested layers' configs are found under ``"layers"`` by name.

    Returns:
        None.
    """
    recorded = config.get("trainable")
    if isinstance(recorded, bool) and layer.trainable != recorded:
        layer.trainable = recorded
    nested = config.get("layers")
    if not isinstance(nested, list):
        return
    by_name = {child.name: child
               for child in layer._flatten_layers(include_self=False, recursive=False)}
    for serialized in nested:
        child = serialized.get("config") if isinstance(serialized, dict) else None
        if isinstance(child, dict) and child.get("name") in by_name:
            restore(by_name[child["name"]], child)


def deserialize(serialized):
    """``keras.saving.deserialize_keras_object`` of a model, its ``trainable`` flags restored.

    Args:
        serialized: a model serialized by ``keras.saving.serialize_keras_object``.

    Returns:
        The model.
    """
    config = copy.deepcopy(serialized.get("config") or {})  # Keras pops keys of its copy
    model = keras.saving.deserialize_keras_object(serialized)
    restore(model, config)
    return model
