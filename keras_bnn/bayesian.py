"""``kb.bayesian``: any Keras model as a :class:`keras_bnn.BayesianModel` with priors.

A Sequential, functional or subclassed Keras model becomes a functional
``BayesianModel`` that shares its layers and weights, with a prior
(:mod:`keras_bnn.priors`) on every trainable weight (a Sequential's layers
become the graph's layers, as in a functional model; one that Keras cannot
trace into a graph stays one layer, with a :class:`SequentialAsOneLayerWarning`).
Which prior:

1. ``priors={key: prior}``, where ``key`` is a weight's path
   (``variable.path``: ``"dense_1/kernel"`` in a functional model,
   ``"seqnet/dense_1/kernel"`` inside a Sequential named ``seqnet``), its
   layer's name and its own (``"dense_1/kernel"`` in any model; a layer
   around that one names it too: ``"lstm/recurrent_kernel"`` for the
   weight of an LSTM's cell), a layer's name (``"dense_1"``: all its
   weights, those of its sublayers too: ``"block"``; a subclassed model's,
   the one layer of the result: ``"net"``, ``"net/kernel"``)
   or a weight's name (``"embeddings"``, ``"gamma"``: every weight so
   named), in that order of precedence; ``None`` as the prior means a flat
   prior for those weights, an explicit opt-in;
2. a ``keras_bnn.priors.Prior`` the weight already carries (``kb.layers``; not
   one that an earlier ``kb.bayesian`` call set on the same weights: each call
   chooses again; a reloaded or cloned model's priors are carried ones);
3. the defaults: :data:`NAMED_DEFAULTS` by weight name (embeddings
   ``Normal(0, 1)`` as in ``kb.layers.Embedding``; normalisation scales
   ``gamma`` ``Normal(1, 1)``, centred on their initial value 1, as
   ``kb.layers.FRN``'s γ; an ``RMSNormalization``'s ``scale`` too), else
   ``kernel_prior`` for weights of rank ≥ 2 not named ``bias`` and not of a
   normalisation or ``PReLU`` layer (default ``HeNormal(1)``: σ = sqrt(2/fan_in), the
   variance that keeps a ReLU network's activations at unit scale) and
   ``bias_prior`` for the rest (default ``Normal(0, 1)``: biases, those of
   rank 2 of a GRU or an attention head too, normalisation shifts,
   scalars).

A fan-scaled prior (``HeNormal``, ``HeStudentT``, ``GlorotNormal``) reads
a kernel's fans from its shape ``(*k, in, out)``, which does not say which
axes an ``EinsumDense`` kernel sums over (``MultiHeadAttention`` projects
with four): the query, key and value kernels ``(d_model, heads, head_dim)``
of equation ``"abc,cde->abde"`` sum over ``c`` only, so their fan-in is
``d_model``, not ``d_model·heads``. Such a kernel gets a copy of its prior
with the equation's fans as arguments (the prior passed in is left as it
is): ``fan_in``, the product of the kernel's axes whose letters are in the
input and not in the output; ``fan_out``, that of the others (as Keras's
``EinsumDense`` tells its initializer). A depthwise kernel ``(*k, in,
multiplier)`` (``DepthwiseConv2D``, a ``SeparableConv2D``'s first) gets
``fan_in = prod(k)``: each output channel sums over one input channel, not
``prod(k)·in`` as its shape reads (σ was sqrt(in) times too tight). A
transposed convolution's kernel ``(*k, out, in)`` gets ``fan_in =
prod(k)·in/prod(strides)``, the terms each output sums on average (its
shape reads ``prod(k)·out``), and ``fan_out = prod(k)·out``. A fan given to
the prior is kept.

Each prior becomes the weight's regularizer (so it enters ``layer.losses``),
the ``<weight>_prior`` argument of the innermost ``kb.layers`` layer that
has one (a composite such as ``ResNetPPBlock``, which passes one prior of
each kind to all its sublayers, records a prior given to all its weights of
that kind) and, where the layer has the matching regularizer attribute
(``kernel_regularizer``, ``bias_regularizer``, ``embeddings_regularizer``,
``gamma_regularizer``, an LSTM cell's ``recurrent_regularizer``, a depthwise
kernel's ``depthwise_regularizer``, ...), that attribute too, so that the
layer's ``get_config`` records it. The ``BayesianModel``'s own config
records every trainable weight's prior as well
(:mod:`keras_bnn.prior_attachment`), so ``model.save``,
``keras.saving.load_model`` and :meth:`keras_bnn.SampleStore.build_model`
rebuild all of them, also where no layer config records one: the
projections of a ``MultiHeadAttention``, the layers of a subclassed model,
a custom layer's ``add_weight``, a ``ResNetPPBlock``'s convolution given a
prior of its own; ``keras.models.clone_model`` gives the clone's weights
them too (:mod:`keras_bnn.clone_priors`). A prior that a reload could not
rebuild (its class not registered with Keras) raises at ``save``.

A plain Keras regularizer already on a weight (``l2``) is replaced, with a
``UserWarning``: in a ``BayesianModel`` every layer loss is a ``-log p(w)``
that the model scales by ``1/n``, so an L2 penalty tuned for SGD would become
a different prior. A layer's ``activity_regularizer`` (a penalty on its
outputs, which depends on the data: no prior) is removed, with the same
warning. A custom layer's ``add_loss`` cannot be told apart from a prior:
it is read as one.
"""

import math
import re
import warnings

import keras

from keras_bnn import priors as priors_lib
from keras_bnn.keras_private import Functional  # a model with a graph of its layers
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.prior_attachment import attach, places, set_recorded
from keras_bnn.validation import argument_error, check_bool

#: Default priors by weight name, ahead of the kernel/bias rule (see module doc).
NAMED_DEFAULTS = {
    "embeddings": lambda: priors_lib.Normal(0.0, 1.0),
    "gamma": lambda: priors_lib.Normal(1.0, 1.0),
}
_UNSET = object()
#: The attribute of a weight that keeps the prior it carried before kb.bayesian (_carried).
_CARRIED = "_keras_bnn_carried_prior"
_TRANSPOSED = (keras.layers.Conv1DTranspose, keras.layers.Conv2DTranspose,
               keras.layers.Conv3DTranspose)
#: Keras layers whose weights act element by element (scales, shifts, slopes) at any rank:
#: no kernel with fans, so ``bias_prior`` (or a named default) whatever their rank.
_RMS_NORMALIZATION = getattr(keras.layers, "RMSNormalization", ())  # Keras >= 3.9
_ELEMENTWISE = (keras.layers.BatchNormalization, keras.layers.LayerNormalization,
                keras.layers.GroupNormalization, _RMS_NORMALIZATION, keras.layers.PReLU)


class SequentialAsOneLayerWarning(UserWarning):
    """``kb.bayesian`` got a Sequential that Keras could not trace into a graph of its
    layers: the ``BayesianModel`` has the Sequential as its one layer."""


def _keys(variable, layer, enclosing):
    """The ``priors`` keys that name a weight, most specific first (see module doc).

    ``"<layer>/<weight>"`` is the weight's path inside its layer: a layer of
    a Sequential or nested model has a longer path (``"seqnet/d2/bias"``).
    A layer around the weight's own layer names it too (``"lstm/recurrent_kernel"``
    for the weight of an LSTM's cell, ``"block"`` for every weight of a block).
    """
    return (variable.path, f"{layer.name}/{variable.name}",
            *(f"{outer.name}/{variable.name}" for outer in enclosing), layer.name,
            *(outer.name for outer in enclosing), variable.name)


def _choose(variable, layer, keys, priors, kernel_prior, bias_prior):
    """The prior of one weight of ``layer``, and the argument that chose it (see module doc).

    An ``RMSNormalization``'s ``scale`` is a normalisation scale (``gamma``'s
    default), and the weights of :data:`_ELEMENTWISE` layers take ``bias_prior``
    at any rank: until 2026-11-30 a ``LayerNormalization(axis=[-2, -1])``'s
    ``beta`` and a ``PReLU``'s ``alpha`` of rank ≥ 2 took ``kernel_prior``
    (``HeNormal``'s σ then read from their layout: sqrt(2/5) for ``(5, 6)``),
    and the scale ``Normal(0, 1)``, centred on 0 for a weight that starts at 1.

    Returns:
        ``(prior, argument)``: ``argument`` is ``"priors[key]"``,
        ``"kernel_prior"`` or ``"bias_prior"`` where the caller's arguments
        decided, None for a prior the weight carries or a named default.
    """
    name, carried = variable.name, _carried(variable)  # kept before any prior is set
    for key in keys:
        if key in priors:
            argument = f"priors[{key!r}]"
            return priors_lib.get(priors[key], argument), argument
    if carried is not None:
        return carried, None
    if isinstance(layer, _RMS_NORMALIZATION) and name == "scale":
        name = "gamma"
    if name in NAMED_DEFAULTS:
        return NAMED_DEFAULTS[name](), None
    if len(variable.shape) >= 2 and name != "bias" and not isinstance(layer, _ELEMENTWISE):
        return kernel_prior, "kernel_prior"
    return bias_prior, "bias_prior"


def _carried(variable):
    """The ``kb.priors`` prior the weight carried before ``kb.bayesian`` first set one, or None.

    Kept on the weight at the first call, so that a later call chooses again from
    its own arguments: the priors an earlier call set are no prior the weight
    carries (until 2026-11-29 they were, and a second ``kb.bayesian(model,
    kernel_prior=...)`` kept the first call's priors without a word).
    """
    if not hasattr(variable, _CARRIED):
        own = variable.regularizer
        setattr(variable, _CARRIED, own if isinstance(own, priors_lib.Prior) else None)
    return getattr(variable, _CARRIED)


def _true_fans(layer, variable):
    """``(fan_in, fan_out)`` of a kernel whose shape does not tell its fans (see module doc).

    An ``EinsumDense`` kernel's from its equation; a depthwise kernel's
    ``(*k, in, multiplier)`` (``DepthwiseConv1D/2D``'s ``kernel``,
    ``SeparableConv1D/2D``'s ``depthwise_kernel``), whose output channels
    each sum over one input channel: ``prod(k)`` and ``prod(k)·multiplier``;
    a transposed convolution's ``(*k, out, in)``, whose outputs each sum over
    ``prod(k)/prod(strides)`` taps of every input channel on average:
    ``prod(k)·in/prod(strides)`` (rounded, at least 1) and ``prod(k)·out``.

    Returns:
        None for another weight.
    """
    field = math.prod(int(n) for n in variable.shape[:-2])
    depthwise = ((variable.name == "kernel" and isinstance(layer, (
        keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D))) or (
            variable.name == "depthwise_kernel" and isinstance(layer, (
                keras.layers.SeparableConv1D, keras.layers.SeparableConv2D))))
    if depthwise:
        return field, field * int(variable.shape[-1])
    if variable.name == "kernel" and isinstance(layer, _TRANSPOSED):
        taps = field * int(variable.shape[-1]) / math.prod(layer.strides)
        return max(1, round(taps)), field * int(variable.shape[-2])
    if not isinstance(layer, keras.layers.EinsumDense) or variable.name != "kernel":
        return None
    input_spec, rest = layer.equation.split(",")
    kernel_spec, output_spec = rest.split("->")
    fan_in = math.prod(int(n) for letter, n in zip(kernel_spec, variable.shape)
                       if letter in input_spec and letter not in output_spec)
    return fan_in, int(math.prod(variable.shape)) // fan_in


def _record_in_composites(passed, undo):
    """Sets a composite layer's prior argument to the prior all its weights of that kind got.

    A ``kb.layers`` layer that builds sublayers (``ResNetPPBlock``) records one
    prior of each kind, which it passes to all of them when rebuilt. Where
    all its weights of a kind got one prior, it becomes the layer's, so that
    the layer's config alone rebuilds them; where they got several, the
    layer's is left as it was and the ``BayesianModel``'s config keeps each
    weight's (:mod:`keras_bnn.prior_attachment`).

    Args:
        passed: ``{(id(layer), argument): (layer, argument, {path: prior})}``.
        undo: the old values, as :func:`keras_bnn.prior_attachment.set_recorded`
            records them.
    """
    for layer, argument, given in passed.values():
        configs = [priors_lib.serialize(prior) for prior in given.values()]
        if all(config == configs[0] for config in configs):
            set_recorded(undo, layer, argument, next(iter(given.values())))


def _set_priors(model, kernel_prior, bias_prior, priors, allow_flat, undo):
    """Chooses and sets every trainable weight's prior, recording in ``undo`` what it changes
    (see :func:`bayesian` for the arguments and the errors).

    Returns:
        ``(flat, replaced, activity)``: the paths of the weights left flat and of those
        whose Keras regularizer was replaced, and the names of the layers whose activity
        regularizer was removed.
    """
    found = places(model)
    outermost = (model,) if _one_layer(model) else ()  # its name is that layer's: a key
    known = set()
    replaced, flat, passed = [], [], {}
    for variable in model.trainable_variables:
        layer, enclosing = found.get(id(variable), (model, ()))
        keys = _keys(variable, layer, (*enclosing, *outermost) if layer is not model
                     else enclosing)
        known.update(keys)
        prior, argument = _choose(variable, layer, keys, priors, kernel_prior, bias_prior)
        if prior is None and not allow_flat:
            raise ValueError(
                f"bayesian: `{argument}` is None, so weight {variable.path!r} would get no "
                "prior (a flat, improper prior); pass allow_flat=True to mean it, or give it "
                "a prior.")
        if prior is None:
            flat.append(variable.path)
        else:
            try:
                prior.validate_shape(variable.shape, argument)
            except ValueError as error:
                raise ValueError(f"bayesian: {str(error).rstrip('.')} (weight "
                                 f"{variable.path!r}).") from None
            fans = _true_fans(layer, variable)
            if fans is not None and hasattr(prior, "with_fans"):  # a fan-scaled prior
                prior = prior.with_fans(variable.shape, *fans)
        if variable.regularizer is not None and not isinstance(
                variable.regularizer, priors_lib.Prior) and not (
                    argument or "").startswith("priors["):
            replaced.append(variable.path)
        kind, outer = attach(variable, layer, enclosing, prior, undo)
        for composite in outer:
            passed.setdefault((id(composite), kind), (composite, kind, {}))[2][
                variable.path] = prior
    activity = []
    for layer in model._flatten_layers(include_self=True):
        if getattr(layer, "activity_regularizer", None) is not None:
            activity.append(layer.name)
            set_recorded(undo, layer, "activity_regularizer", None)
            if isinstance(layer, keras.layers.ActivityRegularization):
                for factor in ("l1", "l2"):  # its config rebuilds the penalty from them
                    set_recorded(undo, layer, factor, 0.0)
    unknown = sorted(set(priors) - known)
    if unknown:
        frozen = sorted(set(unknown) & _frozen_keys(model, found))
        # Keras' Bidirectional runs copies of the layer given to it, not that layer
        copies = sorted(f"{side}_{key}" for key in unknown for side in ("forward", "backward")
                        if f"{side}_{key}" in known)
        raise ValueError(f"bayesian: `priors` names no weight, layer or weight name of the "
                         f"model: {unknown}"
                         + (f" ({frozen} name frozen weights only, trainable=False: they are "
                            "not sampled and take no prior)" if frozen else "")
                         + (f" (a Bidirectional runs copies of the layer it was given, named "
                            f"{copies}: name those, or the Bidirectional)" if copies else "")
                         + f"; known weight paths: "
                         f"{[v.path for v in model.trainable_variables][:20]}.")
    _record_in_composites(passed, undo)
    return flat, replaced, activity


def _one_layer(model):
    """Whether ``model`` becomes the one layer of the ``BayesianModel`` (subclassed, or a
    Sequential that Keras did not trace into a graph): its name then names all its weights
    (until 2026-12-01 ``priors={"net": ...}`` of a subclassed ``"net"`` raised: "names no
    weight, layer or weight name")."""
    if isinstance(model, BayesianModel):
        return False
    if isinstance(model, keras.Sequential):
        return model._functional is None
    return not isinstance(model, Functional)  # subclassed: called on an Input or not


def _frozen_keys(model, found):
    """The ``priors`` keys that name the weights of frozen layers (``trainable=False``),
    which are not sampled and so take no prior (:func:`_keys`; ``found``: :func:`places`)."""
    trainable = {id(variable) for variable in model.trainable_variables}
    return {key for variable in model.weights
            if id(variable) in found and id(variable) not in trainable
            for key in _keys(variable, *found[id(variable)])}


def bayesian(model, kernel_prior=_UNSET, bias_prior=_UNSET, priors=None, allow_flat=False,
             input_shape=None, input_dtype=None):
    """Turns a Keras model into a :class:`keras_bnn.BayesianModel` with a prior on every weight.

    The result shares ``model``'s layers and weights (``model`` itself now
    carries the priors as regularizers too). Compile it as any
    ``BayesianModel``: ``compile(sampler=..., train_size=n, loss=...)``.

    A model whose ``fit`` ran before (``kb.bayesian(bnn, ...)`` of a
    ``BayesianModel`` returns ``bnn`` itself) traces its train step again:
    until 2026-11-30 it went on sampling under the priors it was traced with
    (its ``prior`` metric 24.2 where the new priors' -log p(θ) was 1169).

    Args:
        model: a built Keras model: Sequential (with an ``Input`` or built),
            functional, or subclassed (called once on data, or ``build``).
        kernel_prior: prior of weights of rank ≥ 2 not named ``bias``
            without a more specific one (default ``HeNormal(1.0)``): a
            prior, a name, a config.
        bias_prior: prior of the other weights (default ``Normal(0, 1)``).
        priors: ``{key: prior}`` overrides, ``key`` a weight path, a layer
            name or a weight name (see the module doc); ``None`` as a value
            is a flat prior for those weights.
        allow_flat: True to accept ``None`` priors (in ``priors``, or as
            ``kernel_prior``/``bias_prior``): those weights are then sampled
            flat without a :class:`keras_bnn.MissingPriorWarning`; without
            it, a ``None`` raises.
        input_shape: for a subclassed model whose input shape Keras did not
            record: one example's shape (without the batch axis).
        input_dtype: for a subclassed model (Keras records no input dtype):
            its input's dtype, ``"int32"`` for token ids fed to an
            ``Embedding``; None: ``"float32"`` (Keras' ``keras.Input`` default).
            It becomes the serving signature's input dtype.

    Returns:
        A functional ``BayesianModel``: on the model's own graph
        (functional), on a new ``keras.Input`` of a Sequential's input shape
        (its batch size too, where it has one: ``keras.Input(...,
        batch_size=8)`` for a stateful RNN, or the batch it was built on by
        a call, as ``keras.models.clone_model`` keeps it) and dtype followed
        by its layers in order (``get_layer`` finds them; a nested
        Sequential stays one layer), or with a subclassed model as its one
        layer (saving then needs that class registered with
        ``@keras.saving.register_keras_serializable``, as in Keras).

    Raises:
        ValueError: for a ``model`` that is not a built Keras model, a
            ``priors`` that is not a dict with str keys or has a key that matches no
            weight or layer, a ``None`` prior without ``allow_flat``, an
            unknown prior, or a prior that does not fit its weight's shape
            (each naming the argument); for a model without a graph whose
            one input shape is unknown (naming ``input_shape``), for an
            ``input_dtype`` that is not a Keras dtype, an ``input_shape``
            or ``input_dtype`` given for a model with a graph (whose
            ``keras.Input`` sets them), or a
            Sequential that Keras can neither trace into a graph nor call
            on a ``keras.Input`` (saying what to do). After any error ``model``
            is as it was: the priors set before it are taken off again, and
            its regularizers and activity regularizers put back.

    Warns:
        SequentialAsOneLayerWarning: for a Sequential that Keras did not
            trace into a graph of its layers (its ``build`` gave up on a
            layer that raised ``NotImplementedError``) but can call on a
            ``keras.Input``: it becomes the model's one layer, as a
            subclassed model; the ``priors`` keys are the same.
    """
    if not isinstance(model, keras.Model):
        raise argument_error("model", "be a keras.Model (Sequential, functional or "
                             "subclassed)", model, "bayesian", got=type(model).__name__)
    if not isinstance(priors, (dict, type(None))) or any(
            not isinstance(key, str) for key in priors or {}):  # mixed keys: sorted() fails
        raise argument_error("priors", "be a dict {weight path, layer name or weight name: "
                             "prior} with str keys", priors, "bayesian")
    allow_flat = check_bool(allow_flat, "allow_flat", "bayesian")
    if not model.built or not model.trainable_variables:
        raise ValueError(
            f"bayesian: `model` must be built with trainable weights (give a Sequential an "
            f"keras.Input, or call the model once on a batch); got {type(model).__name__} "
            f"with built={model.built} and {len(model.trainable_variables)} trainable weights.")
    kernel_prior = priors_lib.get(priors_lib.HeNormal() if kernel_prior is _UNSET
                                  else kernel_prior, "kernel_prior")
    bias_prior = priors_lib.get(priors_lib.Normal() if bias_prior is _UNSET else bias_prior,
                                "bias_prior")
    priors = dict(priors or {})
    undo = []
    try:
        flat, replaced, activity = _set_priors(model, kernel_prior, bias_prior, priors,
                                               allow_flat, undo)
        result = _as_bayesian_model(model, input_shape, input_dtype)
    except BaseException:  # the caller's model as it was: no prior of a failed call stays
        for target, attribute, value in reversed(undo):
            setattr(target, attribute, value)
        raise
    if replaced:
        warnings.warn(f"bayesian: replaced the Keras regularizers of {replaced} by priors "
                      "(a BayesianModel reads every layer loss as -log p(w), scaled by 1/n).",
                      UserWarning, stacklevel=2)
    if activity:
        warnings.warn(f"bayesian: removed the activity regularizers of layers {activity}: a "
                      "penalty on a layer's outputs depends on the data, so it is no prior (a "
                      "BayesianModel reads every layer loss as -log p(w), scaled by 1/n).",
                      UserWarning, stacklevel=2)
    result.flat_prior_weights = flat
    for owner in (model, result):  # their train steps were traced with the old priors
        owner.train_function = owner.test_function = None
    return result


def _as_bayesian_model(model, input_shape, input_dtype):
    """A functional ``BayesianModel`` on ``model``'s graph or its (Sequential) layers, or
    around it as one layer (subclassed, or a Sequential that Keras did not trace)."""
    if isinstance(model, BayesianModel):
        return _with_own_input(model, input_shape, input_dtype)
    sequential = isinstance(model, keras.Sequential)
    if sequential and model._functional is not None:
        _with_own_input(model, input_shape, input_dtype)
        # Built (with an Input, by ``build`` or by a call): its first layer is an InputLayer,
        # whose batch size is kept (a stateful RNN's), as keras.models.clone_model does.
        spec = model.inputs[0]
        inputs = outputs = keras.Input(batch_shape=tuple(spec.shape), dtype=spec.dtype)
        for layer in model.layers:
            outputs = layer(outputs)
        return BayesianModel(inputs=inputs, outputs=outputs, name=f"bayesian_{model.name}")
    try:  # the graph's own structures (a lone tensor, not a list of one: Keras warns)
        inputs, outputs = model.input, model.output
    except (AttributeError, ValueError):  # a subclassed model has no graph
        inputs = outputs = None
    if inputs is None:
        inputs = _input_of(model, input_shape, input_dtype)
        outputs = _sequential_as_one_layer(model, inputs) if sequential else model(inputs)
    else:
        _with_own_input(model, input_shape, input_dtype)
    return BayesianModel(inputs=inputs, outputs=outputs, name=f"bayesian_{model.name}")


def _with_own_input(model, input_shape, input_dtype):
    """``model`` (which has a graph, so a ``keras.Input`` of its own), refusing an
    ``input_shape`` or ``input_dtype``: they would not change that input (until
    2026-11-29 an ``input_shape`` was ignored without a word)."""
    spec = (getattr(model, "inputs", None) or [None])[0]
    for argument, value, kind, own in (
            ("input_shape", input_shape, "shape", spec is not None and tuple(spec.shape[1:])),
            ("input_dtype", input_dtype, "dtype", spec is not None and spec.dtype)):
        if value is not None:
            raise argument_error(
                argument, f"be None for a model with a graph, whose keras.Input sets the "
                f"{kind} ({own} here; {argument} is for a subclassed model)", value,
                "bayesian")
    return model


def _sequential_as_one_layer(model, inputs):
    """A Sequential that Keras did not trace into a graph (``Sequential.build`` gives up
    on a layer that raises ``NotImplementedError``) called on ``inputs`` as one layer,
    with a :class:`SequentialAsOneLayerWarning`.

    Returns:
        The outputs.

    Raises:
        ValueError: where that call fails too (a layer whose output shape cannot be
            inferred), saying what to do.
    """
    try:
        outputs = model(inputs)
    except (NotImplementedError, TypeError, ValueError) as error:
        lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines()
                 if line.strip() and not line.startswith("Exception encountered")]
        raise ValueError(
            f"bayesian: Keras could not trace the Sequential {model.name!r} into a graph of "
            "its layers, nor call it on a keras.Input (a layer's output shape cannot be "
            "inferred); write it as a functional model, or give that layer a "
            f"`compute_output_shape` (the error: {(lines or [type(error).__name__])[0]})."
        ) from error
    warnings.warn(
        f"bayesian: Keras could not trace the Sequential {model.name!r} into a graph of its "
        "layers (its build gave up on a layer), so it is the one layer of the BayesianModel: "
        f"reach its layers by bnn.get_layer({model.name!r}).get_layer(name). The `priors` "
        f"keys are unchanged ({model.name!r}/layer/weight paths, layer/weight, layer and "
        "weight names).", SequentialAsOneLayerWarning, stacklevel=4)
    return outputs


def _input_of(model, input_shape, input_dtype):
    """A new ``keras.Input`` of ``input_dtype`` for a model without a graph: of
    ``input_shape`` or, if None, of the one input shape the model was built with.

    Raises:
        ValueError: where that shape is unknown or is several shapes, naming
            ``input_shape``; for an ``input_dtype`` that Keras does not know.
    """
    shapes = list((getattr(model, "_build_shapes_dict", None) or {}).values())
    if input_shape is None and len(shapes) == 1 and isinstance(shapes[0], (tuple, list)) and all(
            isinstance(size, (int, type(None))) for size in shapes[0]):  # one input's shape
        input_shape = tuple(shapes[0])[1:]
    if input_shape is None:
        raise ValueError(
            f"bayesian: the input shape of the model {model.name!r}, which has no graph, is "
            "unknown or is not one shape (it was built with "
            f"{shapes[0] if len(shapes) == 1 else shapes}); pass `input_shape=` (one "
            "example's shape, without the batch axis), or for several inputs write it as a "
            "functional model.")
    try:
        dtype = keras.backend.standardize_dtype(input_dtype or "float32")
    except ValueError as error:
        raise argument_error("input_dtype", "be a Keras dtype such as 'float32' or 'int32'",
                             input_dtype, "bayesian") from error
    return keras.Input(tuple(input_shape), dtype=dtype)
