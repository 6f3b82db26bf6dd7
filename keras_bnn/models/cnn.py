"""A small convolutional network with priors for 28×28 images."""

import keras

from keras_bnn import layers
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.validation import argument_error, check_int, check_shape


def cnn(
    input_shape,
    num_classes,
    filters=(32, 64),
    kernel_size=5,
    dense=256,
    activation="relu",
    kernel_prior="he_normal",
    bias_prior="normal",
    name="cnn",
):
    """Builds the two-convolution network used for Fashion-MNIST.

    ``[Conv k×k (same) – act – MaxPool 2×2] × len(filters) – Flatten –
    Dense(dense) – act – Dense(num_classes)``: the layout of the convolutional
    network of Fortuin et al. (2022, "Bayesian neural network priors
    revisited") on (Fashion-)MNIST, every weight under a prior.

    Args:
        input_shape: ``(height, width, channels)`` of one image.
        num_classes: number of output logits.
        filters: output channels of each convolution.
        kernel_size: side of the square convolution windows.
        dense: width of the hidden dense layer.
        activation: hidden activation.
        kernel_prior: prior on every kernel (default ``HeNormal(1.0)``, with
            the convolutions' fan-in ``k·k·channels``).
        bias_prior: prior on every bias (default ``Normal(0, 1)``).
        name: model name.

    Returns:
        A :class:`keras_bnn.BayesianModel` that outputs logits.

    Raises:
        ValueError: naming the argument, for a non-positive count or size,
            a ``filters`` that is not a tuple or list (an int such as 32 too),
            an ``input_shape`` that is not an image ``(h, w, c)`` or is
            smaller than ``2^len(filters)`` in height or width (the poolings
            would leave nothing), or an unknown prior.
    """
    num_classes = check_int(num_classes, "num_classes", 1, owner="cnn")
    input_shape = check_shape(input_shape, "input_shape", 3,
                              "(height, width, channels) of ints >= 1", "cnn")
    if not isinstance(filters, (tuple, list)):
        raise argument_error("filters", "be a tuple or list of channel counts, e.g. (32, 64)",
                             filters, "cnn")
    filters = tuple(check_int(f, f"filters[{i}]", 1, owner="cnn") for i, f in enumerate(filters))
    smallest = 2 ** len(filters)
    if min(input_shape[:2]) < smallest:
        raise argument_error(
            "input_shape", f"have a height and width >= 2^len(filters) = {smallest} (each of "
            f"the {len(filters)} max-poolings halves them, rounding down)", input_shape, "cnn")
    kernel_size = check_int(kernel_size, "kernel_size", 1, owner="cnn")
    dense = check_int(dense, "dense", 1, owner="cnn")
    priors = dict(kernel_prior=kernel_prior, bias_prior=bias_prior)
    inputs = keras.Input(shape=input_shape, name="inputs")
    x = inputs
    for i, channels in enumerate(filters):
        x = layers.Conv2D(channels, kernel_size, padding="same", activation=activation,
                          name=f"conv_{i}", **priors)(x)
        x = keras.layers.MaxPooling2D(2, name=f"pool_{i}")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = layers.Dense(dense, activation=activation, name="dense", **priors)(x)
    logits = layers.Dense(num_classes, name="logits", **priors)(x)
    return BayesianModel(inputs, logits, name=name)
