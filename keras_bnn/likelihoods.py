"""Likelihoods: which output head a model has, its loss, and how to tell.

A keras_bnn model outputs the parameters of p(y|x,θ) (never probabilities):

* ``"categorical"``: K ≥ 2 logits, p(y=k|x,θ) = softmax(f(x;θ))_k; loss
  ``SparseCategoricalCrossentropy(from_logits=True)``.
* ``"bernoulli"``: one logit, p(y=1|x,θ) = sigmoid(f(x;θ)); loss
  ``BinaryCrossentropy(from_logits=True)`` (labels 0/1).
* ``"gaussian"``: ``[μ, log σ²]`` (2D units for D targets),
  p(y|x,θ) = N(y; μ, σ²); loss :class:`GaussianNLL`.

:func:`infer` reads the likelihood from a compiled model's loss (or from the
loss recorded in a :class:`keras_bnn.SampleStore`), so that
:meth:`keras_bnn.PosteriorEnsemble.from_store` needs no ``likelihood=``.
"""

import math

import keras
from keras import ops

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
        y_true = ops.reshape(ops.cast(y_true, y_pred.dtype), ops.shape(mean))
        squared = ops.square(y_true - mean) * ops.exp(-log_variance)
        return 0.5 * ops.sum(_LOG_2PI + log_variance + squared, axis=-1)

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
        :class:`GaussianNLL`, else None.
    """
    if loss is None:
        return None
    if not isinstance(loss, (str, dict)):
        loss = keras.saving.serialize_keras_object(loss)
    text = str(loss).lower()
    for key, likelihood in (("binary", "bernoulli"), ("categorical", "categorical"),
                            ("gaussian", "gaussian")):
        if key in text:
            return likelihood
    return None


def infer(units, loss=None):
    """The likelihood of a model: from its loss, else from its output units.

    Args:
        units: number of output units of the model.
        loss: the model's loss (object, name or serialized), if known.

    Returns:
        One of :data:`LIKELIHOODS`: the loss's (:func:`from_loss`) when it
        names one, else ``"bernoulli"`` for one unit and ``"categorical"``
        otherwise.
    """
    return from_loss(loss) or ("bernoulli" if units == 1 else "categorical")
