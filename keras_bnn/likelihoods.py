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
The checks ``compile`` makes of a loss and metrics against the head are
:mod:`keras_bnn.loss_checks`.
"""

import math

import keras
from keras import ops

from keras_bnn.keras_private import (get_keras_mask, get_tensor_attr, set_keras_mask,
                                     set_tensor_attr)
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


#: The attribute that marks a tensor as log-probabilities of each outcome
#: (:func:`mark_log_probabilities`), as Keras' ``_keras_mask`` marks padding.
_LOG_PROBABILITIES_ATTR = "_keras_bnn_log_probabilities_of_outcomes"


def mark_log_probabilities(log_probs):
    """Marks ``log_probs`` as log p̄ of each outcome: :class:`PredictiveNLL` reads it so.

    Keras' ``set_tensor_attr`` (as for ``_keras_mask``): the tensor itself
    says what it holds; an unmarked ``y_pred`` is read as probabilities.
    :meth:`keras_bnn.PosteriorEnsemble.call` marks the log p̄ it carries for
    ``evaluate``'s loss.

    Args:
        log_probs: ``[N, ..., K]``, or ``[N, ..., 2]`` for a Bernoulli head's y = 0, 1.

    Returns:
        ``log_probs``, marked.
    """
    set_tensor_attr(log_probs, _LOG_PROBABILITIES_ATTR, True)
    return log_probs


def floored_log_probabilities(probs):
    """log max(p, PROB_FLOOR) of each outcome, carrying the Keras mask of ``probs``.

    Args:
        probs: ``[N, ..., K]`` class probabilities, or ``[N, ..., 1]`` p(y=1).

    Returns:
        ``[N, ..., K]``, or ``[N, ..., 2]`` (y = 0, 1) for ``[N, ..., 1]``.
    """
    probs = ops.convert_to_tensor(probs)
    if probs.shape[-1] == 1:
        probs = ops.concatenate([1.0 - probs, probs], axis=-1)
    log_probs = ops.log(ops.maximum(probs, PROB_FLOOR))
    set_keras_mask(log_probs, get_keras_mask(probs))
    return log_probs


@keras.saving.register_keras_serializable(package="keras_bnn")
class PredictiveNLL(keras.losses.Loss):
    """Negative log-likelihood of predicted probabilities, as ``kb.metrics.nll`` scores it.

    The loss for :meth:`keras_bnn.PosteriorEnsemble.evaluate`, whose output
    is the predictive p̄ (probabilities, not logits): for ``y_pred`` ``[N, K]``
    class probabilities and integer labels, or ``[N, 1]`` p(y=1) and labels
    0/1, per example ``−log max(p̄_y, PROB_FLOOR)`` with
    :data:`keras_bnn.metrics.PROB_FLOOR` (float32 ``tiny``: at most 87.3 nats).
    An ensemble's ``evaluate`` gives it log p̄ of each outcome instead
    (marked by :func:`mark_log_probabilities`; ``[N, K]``, or ``[N, 2]`` for
    y = 0, 1), the log-mean-exp of the members' log-probabilities, and the
    loss is ``−log p̄_y``: exact where p̄ underflows float32 (members
    certain of a wrong class; until 2026-11-30 floored at 87.3 nats per
    example). ``call`` reads log-probabilities: ``__call__`` takes the
    floored log of an unmarked ``y_pred``. Keras' ``"sparse_categorical_crossentropy"``
    and ``"binary_crossentropy"`` clip p̄ to [ε, 1 − ε] (``keras.config.epsilon()``
    = 1e-7), so they charge at most 16.1 nats: a confidently wrong
    prediction costs less than it should.
    """

    def __init__(self, name="predictive_nll", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if not get_tensor_attr(y_pred, _LOG_PROBABILITIES_ATTR):
            y_pred = floored_log_probabilities(y_pred)
        return super().__call__(y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        """−log p_y of ``y_pred``, log p of each outcome ``[N, ..., K]`` (see the class)."""
        labels = ops.reshape(y_true, ops.shape(y_pred)[:-1])
        labels = ops.expand_dims(ops.cast(labels, "int32"), -1)
        return -ops.take_along_axis(y_pred, labels, axis=-1)[..., 0]

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


def loss_name(loss):
    """A loss as it reads in a message: its name, else its class's.

    Args:
        loss: a loss object or function, its name, or its serialized dict.

    Returns:
        str.
    """
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
            f"{loss_name(loss)!r}, which is not the negative log-likelihood of a head "
            f"keras_bnn can average ({', '.join(map(repr, LIKELIHOODS))}: the losses of "
            "kb.likelihoods.loss_for); pass likelihood= to say what the outputs are. A mean "
            "squared error is a Gaussian of fixed variance: for regression use "
            "kb.likelihoods.GaussianNLL() on a [mean, log variance] head.")
    return likelihood
