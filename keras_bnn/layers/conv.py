"""Prior-aware convolution layers."""

import keras

from keras_bnn.layers.dense import KERNEL_PRIOR_ARGUMENTS
from keras_bnn.layers.prior_aware import PriorAwareMixin


@keras.saving.register_keras_serializable(package="keras_bnn")
class Conv1D(PriorAwareMixin, keras.layers.Conv1D):
    """``keras.layers.Conv1D`` with priors on kernel and bias.

    ``y = activation(conv1d(x, W) + b)``; ``-log p(W) - log p(b)`` is added
    to ``layer.losses``.

    Args:
        filters: number of output channels.
        kernel_size: window length.
        kernel_prior: prior on ``W`` (``(k, in, filters)``); default
            ``HeNormal(1.0)`` with fan-in ``k·in`` (see
            :data:`keras_bnn.layers.dense.KERNEL_PRIOR_ARGUMENTS`).
        bias_prior: prior on ``b``; default ``Normal(0, 1)``.
        **kwargs: every other ``keras.layers.Conv1D`` argument except the
            ``*_regularizer`` ones.

    Raises:
        ValueError: for an unknown prior, a ``*_regularizer`` argument, or (at
            build) a prior that does not fit its weight, naming the argument.
    """

    prior_arguments = KERNEL_PRIOR_ARGUMENTS


@keras.saving.register_keras_serializable(package="keras_bnn")
class Conv2D(PriorAwareMixin, keras.layers.Conv2D):
    """``keras.layers.Conv2D`` with priors on kernel and bias.

    ``y = activation(conv2d(x, W) + b)``; ``-log p(W) - log p(b)`` is added
    to ``layer.losses``.

    Args:
        filters: number of output channels.
        kernel_size: window size.
        kernel_prior: prior on ``W`` (``(kh, kw, in, filters)``); default
            ``HeNormal(1.0)`` with fan-in ``kh·kw·in``.
        bias_prior: prior on ``b``; default ``Normal(0, 1)``.
        **kwargs: every other ``keras.layers.Conv2D`` argument except the
            ``*_regularizer`` ones.

    Raises:
        ValueError: for an unknown prior, a ``*_regularizer`` argument, or (at
            build) a prior that does not fit its weight, naming the argument.
    """

    prior_arguments = KERNEL_PRIOR_ARGUMENTS
