"""Multilayer perceptron with priors (the cold-posterior paper's MLP)."""

import keras

from keras_bnn import layers
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.validation import argument_error, check_int, check_shape


def mlp(
    input_shape,
    num_classes,
    hidden=(128, 128, 128),
    activation="relu",
    kernel_prior="he_normal",
    bias_prior="normal",
    name="mlp",
):
    """Builds ``logits = W_L·act(... act(W_1·flatten(x) + b_1) ...) + b_L``.

    Args:
        input_shape: shape of one example; inputs of rank > 1 are flattened.
        num_classes: number of output logits.
        hidden: widths of the hidden layers, a tuple or list (default three
            of 128: the cold-posterior paper's depth-3, width-128 MLP; ``()``
            for none).
        activation: hidden activation.
        kernel_prior: prior on every kernel (default ``HeNormal(1.0)``).
        bias_prior: prior on every bias (default ``Normal(0, 1)``).
        name: model name.

    Returns:
        A :class:`keras_bnn.BayesianModel` whose outputs are logits (no
        softmax): compile it with a ``from_logits=True`` loss.

    Raises:
        ValueError: naming the argument, for an ``input_shape`` that is not
            a tuple of ints >= 1, a non-positive ``num_classes``, a ``hidden``
            that is not a tuple or list (an int such as 128 too), a
            non-positive hidden width, or an unknown prior.
    """
    input_shape = check_shape(input_shape, "input_shape",
                              layout="a tuple of ints >= 1, e.g. (784,)", owner="mlp")
    num_classes = check_int(num_classes, "num_classes", 1, owner="mlp")
    if not isinstance(hidden, (tuple, list)):
        raise argument_error("hidden", "be a list of layer widths, e.g. [100, 100]", hidden,
                             "mlp")
    hidden = tuple(check_int(width, f"hidden[{i}]", 1, owner="mlp")
                   for i, width in enumerate(hidden))
    priors = dict(kernel_prior=kernel_prior, bias_prior=bias_prior)
    inputs = keras.Input(shape=input_shape, name="inputs")
    x = keras.layers.Flatten(name="flatten")(inputs) if len(input_shape) > 1 else inputs
    for i, width in enumerate(hidden):
        x = layers.Dense(width, activation=activation, name=f"dense_{i}", **priors)(x)
    logits = layers.Dense(num_classes, name="logits", **priors)(x)
    return BayesianModel(inputs, logits, name=name)
