"""Likelihoods: which output head a model has, its loss, and how to tell.

A keras_bnn model outputs the parameters of p(y|x,θ) (never probabilities):

* ``"categorical"``: K ≥ 2 logits, p(y=k|x,θ) = softmax(f(x;θ))_k; loss
  ``SparseCategoricalCrossentropy(from_logits=True)``.
* ``"bernoulli"``: one logit, p(y=1|x,θ) = sigmoid(f(x;θ)); loss
  ``BinaryCrossentropy(from_logits=True)`` (labels 0/1).
* ``"gaussian"``: ``[μ, log σ²]`` (2D units for D targets),
  p(y|x,θ) = N(y; μ, σ²); loss :class:`GaussianNLL` (a posterior ensemble's
  mixture of S such heads: :class:`PredictiveGaussianNLL`).

:func:`infer` reads the likelihood from a compiled model's loss (or from the
loss recorded in a :class:`keras_bnn.SampleStore`), so that
:meth:`keras_bnn.PosteriorEnsemble.from_store` needs no ``likelihood=``.
"""

import math

import keras
from keras import ops

from keras_bnn.metrics import PROB_FLOOR
from keras_bnn.uncertainty import log_mean_exp
from keras_bnn.validation import argument_error, check_choice

LIKELIHOODS = ("categorical", "bernoulli", "gaussian")
_LOG_2PI = math.log(2.0 * math.pi)


@keras.saving.register_keras_serializable(package="keras_bnn")
class GaussianNLL(keras.losses.Loss):
    """Negative log-likelihood of a Gaussian head ``[μ, log σ²]``.

    Per example, summed over the D targets:
    ``−log N(y; μ, σ²) = ½ Σ_d [log 2π + log σ²_d + (y_d − μ_d)²/σ²_d]``;
    ``y_pred`` is ``[N, 2D]`` (means first, then log-variances) and ``y_true``
    ``[N, D]`` (or ``[N]`` for D = 1). Keras averages it over the batch.
    """

    def __init__(self, name="gaussian_nll", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        units = y_pred.shape[-1] // 2
        mean, log_variance = y_pred[..., :units], y_pred[..., units:]
        return _gaussian_nll(ops.reshape(ops.cast(y_true, y_pred.dtype), ops.shape(mean)),
                             mean, log_variance)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction}


def _gaussian_nll(y, mean, log_variance):
    """½ Σ_d [log 2π + log σ²_d + (y_d − μ_d)²/σ²_d] over the last axis (broadcast)."""
    squared = ops.square(y - mean) * ops.exp(-log_variance)
    return 0.5 * ops.sum(_LOG_2PI + log_variance + squared, axis=-1)


@keras.saving.register_keras_serializable(package="keras_bnn")
class PredictiveGaussianNLL(keras.losses.Loss):
    """Negative log-likelihood of the mixture of S Gaussian members, as ``kb.metrics`` scores it.

    The loss of a ``"gaussian"`` :class:`keras_bnn.PosteriorEnsemble`'s
    ``evaluate``, which feeds it the members' outputs: the posterior
    predictive p(y|x) = (1/S) Σ_s N(y; μ_s, σ²_s), per example

        −log p(y|x) = log S − logsumexp_s(−½ Σ_d [log 2π + log σ²_sd + (y_d − μ_sd)²/σ²_sd]),

    :func:`keras_bnn.metrics.gaussian_mixture_nll_per_example` (float64
    there, ``y_pred``'s dtype here). Not the NLL of the mixture's
    moment-matched Gaussian (the ensemble's output, which :class:`GaussianNLL`
    reads): two members at ±3 with unit variance score 2.12 against its 2.57
    on draws from the mixture. For S = 1 it is :class:`GaussianNLL`.

    Call arguments: ``y_pred`` ``[N, S, 2D]``, each member's ``[μ, log σ²]``
    (means first, as a Gaussian head outputs them), and ``y_true`` ``[N, D]``
    (or ``[N]`` for D = 1). Keras averages the result over the batch
    (``sample_weight`` per example). Per position for members' outputs
    ``[N, S, ..., 2D]`` (a sequence regression's ``[N, S, T, 2D]``, labels
    ``[N, T, D]`` or ``[N, T]``): one NLL per position, which Keras averages
    over the unmasked ones.

    Raises:
        ValueError: naming ``y_pred`` when it is of rank < 3 (a single
            Gaussian's ``[N, 2D]`` is :class:`GaussianNLL`'s).
    """

    def __init__(self, name="predictive_gaussian_nll", reduction="sum_over_batch_size",
                 dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        if len(y_pred.shape) < 3:
            raise argument_error(
                "y_pred", "be the members' outputs [N, S, 2D] ([N, S, T, 2D] per timestep; a "
                "PosteriorEnsemble's evaluate feeds them; a single Gaussian [N, 2D] is "
                "GaussianNLL's)",
                y_pred, "PredictiveGaussianNLL", got=f"shape {tuple(y_pred.shape)}")
        units = y_pred.shape[-1] // 2
        mean, log_variance = y_pred[..., :units], y_pred[..., units:]
        y_true = ops.reshape(ops.cast(y_true, y_pred.dtype), ops.shape(mean[:, 0]))
        log_density = -_gaussian_nll(y_true[:, None], mean, log_variance)  # [N, S, ...]
        return -log_mean_exp(log_density, axis=1)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction}


@keras.saving.register_keras_serializable(package="keras_bnn")
class PredictiveNLL(keras.losses.Loss):
    """Negative log-likelihood of predicted probabilities, as ``kb.metrics.nll`` scores it.

    The loss for :meth:`keras_bnn.PosteriorEnsemble.evaluate`, whose output
    is the predictive p̄ (probabilities, not logits): per example
    ``−log max(p̄_y, PROB_FLOOR)`` with :data:`keras_bnn.metrics.PROB_FLOOR`
    (float32 ``tiny``: at most 87.3 nats), for ``y_pred`` ``[N, K]`` class
    probabilities and integer labels, or ``[N, 1]`` p(y=1) and labels 0/1.
    Keras' ``"sparse_categorical_crossentropy"`` and
    ``"binary_crossentropy"`` clip p̄ to [ε, 1 − ε] (``keras.config.epsilon()``
    = 1e-7), so they charge at most 16.1 nats: a confidently wrong
    prediction costs less than ``kb.metrics`` and ``keras-bnn evaluate`` say.
    """

    def __init__(self, name="predictive_nll", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        labels = ops.reshape(y_true, ops.shape(y_pred)[:-1])
        if y_pred.shape[-1] == 1:
            p = ops.where(ops.cast(labels, "bool"), y_pred[..., 0], 1.0 - y_pred[..., 0])
        else:
            labels = ops.expand_dims(ops.cast(labels, "int32"), -1)
            p = ops.take_along_axis(y_pred, labels, axis=-1)[..., 0]
        return -ops.log(ops.maximum(p, PROB_FLOOR))

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction}


def loss_for(likelihood):
    """The per-example NLL loss of a likelihood (all take the raw head outputs).

    Args:
        likelihood: one of :data:`LIKELIHOODS`.

    Returns:
        A ``keras.losses.Loss``.

    Raises:
        ValueError: for an unknown likelihood.
    """
    likelihood = check_choice(likelihood, "likelihood", LIKELIHOODS)
    if likelihood == "categorical":
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if likelihood == "bernoulli":
        return keras.losses.BinaryCrossentropy(from_logits=True)
    return GaussianNLL()


def output_units(likelihood, num_classes=None, num_targets=1):
    """Number of output units of the head: K, 1 or 2D.

    Args:
        likelihood: one of :data:`LIKELIHOODS`.
        num_classes: K ≥ 2 for ``"categorical"``.
        num_targets: D for ``"gaussian"``.

    Returns:
        int.
    """
    likelihood = check_choice(likelihood, "likelihood", LIKELIHOODS)
    return {"categorical": num_classes, "bernoulli": 1, "gaussian": 2 * num_targets}[likelihood]


#: The likelihoods of a head of K ≥ 2 outputs, by K mod 2 (a Gaussian head has 2 per target).
_FITTING = {0: ("categorical", "gaussian"), 1: ("categorical",)}


def check_units(likelihood, units):
    """Checks that a head of ``units`` outputs fits ``likelihood``.

    Args:
        likelihood: one of :data:`LIKELIHOODS`.
        units: number of outputs of the member model.

    Raises:
        ValueError: naming ``likelihood``, the unit count and the fix.
    """
    requirement = {
        "categorical": (units >= 2, f"be 'bernoulli' for a model with {units} output(s): "
                        "a categorical head needs K >= 2 logits (a softmax over one logit "
                        "is always 1)"),
        "bernoulli": (units == 1, f"be {' or '.join(map(repr, _FITTING[units % 2]))} for a "
                      f"model with {units} outputs: a bernoulli head has one logit "
                      "p(y=1|x) = sigmoid(f(x))"),
        "gaussian": (units % 2 == 0, "be 'categorical' or 'bernoulli' for a model with "
                     f"{units} outputs: a gaussian head [mean, log variance] has an even "
                     "number of outputs (2 per target)"),
    }
    fits, text = requirement[check_choice(likelihood, "likelihood", LIKELIHOODS)]
    if not fits:
        raise argument_error("likelihood", text, likelihood)


def from_loss(loss):
    """The likelihood a (serialized) Keras loss implies, or None if unknown.

    Args:
        loss: a loss object or function, its name (``"binary_crossentropy"``)
            or its serialized dict (as stored in a compile config).

    Returns:
        ``"bernoulli"`` for binary cross-entropy, ``"categorical"`` for
        (sparse) categorical cross-entropy, ``"gaussian"`` for
        :class:`GaussianNLL`, else None (a multi-output model's list or dict
        of several losses too: no one head).
    """
    leaves = loss_leaves(loss)
    if len(leaves) != 1:  # none, or one per output of a multi-output model
        return None
    loss = leaves[0]
    if not isinstance(loss, (str, dict)):
        loss = keras.saving.serialize_keras_object(loss)
    text = str(loss).lower()
    for key, likelihood in (("binary", "bernoulli"), ("categorical", "categorical"),
                            ("gaussian", "gaussian")):
        if key in text:
            return likelihood
    return None


def configured_from_logits(item):
    """The ``from_logits`` a loss or metric is configured with.

    Args:
        item: a loss or metric object, or its serialized dict (a compile config's).

    Returns:
        True or False, or None for one without that setting (a name, a function).
    """
    if isinstance(item, dict):
        config = item.get("config")
    else:
        config = item.get_config() if hasattr(item, "get_config") else None
    return config.get("from_logits") if isinstance(config, dict) else None


def loss_leaves(loss):
    """The losses in ``compile``'s ``loss``: one, or a multi-output model's list or dict.

    Args:
        loss: ``compile``'s ``loss`` (a serialized loss, a dict with a
            ``class_name``, is one loss).

    Returns:
        list of the losses, None left out.
    """
    if isinstance(loss, (list, tuple)) or (isinstance(loss, dict) and "class_name" not in loss):
        items = loss.values() if isinstance(loss, dict) else loss
        return [leaf for item in items for leaf in loss_leaves(item)]
    return [] if loss is None else [loss]


def _loss_name(loss):
    """A loss (object, function, name or serialized dict) as it reads in a message."""
    if isinstance(loss, str):
        return loss
    if not isinstance(loss, dict):
        loss = keras.saving.serialize_keras_object(loss)
    if isinstance(loss, dict):
        config = loss.get("config")
        return str(config.get("name", loss.get("class_name")) if isinstance(config, dict)
                   else config or loss.get("class_name"))
    return str(loss)


def infer(units, loss=None):
    """The likelihood of a model: from its loss, else from its output units.

    Args:
        units: number of output units of the model.
        loss: the model's loss (object, name or serialized), or None when
            the model was not compiled with one.

    Returns:
        One of :data:`LIKELIHOODS`: the loss's (:func:`from_loss`), or
        without a loss ``"bernoulli"`` for one unit and ``"categorical"``
        otherwise.

    Raises:
        ValueError: naming ``likelihood`` when ``loss`` names none of
            them (a mean squared error, a custom potential): what the
            outputs are cannot be told, so the caller must say it.
    """
    if loss is None:
        return "bernoulli" if units == 1 else "categorical"
    likelihood = from_loss(loss)
    if likelihood is None:
        raise ValueError(
            f"`likelihood` must be given: the model was compiled with loss "
            f"{_loss_name(loss)!r}, which is not the negative log-likelihood of a head "
            f"keras_bnn can average ({', '.join(map(repr, LIKELIHOODS))}: the losses of "
            "kb.likelihoods.loss_for); pass likelihood= to say what the outputs are. A mean "
            "squared error is a Gaussian of fixed variance: for regression use "
            "kb.likelihoods.GaussianNLL() on a [mean, log variance] head.")
    return likelihood


#: Names of the output activations that turn logits into probabilities.
_SQUASHING = ("softmax", "sigmoid", "log_softmax")


def _output_layers(model):
    """The layers that compute a functional model's outputs (inside nested functional
    models and Sequentials); none for a model without a graph."""
    try:
        operations = [output._keras_history.operation for output in model.outputs]
    except (AttributeError, TypeError, ValueError):
        return []
    return [layer for operation in operations for layer in (
        _output_layers(operation) if isinstance(operation, keras.Model)
        and operation is not model else [operation])]


#: Loss reductions that make the compiled loss the batch mean the potential needs.
MEAN_REDUCTIONS = ("sum_over_batch_size", "mean", "mean_with_sample_weight")


def check_loss_reduction(loss):
    """Refuses a loss whose value on a batch is not a mean over its examples.

    The potential is ``U(θ) = n·(batch mean of ℓ_i) − log p(θ)``: a loss with
    ``reduction="sum"`` made it ``n·Σ_batch ℓ_i``, the likelihood b times too
    strong for batches of b, and ``"none"`` (or None) a vector whose gradient
    is that sum as well, while ``nll`` logged the mean: a posterior far too
    narrow, silently. ``"mean_with_sample_weight"`` divides by the batch's sum
    of weights (the weights normalised within each batch).

    Args:
        loss: the loss passed to ``compile`` (object, function, name, or a
            structure of them), or None. Only objects with a ``reduction``
            are read; Keras gives functions and names its default mean.

    Raises:
        ValueError: naming ``loss`` and the allowed reductions.
    """
    for item in keras.tree.flatten(loss):
        reduction = getattr(item, "reduction", MEAN_REDUCTIONS[0])
        if reduction not in MEAN_REDUCTIONS:
            raise argument_error(
                "loss", f"average over the batch, reduction one of "
                f"{', '.join(map(repr, MEAN_REDUCTIONS))} (the potential is n·mean NLL of "
                "the batch; a sum or an unreduced loss makes the likelihood batch-size times "
                "too strong)", loss, "BayesianModel.compile",
                got=f"{_loss_name(item)!r} with reduction={reduction!r}")


def normalises_weights(loss):
    """Whether ``loss`` divides a batch's weighted sum by its sum of weights.

    ``reduction="mean_with_sample_weight"``: ``Σ_batch w_i·ℓ_i / Σ_batch w_i``,
    the weights normalised within each batch (their mean does not scale the
    likelihood). A multi-output model's losses do when each of them does.

    Args:
        loss: the loss passed to ``compile`` (``model.loss``): one, or a
            list or dict of them (:func:`loss_leaves`).

    Returns:
        bool.
    """
    leaves = loss_leaves(loss)
    return bool(leaves) and all(
        getattr(leaf, "reduction", None) == "mean_with_sample_weight" for leaf in leaves)


#: The losses of a Gaussian head: a model's, and an ensemble's mixture.
_GAUSSIAN_LOSSES = (GaussianNLL, PredictiveGaussianNLL)


def check_ensemble_scoring(arguments, likelihood):
    """Refuses ``compile`` arguments that would misread a posterior ensemble's output.

    A :class:`keras_bnn.PosteriorEnsemble` outputs the predictive
    probabilities p̄ (not logits) or, for ``"gaussian"``, the moment-matched
    ``[mean, log variance]`` of its mixture, while its ``evaluate`` feeds a
    ``"gaussian"`` ensemble's loss the members' ``[N, S, 2D]`` outputs
    (:class:`PredictiveGaussianNLL`: the mixture's NLL). A
    :class:`GaussianNLL` loss is replaced by a :class:`PredictiveGaussianNLL`
    of its name and reduction (until 2026-11-29 it scored the moment-matched
    Gaussian). A ``"gaussian"`` ensemble's metrics read its output: Keras'
    own compare ``y`` with all of ``[mean, log variance]``, and a Gaussian
    NLL there would score the moment-matched Gaussian, not the mixture.

    Args:
        arguments: the ensemble's ``compile`` arguments by name.
        likelihood: the ensemble's likelihood, one of :data:`LIKELIHOODS`.

    Returns:
        ``arguments``, a ``"gaussian"`` ensemble's ``GaussianNLL`` loss replaced.

    Raises:
        ValueError: naming ``loss``, ``metrics`` or ``weighted_metrics`` for
            one with ``from_logits=True``; ``loss`` for a ``"gaussian"``
            ensemble's loss that is not a Gaussian NLL, and for a Gaussian NLL
            of another ensemble; ``metrics`` or ``weighted_metrics`` for a
            ``"gaussian"`` ensemble's Keras metric or Gaussian NLL.
    """
    owner = "PosteriorEnsemble.compile"
    for name in ("loss", "metrics", "weighted_metrics"):
        for item in keras.tree.flatten(arguments.get(name)):
            if configured_from_logits(item):
                raise argument_error(
                    name, "score the ensemble's output, the predictive probabilities "
                    "p̄ (not logits): from_logits=False, e.g. kb.likelihoods.PredictiveNLL()",
                    item, owner, got=f"{type(item).__name__}(from_logits=True)")
            if name != "loss" and likelihood == "gaussian" and (
                    isinstance(item, _GAUSSIAN_LOSSES) or _keras_own(item)):
                raise argument_error(
                    name, "be metrics of your own for a gaussian ensemble: they read its "
                    "output, the moment-matched [mean, log variance] (Keras' metrics compare y "
                    "with all of it; the mixture's NLL is the loss, "
                    "kb.likelihoods.PredictiveGaussianNLL())", item, owner)
    loss = arguments.get("loss")
    if likelihood != "gaussian" and isinstance(loss, _GAUSSIAN_LOSSES):
        raise argument_error(
            "loss", f"score a {likelihood} ensemble's predictive probabilities, e.g. "
            "kb.likelihoods.PredictiveNLL() (a Gaussian NLL is a gaussian ensemble's)",
            loss, owner)
    if likelihood == "gaussian" and loss is not None and not isinstance(loss, _GAUSSIAN_LOSSES):
        raise argument_error(
            "loss", "be kb.likelihoods.PredictiveGaussianNLL() (or GaussianNLL(), which "
            "it replaces) for a gaussian ensemble: the NLL of the members' mixture (another "
            "loss would read the log variances as predictions)", loss, owner)
    if type(loss) is GaussianNLL:
        arguments = dict(arguments, loss=PredictiveGaussianNLL(**loss.get_config()))
    return arguments


def _keras_own(metric):
    """Whether a metric (object, function or name) is one of Keras' own."""
    resolved = keras.metrics.get(metric) if isinstance(metric, str) else metric
    return str(getattr(resolved, "__module__", "")).startswith("keras.")


def check_logit_head(model, loss):
    """Refuses a model that outputs probabilities, or a loss that expects them.

    Every keras_bnn model outputs the raw parameters of its likelihood
    (logits for a classifier, module docstring): the posterior predictive
    ``p̄ = (1/S) Σ_s softmax f(x;θ_s)``, the metrics and the exports apply the
    softmax or sigmoid themselves. A Keras head that ends in ``softmax`` or
    ``sigmoid`` would be squashed twice (measured on digits: ensemble NLL
    1.69 against 0.40 for its members' own outputs), and a cross-entropy
    with ``from_logits=False`` trains a logit head as if it gave
    probabilities.

    Args:
        model: the model being compiled (its output layers are read when it
            has a graph: functional, Sequential, or either nested).
        loss: the loss passed to ``compile`` (object, function, name, or a
            multi-output model's list or dict of them), or None.

    Raises:
        ValueError: naming ``loss`` for a cross-entropy without
            ``from_logits=True``, or ``model`` for an output layer whose
            activation is a softmax or sigmoid.
    """
    owner = "BayesianModel.compile"
    for leaf in loss_leaves(loss):
        if from_loss(leaf) not in ("categorical", "bernoulli"):
            continue
        if not configured_from_logits(leaf):
            fix = ("SparseCategoricalCrossentropy" if from_loss(leaf) == "categorical"
                   else "BinaryCrossentropy")
            raise argument_error(
                "loss", f"take logits: keras_bnn models output logits (ensembles, metrics "
                f"and exports apply the softmax or sigmoid themselves); use "
                f"keras.losses.{fix}(from_logits=True) and an output layer without "
                "activation", leaf, owner, got=f"{_loss_name(leaf)!r} (from_logits=False)")
    for layer in _output_layers(model):
        _check_logit_layer(model, layer, owner)


def _check_logit_layer(model, layer, owner):
    """Refuses an output layer whose activation squashes logits (:func:`check_logit_head`)."""
    activation = getattr(layer, "activation", None)
    name = "softmax" if isinstance(layer, keras.layers.Softmax) else getattr(
        activation, "__name__", None)
    if name in _SQUASHING:
        raise argument_error(
            "model", f"output logits, not probabilities: ensembles, metrics and exports "
            f"apply the softmax or sigmoid themselves, so a {name} output would be applied "
            f"twice; remove the activation of the output layer (activation=None) and use a "
            f"loss with from_logits=True", model, owner,
            got=f"output layer {layer.name!r} with activation {name!r}")


#: Metric names that Keras resolves, for a one-unit output, to a 0.5 threshold.
_BINARY_ACCURACY_NAMES = ("accuracy", "acc", "binary_accuracy")


def head_metrics(metrics, loss, owner="BayesianModel.compile"):
    """``compile``'s metrics for a model that outputs its likelihood's parameters.

    Keras reads a one-unit output's ``"accuracy"`` as ``BinaryAccuracy`` at a
    threshold of 0.5, a probability: on a Bernoulli logit it counted
    ``f > 0.5`` (p > 0.62) as class 1 (breast_cancer: 0.970 logged against a
    true 0.982). Such a name becomes ``BinaryAccuracy(threshold=0.0)`` under
    the same name (f > 0 ⇔ p > 0.5). Refused, since they would log wrong
    numbers without an error: a metric configured for probabilities
    (``from_logits=False``: ``AUC``, the cross-entropies), a Bernoulli
    model's ``BinaryAccuracy`` at another threshold than 0, and any of
    Keras' own metrics (``"mae"``, ``RootMeanSquaredError``) for a Gaussian
    head, whose output ``[μ, log σ²]`` they would compare with ``y`` as a
    whole (with ``y`` of shape [N, 1] they broadcast, log variances included).

    Args:
        metrics: ``compile``'s ``metrics`` or ``weighted_metrics`` (a list,
            or a list or dict of lists per output), or None.
        loss: ``compile``'s loss (:func:`from_loss` reads the likelihood of
            each output's, paired with its metrics).
        owner: the method, for the messages.

    Returns:
        ``metrics``, its accuracy names replaced for a Bernoulli model.

    Raises:
        ValueError: naming ``metrics`` for a metric that misreads the head.
    """
    likelihood = from_loss(loss)

    def checked(metric):
        if likelihood == "bernoulli" and metric in _BINARY_ACCURACY_NAMES:
            return keras.metrics.BinaryAccuracy(name=metric, threshold=0.0)
        if likelihood == "gaussian" and _keras_own(metric):
            raise argument_error(
                "metrics", "score the Gaussian head's [mean, log variance] output: Keras' "
                "own metrics compare y with all of it; score the ensemble with "
                "kb.metrics.evaluate_gaussian, or pass a metric of your own", metric, owner)
        config = metric.get_config() if hasattr(metric, "get_config") else {}
        if configured_from_logits(metric) is False or (
                likelihood == "bernoulli" and isinstance(metric, keras.metrics.BinaryAccuracy)
                and config.get("threshold") != 0.0):
            raise argument_error(
                "metrics", "read logits, as the model outputs them: from_logits=True, or "
                "BinaryAccuracy(threshold=0.0) (p > 0.5); the ensembles' and kb.metrics' "
                "scores read probabilities", metric, owner,
                got=f"{type(metric).__name__}({config.get('name')!r}) of probabilities")
        return metric

    if isinstance(metrics, dict):  # per output name, as the losses
        return {name: head_metrics(value, _output_loss(loss, name), owner)
                for name, value in metrics.items()}
    if isinstance(metrics, (list, tuple)) and metrics and all(
            isinstance(item, (list, tuple, type(None))) for item in metrics):  # per output
        return type(metrics)(head_metrics(item, _output_loss(loss, index), owner)
                             for index, item in enumerate(metrics))
    if isinstance(metrics, (list, tuple)):
        return type(metrics)(checked(item) for item in metrics)
    return metrics if metrics is None else checked(metrics)


def _output_loss(loss, key):
    """The loss of one output (``key``: its name, or its index) in a multi-output
    model's ``loss``; ``loss`` itself where it is one for all."""
    if isinstance(loss, dict) and "class_name" not in loss:
        return loss.get(key)
    if isinstance(loss, (list, tuple)) and isinstance(key, int) and key < len(loss):
        return loss[key]
    return loss
