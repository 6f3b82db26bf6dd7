"""Prior-aware recurrent layer."""

import keras

from keras_bnn import priors
from keras_bnn.layers.prior_aware import PriorAwareMixin


@keras.saving.register_keras_serializable(package="keras_bnn")
class LSTM(PriorAwareMixin, keras.layers.LSTM):
    """``keras.layers.LSTM`` with priors on its three weights.

    Gates ``[i, f, c, o] = x_t·W + h_{t-1}·U + b`` as in Keras; the priors
    add ``-log p(W) - log p(U) - log p(b)`` to
    ``layer.losses``.

    Args:
        units: state size.
        kernel_prior: prior on ``W`` (``(in, 4·units)``); default
            ``HeNormal(1.0)`` (fan-in ``in``).
        recurrent_kernel_prior: prior on ``U`` (``(units, 4·units)``);
            default ``HeNormal(1.0)`` (fan-in ``units``).
        bias_prior: prior on ``b`` (``(4·units,)``); default ``Normal(0, 1)``.
        **kwargs: every other ``keras.layers.LSTM`` argument except the
            ``*_regularizer`` ones (``activity_regularizer`` is allowed).

    Raises:
        ValueError: for an unknown prior, a ``*_regularizer`` argument, or (at
            build) a prior that does not fit its weight, naming the argument.
    """

    prior_arguments = {
        "kernel_prior": ("kernel_regularizer", priors.HeNormal),
        "recurrent_kernel_prior": ("recurrent_regularizer", priors.HeNormal),
        "bias_prior": ("bias_regularizer", priors.Normal),
    }
