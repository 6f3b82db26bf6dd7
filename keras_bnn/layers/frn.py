"""Filter Response Normalization and the Thresholded Linear Unit.

Singh & Krishnan (2019), used instead of BatchNorm in the cold-posterior
ResNet-20 (Wenzel et al., 2020): it normalises each example on its own, so it
adds no minibatch noise and keeps the likelihood a function of the weights.
Inputs are channels-last ``(N, ..., C)``; the statistics are over the axes
between batch and channel (H, W for images), so there must be at least one,
with more than one position (over a single one the output is a sign function).
"""

import functools

import keras
from keras import ops

from keras_bnn import priors
from keras_bnn.layers.prior_aware import PriorAwareMixin
from keras_bnn.validation import argument_error, check_bool, check_positive

#: Compute dtypes whose statistics FRN computes in float32.
_HALF_DTYPES = ("float16", "bfloat16")


@keras.saving.register_keras_serializable(package="keras_bnn")
class TLU(PriorAwareMixin, keras.layers.Layer):
    """Thresholded linear unit ``z = max(x, τ)``, one learned τ per channel.

    Args:
        tau_prior: prior on ``τ`` (``(C,)``, initialised at 0); default
            ``Normal(0, 1)``.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Raises:
        ValueError: for an unknown prior, or (at build) a prior that does not
            fit ``τ``, naming the argument.
    """

    prior_arguments = {"tau_prior": (None, priors.Normal)}

    def build(self, input_shape):
        self.tau = self._add_prior_weight("tau_prior", "tau", (input_shape[-1],), "zeros")

    def call(self, inputs):
        # Where x = τ (zero inputs at τ = 0) the gradient goes to x, on every backend:
        # JAX's maximum split it half and half there, TensorFlow's gave it all to x.
        tau = ops.cast(self.tau, inputs.dtype)
        return ops.where(ops.greater_equal(inputs, tau), inputs, tau)


@keras.saving.register_keras_serializable(package="keras_bnn")
class FRN(TLU):
    """Filter Response Normalization followed by a TLU.

    ``ν² = mean(x², over H, W)``, ``y = γ · x / sqrt(ν² + ε) + β`` and
    ``z = max(y, τ)``, with ``γ, β, τ`` of shape ``(C,)``. Under a mixed
    dtype policy (``mixed_float16``, ``mixed_bfloat16``) ``y`` is computed
    in float32 and cast to the compute dtype.

    Args:
        epsilon: ε > 0 (default 1e-6, as in the FRN paper).
        use_tlu: apply the TLU (default). ``False`` gives the plain
            normalisation ``y``, for where BatchNorm had no activation after
            it (before a residual sum); then there is no ``τ``.
        gamma_prior: prior on ``γ`` (initialised at 1); default
            ``Normal(1, 1)``, centred on the identity scaling.
        beta_prior: prior on ``β`` (initialised at 0); default ``Normal(0, 1)``.
        tau_prior: prior on ``τ`` (initialised at 0); default ``Normal(0, 1)``.
        **kwargs: base ``keras.layers.Layer`` arguments.

    Raises:
        ValueError: for a non-positive ``epsilon``, a ``use_tlu`` that is not
            True or False, an unknown prior, or (at
            build) a prior that does not fit its weight, naming the argument;
            at build, for inputs of rank < 3 such as ``(N, C)``, naming the
            layer and the shape (with no spatial axis ``ν² = x²`` and the
            output is ``γ·sign(x) + β``), and likewise for spatial axes all
            of size 1 (``(N, 1, 1, C)``), at build or, for sizes unknown
            (None) at build, at a call where the input's shape is known.
    """

    prior_arguments = {
        "gamma_prior": (None, functools.partial(priors.Normal, mean=1.0, stddev=1.0)),
        "beta_prior": (None, priors.Normal),
        **TLU.prior_arguments,
    }

    def __init__(self, epsilon=1e-6, use_tlu=True, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = check_positive(epsilon, "epsilon", "FRN")
        self.use_tlu = check_bool(use_tlu, "use_tlu", "FRN")

    def _check_shape(self, shape):
        """Refuses a shape without a spatial axis, or with only 1x1 (None: unknown, passes)."""
        if len(shape) < 3:
            raise argument_error(
                "inputs", "have rank >= 3, (batch, ..., channels) with at least one spatial "
                "axis: FRN normalises each channel over the spatial axes, and without any "
                "ν² = x², which makes the output γ·sign(x) + β (the FRN paper's learned-ε "
                "variant for such inputs is not implemented)", None,
                f"FRN {self.name!r}", got=f"shape {tuple(shape)}")
        if all(size == 1 for size in shape[1:-1]):
            raise argument_error(
                "inputs", "have more than one spatial position: over a single one (1x1) "
                "ν² = x² and the output is γ·sign(x) + β (in a network, make the input "
                "large enough that no stage comes down to 1x1)", None,
                f"FRN {self.name!r}", got=f"shape {tuple(shape)}")

    def build(self, input_shape):
        self._check_shape(input_shape)
        channels = (input_shape[-1],)
        self.gamma = self._add_prior_weight("gamma_prior", "gamma", channels, "ones")
        self.beta = self._add_prior_weight("beta_prior", "beta", channels, "zeros")
        if self.use_tlu:
            super().build(input_shape)

    def call(self, inputs):
        self._check_shape(inputs.shape)  # sizes unknown at build may be known now
        compute_dtype = keras.backend.standardize_dtype(inputs.dtype)
        # In float32 under a mixed policy, as Keras's own normalisations: in
        # float16 x² overflows at |x| > 256, ν² became Inf and the output β.
        x = ops.cast(inputs, "float32") if compute_dtype in _HALF_DTYPES else inputs
        spatial_axes = tuple(range(1, len(x.shape) - 1))
        nu2 = ops.mean(ops.square(x), axis=spatial_axes, keepdims=True)
        normalised = ops.multiply(x, ops.rsqrt(ops.add(nu2, self.epsilon)))
        gamma = ops.cast(self.gamma, x.dtype)
        beta = ops.cast(self.beta, x.dtype)
        outputs = ops.cast(ops.add(ops.multiply(normalised, gamma), beta), compute_dtype)
        return super().call(outputs) if self.use_tlu else outputs

    def get_config(self):
        config = super().get_config()
        config.update(epsilon=self.epsilon, use_tlu=self.use_tlu)
        return config
