"""The check of ``fit(validation_data=(x, y, w))``'s and ``evaluate``'s array weights: their mean.

Split from :mod:`keras_bnn.train_size` with a warning category of its own: the
weights do not change the posterior (``train_size``'s
:class:`keras_bnn.train_size.TrainSizeWarning`), only what ``val_nll`` reads.
"""

import numpy as np

from keras_bnn import loss_terms
from keras_bnn.fit_data import array_examples
from keras_bnn.output_slots import output_paths
from keras_bnn.train_size import WEIGHT_MEAN_TOLERANCE, warn_at, weight_mean
from keras_bnn.loss_checks import normalises_weights


class ValidationWeightWarning(UserWarning):
    """``validation_data=(x, y, w)``'s (or ``evaluate``'s) weights do not average 1 over the
    loss's terms.

    Keras' validation loss (and ``evaluate``'s ``nll``) is
    ``val_nll = Σ m_i·w_i·ℓ_i / Σ m_i`` (``m_i``: the values the loss counts),
    so weights of mean ``w̄ = Σ m_i·w_i / Σ m_i`` make it read w̄ times the
    data's mean negative log-likelihood, not comparable with the training
    ``nll``. (Until 2026-11-29 issued as
    :class:`keras_bnn.train_size.TrainSizeWarning`, a category about
    ``train_size``.)
    """


def warn_on_validation_weights(model, validation, where, owner="fit(validation_data)"):
    """Warns when the array weights of ``validation_data=(x, y, w)`` (or of
    ``evaluate(x, y, sample_weight=w)``) do not average 1.

    Keras' validation loss is the weighted mean ``val_nll = Σ m_i·w_i·ℓ_i / Σ m_i``
    (``m_i``: the values the loss counts,
    :func:`keras_bnn.loss_terms.training_positions`), so weights of mean
    ``w̄ = Σ m_i·w_i / Σ m_i`` make it read w̄ times the data's mean negative
    log-likelihood. Checked as ``fit``'s own array weights (within
    :data:`keras_bnn.train_size.WEIGHT_MEAN_TOLERANCE`), not under a loss of reduction
    ``"mean_with_sample_weight"``; their shape is checked with the labels
    (:func:`keras_bnn.fit_data.check_fit_data`).

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        validation: ``fit``'s ``validation_data`` as a tuple (``(x, y, w)``;
            anything else passes), or ``evaluate``'s ``(x, y, sample_weight)``.
        where: the line that called ``fit`` (:func:`keras_bnn.train_size.call_site`).
        owner: what the data were given to: ``"fit(validation_data)"`` or ``"evaluate"``.

    Warns:
        ValidationWeightWarning: naming the weights (``owner``'s) and their mean.
    """
    if len(validation) < 3 or normalises_weights(model.loss):
        return
    x, y, weights = validation[:3]
    count = array_examples(x)
    if count is None or array_examples(weights) is None or count == 0:
        return
    counted = (loss_terms.training_positions(model, x, y, count) or (None,) * 3)[2]
    name, mean = weight_mean({"sample_weight": weights}, count, counted, output_paths(model, y),
                             f"{owner}'s sample_weight")
    if abs(mean - 1.0) > WEIGHT_MEAN_TOLERANCE:
        seen = f"the {count} {'validation ' if owner != 'evaluate' else ''}examples"
        if counted is not None:
            seen = f"the {np.sum(counted):.0f} loss terms of {seen}"
        warn_on_validation_mean(f"{owner}'s {name}", mean, seen, where,
                                "nll" if owner == "evaluate" else "val_nll")


def warn_on_validation_mean(name, mean, seen, where, logged="val_nll"):
    """Issues the :class:`ValidationWeightWarning` of validation weights whose mean is not 1.

    Args:
        name: the weights, as the message names them
            (``"fit(validation_data)'s sample_weight['bin']"``).
        mean: their mean over ``seen``.
        seen: what the mean is over (``"the 16 validation examples"``).
        where: the line that called ``fit`` (:func:`keras_bnn.train_size.call_site`).
        logged: the log that reads the weighted mean (``"val_nll"``, ``evaluate``'s ``"nll"``).

    Warns:
        ValidationWeightWarning: naming the weights and their mean.
    """
    warn_at(
        f"keras_bnn: {name} has mean {mean:.4g} over {seen}: "
        f"{logged} = (1/b)·Σ w_i·ℓ_i reads {mean:.4g} times their mean negative "
        "log-likelihood, not comparable with the training nll or with another weighting. "
        "Divide the weights by their mean (or compile the loss with "
        "reduction='mean_with_sample_weight') to reweight the examples among themselves.",
        ValidationWeightWarning, where)
