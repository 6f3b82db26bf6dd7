"""Where a weight's prior is set, and how a ``BayesianModel``'s config keeps every one.

:func:`attach` sets a prior where Keras and ``kb.layers`` look for it: the
weight's regularizer (what ``layer.losses`` reads), the layer's
``<weight>_regularizer`` attribute and a ``kb.layers`` layer's
``<weight>_prior`` argument (what their ``get_config`` records).
:func:`keras_bnn.bayesian` uses it to give priors, and
:meth:`keras_bnn.BayesianModel.from_config` to give them back.

Not every weight's prior is in a layer config: the four ``EinsumDense``
projections of a ``MultiHeadAttention`` are rebuilt from the attention's own
``kernel_regularizer``, the layers of a subclassed model from its
``__init__``, a custom layer's ``add_weight`` from nothing, and a
``ResNetPPBlock`` passes one prior of each kind to all its convolutions. So a
functional ``BayesianModel`` records the regularizer of each of its
trainable weights in its own config (:func:`record`, ``"weight_priors"``),
and a reload sets them again over what the layer configs gave
(:func:`restore`): the reloaded model has the priors the saved one sampled
with. Each entry is
``[index, path, shape, serialized prior or None]``: the weight's index in
``model.trainable_variables`` (its order follows the layers of the config,
while the path can differ after a reload: a nested Sequential's
``"seq/d/kernel"`` reloads as ``"d/kernel"``, and a subclassed model's
layers are numbered per process), its path (for the reader) and shape
(checked at the reload), and its prior; None for a weight made flat on purpose
(``kb.bayesian(..., allow_flat=True)``, the model's ``flat_prior_weights``).

A subclassed ``BayesianModel`` records them too (:func:`config_entries`),
with the input shape it was built on (``"weight_priors_build"``, its Keras
build config): Keras rebuilds it by calling its class, whose ``__init__``
makes its layers with the priors its code gives (none, for those that
``kb.bayesian`` or a constructor argument its config leaves out gave), and
its weights exist only once it is built. ``BayesianModel.from_config``
builds it on that shape and sets the priors (:func:`restore_built`), as
``BayesianModel.build_from_config`` does where a subclass's own
``from_config`` made it (its ``__init__`` keeps the record,
:func:`take_recorded`). Until 2026-11-29 a reload gave such weights no
prior (a flat one) or the code's. A subclassed model whose config has no
record (saved before 2026-11-29) cannot get its priors back from it: once
built, it warns (:class:`keras_bnn.MissingPriorWarning`, :func:`restore_built`)
naming the weights that carry none, where until 2026-11-29 they reloaded
flat without a word. A model a user made and built (``build_from_config``)
has no config to miss the record: it does not (until 2026-11-29 it did).
"""

import warnings

import keras

from keras_bnn import trainable_flags
from keras_bnn.keras_private import Functional, in_safe_mode  # graph models, deserializing
from keras_bnn.layers.prior_aware import PriorAwareMixin
from keras_bnn.prior_guard import MissingPriorWarning, weights_without_prior

#: The key of a ``BayesianModel``'s config that records the priors.
CONFIG_KEY = "weight_priors"
#: The key of a subclassed ``BayesianModel``'s config that records its build config.
BUILD_KEY = "weight_priors_build"
#: The key of a functional ``BayesianModel``'s config naming layers shared across nested
#: models (:func:`shared_across`), which Keras cannot rebuild.
SHARED_KEY = "weight_priors_shared"
#: Weight names whose layer attribute is not ``<name>_regularizer``.
_REGULARIZER_ATTRIBUTES = {"recurrent_kernel": "recurrent_regularizer",
                           "depthwise_kernel": "depthwise_regularizer",
                           "pointwise_kernel": "pointwise_regularizer"}
_DEPTHWISE = (keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)


def places(model):
    """``{id(variable): (layer, enclosing)}`` for each trainable weight: the layer
    that created it and the layers around that one, innermost first (``model``
    itself left out), around each place it is in: a layer shared by two nested
    models is inside both (until 2026-11-30 only the first, and
    ``priors={"second": ...}`` left its weights the defaults)."""
    found = {}

    def visit(layer, chain):  # chain: the layer and those around it, innermost first
        for variable in layer._trainable_variables:  # the layer's own weights
            owner, around = found.setdefault(id(variable), (layer, ()))
            found[id(variable)] = (owner, (*around, *(outer for outer in chain[1:]
                                                      if outer not in around)))
        for child in layer._flatten_layers(include_self=False, recursive=False):
            visit(child, (child, *chain))

    visit(model, ())
    return found


def set_recorded(undo, target, attribute, value):
    """``setattr(target, attribute, value)``, first appending the old value to ``undo``
    (``bayesian`` puts it back if it fails part-way)."""
    undo.append((target, attribute, getattr(target, attribute)))
    setattr(target, attribute, value)


def regularizer_attribute(layer, name):
    """The name of ``layer``'s attribute that holds weight ``name``'s regularizer.

    ``<name>_regularizer``, but ``recurrent_regularizer`` for a recurrent
    kernel, ``depthwise_regularizer`` and ``pointwise_regularizer`` for a
    separable convolution's kernels and ``depthwise_regularizer`` for a
    depthwise convolution's ``kernel``.

    Returns:
        The attribute's name, or None where the layer has no such attribute
        (a custom layer's ``add_weight``).
    """
    if name == "kernel" and isinstance(layer, _DEPTHWISE):
        attribute = "depthwise_regularizer"
    else:
        attribute = _REGULARIZER_ATTRIBUTES.get(name, f"{name}_regularizer")
    return attribute if hasattr(layer, attribute) else None


def attach(variable, layer, enclosing, prior, undo):
    """Sets the prior where the weight and its layer's config hold it (recorded in ``undo``).

    The weight's regularizer; the layer's regularizer attribute
    (:func:`regularizer_attribute`), where it has one; and the
    ``<weight>_prior`` argument of the innermost ``kb.layers`` layer that
    has one (the weight's own layer, or the LSTM around a Keras cell), so
    that its ``get_config`` records the prior.

    Returns:
        ``(argument, outer)``: that argument's name and the ``kb.layers``
        layers further out that have it too, innermost first (a
        ``ResNetPPBlock`` passes its own to its convolutions).
    """
    set_recorded(undo, variable, "regularizer", prior)
    attribute = regularizer_attribute(layer, variable.name)
    if attribute is not None:
        set_recorded(undo, layer, attribute, prior)
    holders = [holder for holder in (layer, *enclosing) if isinstance(holder, PriorAwareMixin)
               and holder.prior_argument_of(variable.name)]
    if not holders:
        return None, []
    argument = holders[0].prior_argument_of(variable.name)
    set_recorded(undo, holders[0], argument, prior)
    return argument, holders[1:]


def _serialized(variable):
    """The weight's regularizer as a config that rebuilds it.

    Raises:
        ValueError: naming the weight, where Keras cannot rebuild it from that
            config in this process, or its class is defined in ``__main__``
            without being registered (a new process could not find it).
    """
    regularizer = variable.regularizer
    kind = type(regularizer)
    config, reason = None, None
    try:
        config = keras.saving.serialize_keras_object(regularizer)
        again = keras.saving.deserialize_keras_object(config)
        if type(again) is not kind or again.get_config() != regularizer.get_config():
            reason = "its config does not rebuild it"
    except Exception as error:  # Keras raises many types for what it cannot (de)serialize
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if reason is None and kind.__module__ == "__main__" and (
            keras.saving.get_registered_object(keras.saving.get_registered_name(kind)) is None):
        reason = "its class is defined in __main__ and not registered"
    if reason is not None:
        raise ValueError(
            f"BayesianModel.get_config: the prior of weight {variable.path!r} "
            f"({kind.__name__}) cannot be saved ({reason}); a reload would lose it. Give "
            "its class a get_config and register it with "
            "@keras.saving.register_keras_serializable().")
    return config


def record(model):
    """The ``"weight_priors"`` entries of a model's config (see module doc).

    Args:
        model: a built ``BayesianModel``.

    Returns:
        ``[[index, path, shape, serialized prior or None], ...]`` for the
        trainable weights with a regularizer, or made flat on purpose.

    Raises:
        ValueError: for a prior that cannot be saved, naming the weight.
    """
    flat = set(getattr(model, "flat_prior_weights", ()))
    return [[index, variable.path, list(variable.shape),
             None if variable.regularizer is None else _serialized(variable)]
            for index, variable in enumerate(model.trainable_variables)
            if variable.regularizer is not None or variable.path in flat]


def restore(model, entries):
    """Sets the priors that :func:`record` recorded on a rebuilt, built model.

    Args:
        model: the ``BayesianModel`` that Keras rebuilt from the config.
        entries: the config's ``"weight_priors"`` (:func:`take_recorded`); the
            layers of the weights a :class:`Recorded` names frozen are frozen first.

    Raises:
        ValueError: naming ``weight_priors`` where an entry does not fit the
            rebuilt model's trainable weights (another architecture: an
            altered config, or a subclass whose code changed since the save).
    """
    trainable_flags.freeze(model, getattr(entries, "frozen", ()))  # before the indices
    variables = model.trainable_variables
    found = places(model)
    flat = []
    for index, path, shape, config in entries:
        if index >= len(variables) or list(variables[index].shape) != list(shape):
            got = tuple(variables[index].shape) if index < len(variables) else "no weight"
            raise ValueError(
                f"BayesianModel.from_config: `{CONFIG_KEY}` gives weight {index} ({path!r}) "
                f"of shape {tuple(shape)} a prior, but the rebuilt model has {got} there "
                f"({len(variables)} trainable weights): the config was altered, or "
                f"{_maker(model, variables[index:index + 1], found)} makes other weights "
                "than when it was saved.")
        variable = variables[index]
        layer, enclosing = found.get(id(variable), (model, ()))
        prior = None if config is None else keras.saving.deserialize_keras_object(config)
        attach(variable, layer, enclosing, prior, [])
        if prior is None:
            flat.append(variable.path)
    if flat:
        model.flat_prior_weights = flat


def _maker(model, variables, found):
    """The class that made a rebuilt weight, as :func:`restore`'s message names it: in a
    functional ``model``, the outermost layer around it that is not a graph (functional,
    Sequential); else ``model``'s.

    A ``keras.Model`` subclass inside a functional model reloads with the arguments its
    config holds, and Keras 3.15 records its ``__init__``'s defaults there, not those it
    was called with (``Net(units=3)`` reloads as ``Net()``): until 2026-12-01 the message
    named ``BayesianModel`` for it.
    """
    layer, enclosing = found.get(id(variables[0]), (model, ())) if variables else (model, ())
    outer = enclosing[-1] if enclosing else layer
    if not getattr(model, "inputs", None) or outer is model or isinstance(
            outer, (Functional, keras.Sequential)):  # a subclassed model rebuilds its layers
        return f"the class {type(model).__name__}"
    made = f"the class {type(outer).__name__} of layer {outer.name!r}"
    if isinstance(outer, keras.Model):
        made += (" (a keras.Model subclass reloads with the arguments its config holds: "
                 "Keras records its __init__'s defaults, not those it was called with; give "
                 "it a get_config that returns them)")
    return made


def config_entries(model, keras_config, recorded):
    """What a ``BayesianModel``'s config adds to Keras' to keep its priors (see module doc).

    Args:
        model: a ``BayesianModel``.
        keras_config: Keras' config of it (a functional one has ``"layers"``).
        recorded: :func:`record` of ``model``, taken before Keras' config (whose layer
            configs raise a bare ``NotImplementedError`` for a prior without
            ``get_config``), or None where the model has no weights yet.

    Returns:
        dict: ``{"weight_priors": recorded}``, with
        ``"weight_priors_frozen"`` where it has frozen weights
        (:func:`keras_bnn.trainable_flags.frozen`), ``"weight_priors_shared"``
        where a layer is shared across its nested models (:func:`shared_across`,
        which :func:`refuse_shared` refuses at the reload) and, for a built
        subclassed one, ``"weight_priors_build"`` (its Keras build config);
        empty for an unbuilt subclassed one (no weights yet).
    """
    functional = {"layers", "input_layers", "output_layers"} <= set(keras_config)
    if recorded is None:
        return {}
    positions = trainable_flags.frozen(model)
    shared = shared_across(model) if functional else []
    return {CONFIG_KEY: recorded,
            **({trainable_flags.FROZEN_KEY: positions} if positions else {}),
            **({SHARED_KEY: shared} if shared else {}),
            **({} if functional else {BUILD_KEY: model.get_build_config()})}


def shared_across(model):
    """The layers of a model that two of its graphs hold (see :func:`refuse_shared`).

    Args:
        model: a functional model.

    Returns:
        ``[[layer name, [names of the models holding it]], ...]``: each layer
        that two or more functional or Sequential models among ``model`` and
        its nested models have among their own layers.
    """
    holders = {}

    def visit(graph):
        for child in graph._flatten_layers(include_self=False, recursive=False):
            known = id(child) in holders
            held = holders.setdefault(id(child), (child, []))[1]
            if isinstance(graph, (Functional, keras.Sequential)) and all(
                    graph is not other for other in held):
                held.append(graph)
            if not known:
                visit(child)

    visit(model)
    return [[layer.name, [graph.name for graph in held]]
            for layer, held in holders.values() if len(held) > 1]


def refuse_shared(config):
    """Refuses a config whose model had a layer shared across nested models.

    Keras rebuilds each nested model's layers from that model's own config,
    so such a layer would come back as one layer per model, each with
    weights of its own: another model than the saved one (Keras' own
    ``load_model`` fails on its weights file; until 2026-11-30 the reload
    said that the config was altered, or rebuilt the copies without a word).

    Args:
        config: a ``BayesianModel``'s config (:func:`config_entries`' key is popped).

    Raises:
        ValueError: naming the shared layers, the models that share them and
            what to do.
    """
    shared = config.pop(SHARED_KEY, None)
    if not shared:
        return
    named = "; ".join(f"layer {name!r} by the models {holders}" for name, holders in shared)
    raise ValueError(
        f"BayesianModel.from_config: the saved model had layers shared across nested models "
        f"({named}). Keras rebuilds each nested model's layers from its own config, so a "
        "shared layer would come back as several layers with weights of their own, another "
        "model than the one sampled (Keras' own load_model fails on it too). Rebuild the "
        "model with your code and load its weights (model.load_weights), or build it so that "
        "no layer is inside two nested models (call the shared layer in the outer graph, or "
        "write the whole model as one functional model) and sample it again.")


def refuse_lora(model, method):
    """Refuses to save a model that samples the LoRA weights of a layer (``enable_lora``).

    Keras saves such a layer's kernel with the LoRA product merged in and
    reloads its LoRA weights as zeros: the reloaded model predicts the same,
    but the sampled weights are gone, their log prior is that of zeros, and a
    chain continued from there starts where their gradients are 0 (both
    factors are 0), in another posterior (until 2026-11-30 ``save`` and
    ``save_weights`` did this without a word, and until 2026-12-01
    ``keras.saving.save_model``, refused now by ``BayesianModel.save_own_variables``,
    after Keras wrote the config: the file is left without weights). A ``kb.SampleStore``, a
    run's backup and ``get_weights`` keep them as they are.

    Args:
        model: a ``BayesianModel``.
        method: the method's name, for the message.

    Raises:
        ValueError: naming the layers and what to do.
    """
    trainable = {id(variable) for variable in model.trainable_variables}
    lora = [layer.name for layer in model._flatten_layers(include_self=False)
            if getattr(layer, "lora_enabled", False) and any(
                id(variable) in trainable for variable in layer._trainable_variables
                if "lora" in variable.name)]
    if lora:
        raise ValueError(
            f"BayesianModel.{method}: layers {lora} sample LoRA weights (enable_lora), which "
            "Keras saves merged into the kernel and reloads as zeros: the sampled weights and "
            "their prior would be lost, and a chain continued from the file would start at "
            "LoRA weights 0 (zero gradients) in another posterior. Keep the samples with "
            "kb.callbacks.CollectSamples (a SampleStore holds the LoRA weights as they are), "
            "or save model.get_weights().")


def has_weights(model):
    """Whether ``model`` has made its weights: built, or (a subclassed model that Keras
    built from its build config by a symbolic call) not marked built but with weights."""
    return model.built or bool(model.weights)


def take_recorded(config):
    """Pops the record :func:`config_entries` added from a config.

    Args:
        config: a ``BayesianModel``'s config, or the keyword arguments that
            a subclass's own ``from_config`` passed on to ``__init__``.

    Returns:
        ``(entries, build)``: the ``"weight_priors"`` entries (a :class:`Recorded`
        where the config records frozen weights) and the build config, None
        where absent.
    """
    frozen = config.pop(trainable_flags.FROZEN_KEY, None)
    entries = config.pop(CONFIG_KEY, None)
    if entries is not None and frozen:
        entries = Recorded(entries, frozen)
    return entries, config.pop(BUILD_KEY, None)


class Recorded(list):
    """The ``"weight_priors"`` entries of a config, with ``frozen``: the positions of the
    model's frozen weights (``"weight_priors_frozen"``), which :func:`restore` freezes."""

    def __init__(self, entries, frozen):
        super().__init__(entries)
        self.frozen = frozen


class _Pending:
    """Priors recorded for a model not yet built (a plain object: Keras tracks no lists in it)."""

    def __init__(self, entries):
        self.entries = entries


#: What :func:`keep_for_build` holds for a model rebuilt from a config without the record.
_UNRECORDED = "unrecorded"


def keep_for_build(model, entries, from_config=True):
    """Holds ``entries`` until :func:`restore_built` can set them (``model`` is not built yet).

    Args:
        model: a ``BayesianModel``.
        entries: the recorded priors (:func:`take_recorded`), or None.
        from_config: whether ``model`` is rebuilt from a config (its
            ``from_config``, or ``__init__`` under Keras' deserialization:
            :func:`deserializing`). Without entries, only such a model warns
            once built (:func:`restore_built`), not one a user made.
    """
    if entries is not None:
        model._keras_bnn_pending_priors = _Pending(entries)
    else:
        model._keras_bnn_pending_priors = _UNRECORDED if from_config else None


def deserializing():
    """Whether Keras is deserializing an object now (``keras.saving.load_model``,
    ``deserialize_keras_object``): inside its ``SafeModeScope`` the safe-mode flag
    is True or False, outside it None (unless
    ``keras.config.enable_unsafe_deserialization()`` set it False for good).

    Returns:
        bool.
    """
    return in_safe_mode() is not None


def restore_built(model, build=None):
    """Sets the priors held by :func:`keep_for_build` once the model is built.

    Builds ``model`` on ``build`` (its Keras build config) first where it
    is not built.

    Args:
        model: a rebuilt ``BayesianModel``.
        build: its build config, or None.

    Raises:
        ValueError: as :func:`restore`, where the record does not fit.

    Warns:
        UserWarning: naming the weights whose recorded prior could not be
            set, where the model could not be built (no build config, or
            Keras could not build it): they would be sampled under the
            priors the class's code gives them, or none.
        MissingPriorWarning: for a built subclassed model rebuilt from a
            config that recorded no priors (:func:`_warn_unrecorded`); not
            for one a user made and built (``build_from_config``), where
            until 2026-11-29 it also fired.
    """
    pending = getattr(model, "_keras_bnn_pending_priors", None)
    if pending is None:  # made by the user, not from a config: nothing recorded to miss
        return
    if pending is _UNRECORDED:
        _warn_unrecorded(model)
        return
    if not pending.entries:
        return
    if not has_weights(model) and build:
        model.build_from_config(build)  # a BayesianModel's: it calls this again once built
        return
    if not has_weights(model):
        shown = [entry[1] for entry in pending.entries]
        warnings.warn(
            f"{type(model).__name__}: the priors its config records for weights "
            f"{shown[:8]}{' and more' if len(shown) > 8 else ''} could not be set: the model "
            "is not built (Keras could not build it on the input shape its config records, or "
            "there is none). Build it with model.build_from_config({'input_shape': ...}) to "
            "set them; else they are sampled under the priors its code gives, or none.",
            UserWarning, stacklevel=3)
        return
    model._keras_bnn_pending_priors = _Pending(())  # set: none pending, but recorded
    restore(model, pending.entries)


def _warn_unrecorded(model):
    """Warns, naming them, of a built subclassed model's weights that carry no prior where
    its config recorded none (a file saved before 2026-11-29): Keras rebuilt it from its
    class, which gives the priors its code gives (none for those that ``kb.bayesian`` or
    a constructor argument that the config leaves out gave), and flat ones are sampled
    under an improper prior."""
    if getattr(model, "inputs", None) or not has_weights(model):  # functional; or no weights
        return
    chosen = set(getattr(model, "flat_prior_weights", ()))
    flat = [path for path in weights_without_prior(model) if path not in chosen]
    if flat:
        warnings.warn(
            f"{type(model).__name__}: reloaded from a config that records no priors (saved "
            f"before 2026-11-29), {len(flat)} trainable weight(s) carry none (flat): "
            f"{flat[:8]}{' and more' if len(flat) > 8 else ''}. Give them their priors again "
            "as when it was sampled (model = kb.bayesian(model, ...), or the subclass's own "
            "prior arguments), then save it again: its config then records them.",
            MissingPriorWarning, stacklevel=3)
