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
"""

import copy

import keras


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
