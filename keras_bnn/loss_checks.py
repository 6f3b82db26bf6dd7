"""The checks ``compile`` makes of a loss and metrics against the head they score.

A keras_bnn model outputs its likelihood's parameters (logits, or a Gaussian's
``[μ, log σ²]``: :mod:`keras_bnn.likelihoods`), and its potential needs the
batch mean of the loss. ``BayesianModel.compile`` refuses a head or loss that
reads probabilities (:func:`check_logit_head`), a loss that is not a batch
mean (:func:`check_loss_reduction`) and metrics that misread the head
(:func:`head_metrics`); ``PosteriorEnsemble.compile`` refuses what would
misread an ensemble's output (:func:`check_ensemble_scoring`).
"""

import keras

from keras_bnn.likelihoods import (GaussianNLL, PredictiveGaussianNLL, configured_from_logits,
                                   from_loss, loss_leaves, loss_name)
from keras_bnn.validation import argument_error


#: Names of the output activations that turn logits into probabilities.
_SQUASHING = ("softmax", "sigmoid", "log_softmax")


def output_layers(model):
    """The layers that compute a functional model's outputs.

    Args:
        model: a Keras model.

    Returns:
        list of layers, in the order of ``model.outputs`` (inside nested functional
        models and Sequentials: their output layers); empty for a model without a graph.
    """
    try:
        operations = [output._keras_history.operation for output in model.outputs]
    except (AttributeError, TypeError, ValueError):
        return []
    return [layer for operation in operations for layer in (
        output_layers(operation) if isinstance(operation, keras.Model)
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
                got=f"{loss_name(item)!r} with reduction={reduction!r}")


def normalises_weights(loss):
    """Whether ``loss`` divides a batch's weighted sum by its sum of weights.

    ``reduction="mean_with_sample_weight"``: ``Σ_batch w_i·ℓ_i / Σ_batch w_i``,
    the weights normalised within each batch (their mean does not scale the
    likelihood). A multi-output model's losses do when each of them does.

    Args:
        loss: the loss passed to ``compile`` (``model.loss``): one, or a
            list or dict of them (:func:`~keras_bnn.likelihoods.loss_leaves`).

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
    (:class:`~keras_bnn.likelihoods.PredictiveGaussianNLL`: the mixture's
    NLL). A :class:`~keras_bnn.likelihoods.GaussianNLL` loss is replaced by a
    ``PredictiveGaussianNLL`` of its name and reduction (until 2026-11-29 it
    scored the moment-matched Gaussian). A ``"gaussian"`` ensemble's metrics
    read its output: Keras' own compare ``y`` with all of ``[mean, log
    variance]``, and a Gaussian NLL there would score the moment-matched
    Gaussian, not the mixture.

    Args:
        arguments: the ensemble's ``compile`` arguments by name.
        likelihood: the ensemble's likelihood, one of
            :data:`~keras_bnn.likelihoods.LIKELIHOODS`.

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
                "activation", leaf, owner, got=f"{loss_name(leaf)!r} (from_logits=False)")
    for layer in output_layers(model):
        check_logit_layer(model, layer, owner)


def check_logit_layer(model, layer, owner, squashing=_SQUASHING):
    """Refuses an output layer whose activation squashes logits (:func:`check_logit_head`).

    Args:
        model: the model, for the message.
        layer: one of its output layers (:func:`output_layers`).
        owner: the function or method that checks, for the message.
        squashing: the activation names refused (default softmax, sigmoid, log-softmax).

    Raises:
        ValueError: naming ``model``, for an activation in ``squashing``.
    """
    activation = getattr(layer, "activation", None)
    name = "softmax" if isinstance(layer, keras.layers.Softmax) else getattr(
        activation, "__name__", None)
    if name in squashing:
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
        loss: ``compile``'s loss (:func:`~keras_bnn.likelihoods.from_loss`
            reads the likelihood of each output's, paired with its metrics).
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
