"""Weight-normalised dense and convolution layers (ATMC paper, eq. 12-13).

Each output feature ``i`` has a direction ``φ_d^(i)`` and a scale ``φ_s^(i)``
and the layer uses the effective weight

    θ^(i) = φ_s^(i) · φ_d^(i) / ‖φ_d^(i)‖,

with the norm over all axes but the last (the fan-in of feature ``i``). The
output does not depend on the length of ``φ_d``; the default direction prior
``UnitNormDirection`` keeps that length near 1 so a sampler's effective step
size does not drift, and the scale prior (group Laplace, b = 5, as in the
paper) is where the model's preference for small or sparse features lives.
"""

import keras
from keras import ops

from keras_bnn import priors
from keras_bnn.layers.prior_aware import PriorAwareMixin
from keras_bnn.validation import argument_error, check_bool, check_int

# Lower bound on ‖φ_d‖² so an all-zero direction gives a zero weight, not NaN.
# It only acts below ‖φ_d‖ = 1e-6, far from the prior's mass near 1.
_MIN_SQUARED_NORM = 1e-12


#: Priors of a weight-normalised layer: unit-norm direction prior (eq. 13),
#: group Laplace (b = 5) on the scales as in the paper's experiments, and
#: ``Normal(0, 1)`` on the bias.
WEIGHT_NORM_PRIOR_ARGUMENTS = {
    "direction_prior": (None, priors.UnitNormDirection),
    "scale_prior": (None, priors.GroupLaplace),  # b = 5 by default
    "bias_prior": (None, priors.Normal),
}


class _WeightNorm(PriorAwareMixin, keras.layers.Layer):
    """Shared weight-norm machinery; subclasses define the linear map.

    Subclasses implement ``_direction_shape(input_shape)`` (the shape of
    ``φ_d``, output features last) and ``_linear(inputs, kernel)``.
    """

    prior_arguments = WEIGHT_NORM_PRIOR_ARGUMENTS
    #: The constructor argument holding the number of output features.
    units_argument = "units"

    def __init__(
        self,
        units,
        activation=None,
        use_bias=True,
        direction_initializer="lecun_normal",
        scale_initializer="ones",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = check_int(units, self.units_argument, 1, owner=type(self).__name__)
        self.activation = keras.activations.get(activation)
        self.use_bias = check_bool(use_bias, "use_bias", type(self).__name__)
        self.direction_initializer = keras.initializers.get(direction_initializer)
        self.scale_initializer = keras.initializers.get(scale_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        self.direction = self._add_prior_weight(
            "direction_prior",
            "direction",
            self._direction_shape(input_shape),
            self.direction_initializer,
        )
        self.scale = self._add_prior_weight(
            "scale_prior", "scale", (self.units,), self.scale_initializer
        )
        self.bias = (
            self._add_prior_weight(
                "bias_prior", "bias", (self.units,), self.bias_initializer
            )
            if self.use_bias
            else None
        )

    @property
    def kernel(self):
        """The effective weight ``θ = φ_s · φ_d / ‖φ_d‖`` (shape of ``φ_d``)."""
        reduce_axes = tuple(range(len(self.direction.shape) - 1))
        squared_norm = ops.sum(ops.square(self.direction), axis=reduce_axes)
        inverse_norm = ops.rsqrt(ops.maximum(squared_norm, _MIN_SQUARED_NORM))
        return ops.multiply(self.direction, ops.multiply(self.scale, inverse_norm))

    def call(self, inputs):
        outputs = self._linear(inputs, ops.cast(self.kernel, inputs.dtype))
        if self.bias is not None:
            outputs = ops.add(outputs, ops.cast(self.bias, outputs.dtype))
        return self.activation(outputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            activation=keras.activations.serialize(self.activation),
            use_bias=self.use_bias,
            direction_initializer=keras.initializers.serialize(
                self.direction_initializer
            ),
            scale_initializer=keras.initializers.serialize(self.scale_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config


@keras.saving.register_keras_serializable(package="keras_bnn")
class WeightNormDense(_WeightNorm):
    """Weight-normalised dense layer: ``y = activation(x·θ + b)``.

    ``θ[:, i] = φ_s[i] · φ_d[:, i] / ‖φ_d[:, i]‖`` with ``φ_d`` of shape
    ``(in, units)`` and ``φ_s`` of shape ``(units,)``.

    Args:
        units: output dimension.
        activation: activation function (default: linear).
        use_bias: whether to add ``b``.
        direction_prior: prior on ``φ_d``; default ``UnitNormDirection()``
            (``∝ exp(-d/2·(‖φ_d^(i)‖²-1)²)`` per feature, unnormalised).
        scale_prior: prior on ``φ_s``; default ``GroupLaplace(5)``, which on
            the rank-1 scale vector (groups of size 1) is ``Laplace(5)``.
        bias_prior: prior on ``b``; default ``Normal(0, 1)``.
        direction_initializer: default ``"lecun_normal"``, giving
            ``‖φ_d^(i)‖ ≈ 1``; with unit scales the effective weight then
            has the LeCun variance ``1/fan_in`` that SELU networks need.
        scale_initializer: default ``"ones"``.
        bias_initializer: default ``"zeros"``.
        **kwargs: base ``keras.layers.Layer`` arguments (``name``, ``dtype``).

    Raises:
        ValueError: for a ``units`` that is not an int >= 1, a ``use_bias``
            that is not True or False, an unknown prior, or (at build) a prior
            that does not fit its weight, naming the argument.
    """

    def _direction_shape(self, input_shape):
        return (input_shape[-1], self.units)

    def _linear(self, inputs, kernel):
        return ops.matmul(inputs, kernel)

    def get_config(self):
        config = super().get_config()
        config["units"] = self.units
        return config


@keras.saving.register_keras_serializable(package="keras_bnn")
class WeightNormConv2D(_WeightNorm):
    """Weight-normalised 2-D convolution: ``y = activation(conv2d(x, θ) + b)``.

    ``θ[..., i] = φ_s[i] · φ_d[..., i] / ‖φ_d[..., i]‖`` with ``φ_d`` of shape
    ``(kh, kw, in, filters)`` (one direction per filter, norm over
    ``kh·kw·in``). Inputs are channels-last ``(N, H, W, C)``.

    Args:
        filters: number of output channels.
        kernel_size: int or pair.
        strides: int or pair (default 1).
        padding: ``"valid"`` or ``"same"``.
        dilation_rate: int or pair (default 1).
        **kwargs: ``activation``, ``use_bias``, the priors and initializers of
            :class:`WeightNormDense`, and base layer arguments.

    Raises:
        ValueError: naming the argument, for a ``filters`` that is not an
            int >= 1, a ``kernel_size``, ``strides`` or ``dilation_rate`` that
            is not an int >= 1 or a pair of them (``dilation_rate`` 1 when
            ``strides`` > 1), a ``padding`` other than ``"valid"`` or
            ``"same"``, a ``use_bias`` that is not True or False, or an
            unknown prior; at build, for
            inputs that are not of rank 4 (naming the layer and the shape)
            or a prior that does not fit its weight.
    """

    units_argument = "filters"

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        dilation_rate=1,
        **kwargs,
    ):
        super().__init__(filters, **kwargs)
        owner = type(self).__name__
        self.kernel_size = _pair(kernel_size, "kernel_size", owner)
        self.strides = _pair(strides, "strides", owner)
        if not (isinstance(padding, str) and padding.lower() in ("valid", "same")):
            raise argument_error("padding", "be 'valid' or 'same' (in any case)", padding, owner)
        self.padding = padding.lower()
        self.dilation_rate = _pair(dilation_rate, "dilation_rate", owner)
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise argument_error("dilation_rate", "be 1 when `strides` > 1 (the convolution "
                                 "does not take both)", dilation_rate, owner)

    @property
    def filters(self):
        """Number of output channels."""
        return self.units

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise argument_error(
                "inputs", "be images of shape (batch, height, width, channels)", None,
                f"{type(self).__name__} {self.name!r}", got=f"shape {tuple(input_shape)}")
        super().build(input_shape)

    def _direction_shape(self, input_shape):
        return (*self.kernel_size, input_shape[-1], self.units)

    def compute_output_shape(self, input_shape):
        """The output shape, by Keras's rule for ``ops.conv`` (None where a size is unknown).

        Args:
            input_shape: ``(N, H, W, C)``, sizes possibly None.

        Returns:
            ``(N, H', W', filters)``.
        """
        kernel = keras.KerasTensor(self._direction_shape(input_shape))
        return self._linear(keras.KerasTensor(tuple(input_shape)), kernel).shape

    def _linear(self, inputs, kernel):
        return ops.conv(
            inputs,
            kernel,
            strides=self.strides,
            padding=self.padding,
            data_format="channels_last",
            dilation_rate=self.dilation_rate,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            filters=self.units,
            kernel_size=self.kernel_size,
            strides=self.strides,
            padding=self.padding,
            dilation_rate=self.dilation_rate,
        )
        return config


def _pair(value, name, owner):
    """``(a, b)`` from an int >= 1 or a pair of them, else the ValueError naming ``name``."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) == 2:
        try:
            return tuple(check_int(size, name, 1) for size in pair)
        except ValueError:
            pass  # refused below, with the whole value in the message
    raise argument_error(name, "be an int >= 1 or a pair of ints >= 1", value, owner)
