"""The architecture fingerprint of a :class:`keras_bnn.SampleStore`.

:func:`architecture_of` describes a model for the store's manifest: a
sha256 over every layer's class and full config (layer names left out) and
the ordered weight shapes and dtypes. :func:`fingerprint_as_stored`
computes a model's fingerprint the way a manifest was (stores written
before full configs were hashed keep their legacy fingerprint), and
:func:`first_difference` says where a model and a store's architecture
differ.
"""

import hashlib
import json

import keras

from keras_bnn import store_priors

# Keys that Keras numbers per session or per object, not part of an architecture. "name"
# also drops a DTypePolicy's ({"config": {"name": "mixed_bfloat16"}}): its compute dtype
# is a run setting, as the temperature is; its variable dtype is in the weights' dtypes.
_VOLATILE_KEYS = frozenset({"name", "shared_object_id"})


def _canonical(value):
    """``value`` (a Keras config) without per-session names, JSON-comparable."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if k not in _VOLATILE_KEYS}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def _positional(config):
    """A layer's config with the references of a nested functional model's graph to its
    layers (``inbound_nodes``, ``input_layers``, ``output_layers``) given as the layers'
    positions, at every depth: Keras numbers layer names per session, so by name the
    same model built twice in one process (``input_layer_1``, then ``input_layer_3``)
    had two fingerprints, and its store refused the second build."""
    if isinstance(config, list):
        return [_positional(item) for item in config]
    if not isinstance(config, dict):
        return config
    config = {key: _positional(value) for key, value in config.items()}
    layers = config.get("layers")
    if not isinstance(layers, list) or "output_layers" not in config:
        return config
    index = {layer.get("name", (layer.get("config") or {}).get("name")): i
             for i, layer in enumerate(layers) if isinstance(layer, dict)}
    for key in ("input_layers", "output_layers"):
        config[key] = _by_position(config.get(key), index)
    config["layers"] = [dict(layer, inbound_nodes=_by_position(layer["inbound_nodes"], index))
                        if isinstance(layer, dict) and "inbound_nodes" in layer else layer
                        for layer in layers]
    return config


def _layer_configs(model, by_position=True):
    """One canonical description per layer: class, full config (no names; a nested
    functional model's graph by positions, :func:`_positional`, unless
    ``by_position`` is False, as stores written before 2026-12-01 hashed it), weights."""
    described = []
    for layer in model.layers:
        try:
            config = layer.get_config()
        except NotImplementedError:
            config = None
        described.append({
            "class": f"{type(layer).__module__}.{type(layer).__name__}",
            "config": _canonical(_positional(config) if by_position else config),
            "weights": [[list(w.shape), str(w.dtype)] for w in layer.weights],
        })
    return json.loads(json.dumps(described, sort_keys=True, default=repr))


def _by_position(value, index):
    """``value`` with each layer reference ``[name, node, tensor]`` (a
    ``keras_history``, an input or output layer) given as the layer's position."""
    if isinstance(value, dict):
        return {key: _by_position(item, index) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if (len(value) == 3 and isinstance(value[0], str) and value[0] in index
                and all(isinstance(i, int) for i in value[1:])):
            return [index[value[0]], value[1], value[2]]
        return [_by_position(item, index) for item in value]
    return value


def wiring_of(model):
    """How a functional model's layers are connected, each layer named by its
    position in ``model.layers``: what every layer is called on, and the
    model's inputs and outputs.

    Layer configs (the fingerprint) leave this out: two functional models of
    the same layers wired otherwise (``Concatenate()([h, x])`` and
    ``([x, h])``) have one fingerprint.

    Args:
        model: a built Keras model.

    Returns:
        A JSON-comparable list ``[inputs, outputs, each layer's inbound
        nodes]``, or None for a model whose config records no graph (a
        Sequential, whose order is its wiring; a subclassed model).
    """
    try:
        config = model.get_config()
    except NotImplementedError:
        return None
    layers = config.get("layers") if isinstance(config, dict) else None
    if not isinstance(layers, list) or "output_layers" not in config:
        return None
    index = {layer.get("name", (layer.get("config") or {}).get("name")): i
             for i, layer in enumerate(layers)}
    wiring = [config.get("input_layers"), config["output_layers"]]
    wiring += [layer.get("inbound_nodes") for layer in layers]
    return json.loads(json.dumps(_by_position(wiring, index), default=repr))


def wiring_difference(stored, mine):
    """Where two :func:`wiring_of` lists differ, for an error message."""
    if stored is None or mine is None:
        return "one records a graph of layers, the other does not"
    if stored[:2] != mine[:2] or len(stored) != len(mine):
        return "the model's inputs or outputs are other layers"
    layer = next(i for i, (a, b) in enumerate(zip(stored[2:], mine[2:])) if a != b)
    return f"layer {layer} is called on other layers"


def _fingerprint(layers, weights):
    return hashlib.sha256(
        json.dumps([layers, weights], sort_keys=True).encode()
    ).hexdigest()


def architecture_of(model):
    """Describes a model's architecture for the store.

    Args:
        model: a built Keras model.

    Returns:
        dict with ``fingerprint`` (sha256 over every layer's class and full
        config, activations, priors and initialisers included, and the
        ordered weight shapes/dtypes; layer names are left out, since Keras
        numbers them per session, nor is a dtype policy's compute dtype: a
        ``"mixed_bfloat16"`` model has float32 weights and its float32 twin's
        fingerprint, while a ``"float64"`` one has another), ``layers`` (those
        configs), ``weights``
        (``[shape, dtype]`` per weight), ``model`` (the serialized model,
        used to rebuild it) and ``priors`` (each trainable weight's prior and
        their digest, :func:`keras_bnn.store_priors.record_of`) and
        ``wiring`` (:func:`wiring_of`); neither is in the fingerprint, so that
        stores written before keep theirs.
    """
    weights = [[list(w.shape), str(w.dtype)] for w in model.weights]
    layers = _layer_configs(model)
    return {
        "fingerprint": _fingerprint(layers, weights),
        "layers": layers,
        "weights": weights,
        "model": keras.saving.serialize_keras_object(model),
        store_priors.MANIFEST_KEY: store_priors.record_of(model),
        "wiring": wiring_of(model),
    }


def _legacy_fingerprint(model):
    """The fingerprint of stores written before full configs were hashed
    (layer classes and weight shapes only), to keep reading and extending them."""
    weights = [[list(w.shape), str(w.dtype)] for w in model.weights]
    layers = [type(layer).__name__ for layer in model.layers]
    return hashlib.sha256(json.dumps([layers, weights]).encode()).hexdigest()


def fingerprint_as_stored(model, stored):
    """``model``'s fingerprint computed the way ``stored`` (a manifest) was: a store
    written before nested functional models were hashed by positions
    (:func:`_positional`) has the fingerprint of their layer names."""
    if "layers" not in stored:
        return _legacy_fingerprint(model)
    fingerprint = architecture_of(model)["fingerprint"]
    if fingerprint == stored["fingerprint"]:
        return fingerprint
    weights = [[list(w.shape), str(w.dtype)] for w in model.weights]
    return _fingerprint(_layer_configs(model, by_position=False), weights)


def first_difference(stored, mine):
    """A short description of where two architecture dicts differ."""
    if "layers" not in stored:  # a legacy manifest: layer classes and shapes only
        return (f"weights {stored['weights'][:3]}... in the store, {mine['weights'][:3]}... "
                "in the model, or other layer classes")
    theirs, ours = stored["layers"], mine["layers"]
    if len(theirs) != len(ours):
        return (f"{len(theirs)} layers in the store ({_classes(theirs)}), {len(ours)} in the "
                f"model ({_classes(ours)})")
    for i, (a, b) in enumerate(zip(theirs, ours)):
        if a != b:
            for key in ("class", "weights"):
                if a.get(key) != b.get(key):
                    return f"layer {i}: {key} {a.get(key)} in the store, {b.get(key)} in the model"
            return (f"layer {i} ({b['class'].rsplit('.', 1)[-1]}): "
                    + _config_difference(a.get("config") or {}, b.get("config") or {}))
    return "weights " + ("differ" if stored.get("weights") != mine["weights"] else "match")


def _classes(layers):
    """The class names of described layers, comma-separated (``InputLayer, Dense``)."""
    return ", ".join(str(layer.get("class", "?")).rsplit(".", 1)[-1] for layer in layers)


def _config_difference(theirs, ours):
    """The first key where two layer configs differ, as ``key=<store's> in the store,
    <model's> in the model``; for a nested model's ``layers``, the key of the
    first nested layer that differs (not the whole list)."""
    keys = sorted(set(theirs) | set(ours), key=str)
    first = next((k for k in keys if theirs.get(k) != ours.get(k)), "config")
    a, b = theirs.get(first), ours.get(first)
    if first == "layers" and isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (layer_a, layer_b) in enumerate(zip(a, b)):
            inner_a, inner_b = (layer.get("config") if isinstance(layer, dict) else None
                                for layer in (layer_a, layer_b))
            if isinstance(inner_a, dict) and isinstance(inner_b, dict) and inner_a != inner_b:
                return (f"its layer {i} ({layer_b.get('class_name')}): "
                        + _config_difference(inner_a, inner_b))
    return f"{first}={a!r} in the store, {b!r} in the model"
