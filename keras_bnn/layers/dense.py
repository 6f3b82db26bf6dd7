"""Prior-aware fully connected layer."""

import keras

from keras_bnn import priors
from keras_bnn.layers.prior_aware import PriorAwareMixin

#: Default priors of a linear map: He-scaled Gaussian kernel, unit Gaussian bias.
#:
#: ``HeNormal(1.0)`` (σ = sqrt(2/fan_in)) is the variance under which a random
#: ReLU network keeps its activations at unit scale through every layer (He et
#: al., 2015), so prior draws stay non-degenerate at any width and depth. A
#: fixed ``Normal(0, 1)`` kernel instead multiplies the activation scale by
#: about sqrt(fan_in) per layer, which is what collapses the prior predictive
#: of deep nets onto one class (Wenzel et al., 2020). A bias adds the same
#: offset whatever the fan-in, so ``Normal(0, 1)``, on the scale of the
#: unit-variance activations, is weakly informative for it.
KERNEL_PRIOR_ARGUMENTS = {
    "kernel_prior": ("kernel_regularizer", priors.HeNormal),
    "bias_prior": ("bias_regularizer", priors.Normal),
}


@keras.saving.register_keras_serializable(package="keras_bnn")
class Dense(PriorAwareMixin, keras.layers.Dense):
    """``keras.layers.Dense`` with priors: ``y = activation(x·W + b)``.

    ``-log p(W) - log p(b)`` is added to
    ``layer.losses``.

    Args:
        units: output dimension.
        kernel_prior: prior on ``W`` (``(in, units)``); default
            ``HeNormal(1.0)``. A prior, a name, a config or ``None``.
        bias_prior: prior on ``b`` (``(units,)``); default ``Normal(0, 1)``.
        **kwargs: every other ``keras.layers.Dense`` argument except
            ``kernel_regularizer``/``bias_regularizer``.

    Raises:
        ValueError: for an unknown prior, a ``*_regularizer`` argument, or (at
            build) a prior that does not fit its weight, naming the argument.
    """

    prior_arguments = KERNEL_PRIOR_ARGUMENTS
