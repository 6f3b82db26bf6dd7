"""Element-wise priors: every weight w_i independent and identically distributed.

:class:`Normal` (and its fan-scaled :class:`HeNormal`, :class:`GlorotNormal`),
:class:`Laplace`, :class:`StudentT` (and its fan-scaled :class:`HeStudentT`)
and :func:`Cauchy`; ``log p(w) =
Σ_i log p(w_i)`` with normalising constants, written in ``keras.ops``. The
fan-scaled priors read a kernel's fans from its shape unless given
(``fan_in=``, ``fan_out=``: :func:`keras_bnn.bayesian` gives an
``EinsumDense`` kernel those of its equation).
"""

import math

import keras
import numpy as np
from keras import ops

from keras_bnn.priors.base import Prior, abs_with_zero_subgradient, public
from keras_bnn.validation import check_finite, check_positive, check_positive_int

_LOG_2PI = math.log(2.0 * math.pi)
#: StudentT.log_prob takes log(1 + u²) as 2·log|u| for |u| above this (u = z/√ν):
#: u² stays finite in float32 below it, and the error log(1 + 1/u²) above is < 1e-36.
_LOG1P_SWITCH = 1e18
#: ... and for |z| above this, where z² = ((w-μ)/s)² would overflow float32 below the
#: first switch for ν > 324 (StudentT(1e6) had log p(1e20) = -inf; scipy: -3.9e7).
_Z_SQUARE_SWITCH = 1e19
_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: StudentT.sample draws Gamma(ν/2) in log space below this ν: float32 draws fall
#: under float32's smallest normal with probability 3.6e-10 at ν = 0.5, 1.7e-4 at 0.2.
_LOG_GAMMA_DF = 0.5


def _log_gamma_ratio(x):
    """``lgamma(x + 1/2) - lgamma(x)``, without the cancellation of the difference at large x.

    Above x = 1e4 by its asymptotic series ``½ log x - 1/(8x) + 1/(192x³)`` (next
    term O(x⁻⁵) < 1e-20): the difference of two lgammas of ~x·log x lost ~x·log x·1e-16
    (StudentT(df=1e14)'s log-density per weight was off by 0.1).
    """
    if x <= 1e4:
        return math.lgamma(x + 0.5) - math.lgamma(x)
    return 0.5 * math.log(x) - 1.0 / (8.0 * x) + 1.0 / (192.0 * x**3)


def _check_fan(value, name, owner):
    """``None``, or ``value`` as a count >= 1 (a ``fan_in``/``fan_out`` argument)."""
    return None if value is None else check_positive_int(value, name, owner)


class _FanScaled:
    """Mixin of the priors whose scale follows a kernel's fans (see :class:`HeNormal`).

    A fan given at construction (``fan_in``, ``fan_out``) is used as it is;
    one left None is read from the weight's shape ``(*k, in, out)``:
    ``fan_in = prod(k)·in``, ``fan_out = prod(k)·out``.
    """

    min_rank = 2
    #: The fan arguments of the class (its ``__init__`` takes these).
    _fan_arguments = ("fan_in",)
    fan_out = None

    def _fans(self, shape):
        """``(fan_in, fan_out)`` of a weight of ``shape`` (rank checked)."""
        self.validate_shape(shape, "x")
        receptive_field = int(np.prod(shape[:-2]))
        return (self.fan_in or receptive_field * int(shape[-2]),
                self.fan_out or receptive_field * int(shape[-1]))

    def _fan_stddev(self, shape):
        """He et al.'s ``sqrt(2/fan_in)``."""
        return math.sqrt(2.0 / self._fans(shape)[0])

    def _fan_config(self, config):
        """``config`` with the fans given at construction (a None one is left out, so
        that configs, and the stores that hash them, read as before these arguments)."""
        return {**config, **{name: getattr(self, name) for name in self._fan_arguments
                             if getattr(self, name) is not None}}

    def with_fans(self, shape, fan_in, fan_out):
        """This prior for a weight of ``shape`` whose true fans are ``fan_in``, ``fan_out``.

        For a kernel whose shape does not say which axes are summed over (an
        ``EinsumDense`` kernel, see :func:`keras_bnn.bayesian`).

        Args:
            shape: the weight's shape.
            fan_in: the number of inputs each output unit sums over.
            fan_out: the number of output units each input feeds.

        Returns:
            ``self`` if its scale on ``shape`` is that of these fans already,
            else a copy with them as its fan arguments (a fan given at
            construction is kept); ``self`` is left unchanged.

        Raises:
            ValueError: if ``shape`` has rank < 2, or a fan is not an integer >= 1.
        """
        given = {"fan_in": fan_in, "fan_out": fan_out}
        config = self.get_config()
        config.update({name: given[name] for name in self._fan_arguments
                       if getattr(self, name) is None})
        fitted = type(self).from_config(config)
        return self if fitted._fan_stddev(shape) == self._fan_stddev(shape) else fitted


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class Normal(Prior):
    """Isotropic Gaussian prior ``w_i ~ N(mean, stddev²)``.

    ``log p(w) = Σ_i [-(w_i-μ)²/(2σ²) - log σ - ½ log 2π]``.

    Args:
        mean: location μ.
        stddev: σ > 0.

    Raises:
        ValueError: if ``stddev`` is not positive.
    """

    def __init__(self, mean=0.0, stddev=1.0):
        self.mean = check_finite(mean, "mean", "Normal")
        self.stddev = check_positive(stddev, "stddev", "Normal")

    def _stddev_for(self, shape):
        return self.stddev

    def log_prob(self, x):
        sigma = self._stddev_for(x.shape)
        z = ops.divide(ops.subtract(x, self.mean), sigma)
        n = float(np.prod(x.shape))
        const = n * (math.log(sigma) + 0.5 * _LOG_2PI)
        return ops.subtract(ops.multiply(-0.5, ops.sum(ops.square(z))), const)

    def sample(self, shape, seed=None):
        shape = self._sample_shape(shape)
        sigma = self._stddev_for(shape)
        return keras.random.normal(
            shape, mean=self.mean, stddev=sigma, seed=self._seeds(seed)
        )

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev}


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class HeNormal(_FanScaled, Normal):
    """He-scaled Gaussian prior ``w_i ~ N(0, (s·sqrt(2/fan_in))²)``.

    ``fan_in``, the number of inputs each output unit sums over, is the
    argument when given, else read from the weight's shape: ``shape[0]`` for
    a dense kernel ``(in, out)``, ``prod(shape[:-1])`` for a convolution
    kernel ``(..., in, out)``. The shape cannot tell it for an
    ``EinsumDense`` kernel (the projections of a ``MultiHeadAttention``): a
    query kernel ``(d_model, heads, head_dim)`` of equation
    ``"abc,cde->abde"`` sums over its ``c`` axis only, ``fan_in = d_model``,
    not ``d_model·heads``. :func:`keras_bnn.bayesian` passes it for such
    kernels: the product of the kernel's axes whose equation letters are in
    the input and not in the output.

    Args:
        scale: s > 0 (``1.0`` gives He et al.'s initialisation variance).
        fan_in: None (read from the shape) or an integer >= 1.

    Raises:
        ValueError: if ``scale`` is not positive, ``fan_in`` not an integer
            >= 1, or (at build time) when attached to a weight of rank < 2.
    """

    def __init__(self, scale=1.0, fan_in=None):
        owner = type(self).__name__
        self.scale = check_positive(scale, "scale", owner)
        self.fan_in = _check_fan(fan_in, "fan_in", owner)
        super().__init__(mean=0.0, stddev=1.0)

    def _stddev_for(self, shape):
        return self.scale * self._fan_stddev(shape)

    def get_config(self):
        return self._fan_config({"scale": self.scale})


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class GlorotNormal(HeNormal):
    """Glorot-scaled Gaussian prior ``w_i ~ N(0, (s·sqrt(2/(fan_in+fan_out)))²)``.

    Glorot & Bengio's initialisation variance as a prior. Each fan is the
    argument when given, else read from the shape: for a dense kernel
    ``(in, out)``, ``fan_in = in`` and ``fan_out = out``; for a convolution
    kernel ``(*k, in, out)`` both are multiplied by the receptive field
    ``prod(k)``. For an ``EinsumDense`` kernel :func:`keras_bnn.bayesian`
    passes both (as for :class:`HeNormal`; ``fan_out``: the product of the
    other axes, those in the output). ``log p(w)`` is the Normal density of
    :class:`Normal`.

    Args:
        scale: s > 0 (``1.0`` gives Glorot's initialisation variance).
        fan_in: None (read from the shape) or an integer >= 1.
        fan_out: None (read from the shape) or an integer >= 1.

    Raises:
        ValueError: if ``scale`` is not positive, a fan not an integer >= 1,
            or (at build time) when attached to a weight of rank < 2.
    """

    _fan_arguments = ("fan_in", "fan_out")

    def __init__(self, scale=1.0, fan_in=None, fan_out=None):
        super().__init__(scale=scale, fan_in=fan_in)
        self.fan_out = _check_fan(fan_out, "fan_out", type(self).__name__)

    def _fan_stddev(self, shape):
        """Glorot and Bengio's ``sqrt(2/(fan_in+fan_out))``."""
        return math.sqrt(2.0 / sum(self._fans(shape)))


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class Laplace(Prior):
    """Laplace prior ``p(w_i) = exp(-|w_i-μ|/b) / (2b)``.

    Args:
        scale: b > 0.
        loc: location μ.

    Raises:
        ValueError: if ``scale`` is not positive.
    """

    def __init__(self, scale=1.0, loc=0.0):
        self.scale = check_positive(scale, "scale", "Laplace")
        self.loc = check_finite(loc, "loc", "Laplace")

    def log_prob(self, x):
        n = float(np.prod(x.shape))
        dev = ops.sum(abs_with_zero_subgradient(ops.subtract(x, self.loc)))
        return ops.subtract(
            ops.divide(ops.negative(dev), self.scale),
            n * math.log(2.0 * self.scale),
        )

    def sample(self, shape, seed=None):
        # Inverse CDF: w = μ - b·sign(u)·log(1-2|u|), u ~ U(-½, ½).
        shape = self._sample_shape(shape)
        u = keras.random.uniform(
            shape, minval=-0.5 + 1e-7, maxval=0.5 - 1e-7, seed=self._seeds(seed)
        )
        return ops.subtract(
            self.loc,
            self.scale * ops.sign(u) * ops.log1p(-2.0 * ops.abs(u)),
        )

    def get_config(self):
        return {"scale": self.scale, "loc": self.loc}


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class StudentT(Prior):
    """Student-t prior with ``df`` degrees of freedom (Cauchy for ``df=1``).

    ``log p(w_i) = lgamma((ν+1)/2) - lgamma(ν/2) - ½ log(νπ) - log s
    - (ν+1)/2 · log(1 + ((w_i-μ)/s)²/ν)``, finite at every finite w_i and
    every ν (where ``((w_i-μ)/s)²/ν`` would overflow float32, the log is taken
    as ``2·log|w_i-μ| - 2·log s - log ν``; the lgamma difference is taken by
    its asymptotic series above ν = 2e4, so that at ν → ∞ it is the normal
    density).

    Draws are ``μ + s·z/sqrt(2g/ν)``, ``z ~ N(0, 1)``, ``g ~ Gamma(ν/2, 1)``;
    for ``ν < 0.5`` g is drawn in log space (``log g = log g₁ - E/(ν/2)``,
    ``g₁ ~ Gamma(ν/2 + 1)``, ``E ~ Exp(1)``), since a float32 Gamma(ν/2) draw
    falls below the smallest float32 (which cut the tail: at ν = 0.1, 1.3% of
    draws sat at ~10¹⁸ in place of the t's tail). Draws beyond float32's
    range come out ±inf: per weight at s = 1 with probability 1.2e-4 at
    ν = 0.1, 1.5e-8 at ν = 0.2 and below 2e-12 for ν >= 0.3.

    Args:
        df: ν > 0.
        scale: s > 0.
        loc: location μ.

    Raises:
        ValueError: if ``df`` or ``scale`` is not positive.
    """

    def __init__(self, df=3.0, scale=1.0, loc=0.0):
        owner = type(self).__name__
        self.df = check_positive(df, "df", owner)
        self.scale = check_positive(scale, "scale", owner)
        self.loc = check_finite(loc, "loc", owner)

    def _scale_for(self, shape):
        return self.scale

    def log_prob(self, x):
        nu, s = self.df, self._scale_for(x.shape)
        n = float(np.prod(x.shape))
        const = (
            _log_gamma_ratio(0.5 * nu)
            - 0.5 * math.log(nu * math.pi)
            - math.log(s)
        )
        deviation = ops.subtract(x, self.loc)
        # log(1 + z²/ν), z = (w-μ)/s, as 2·log|w-μ| - log(s²ν) where it would overflow:
        # past |z| = 1e18·√ν (error < 1e-36) and past |z| = 1e19, where z² itself would
        # (ν > 100; there z²/ν > 1e38/ν and the error log(1 + ν/z²) stays below float32's
        # resolution of the sum). The switch is at most float32's largest (a Python float
        # beyond it is refused by TensorFlow's conversion: StudentT(1e22).log_prob raised).
        switch = min(_LOG1P_SWITCH * math.sqrt(nu), _Z_SQUARE_SWITCH) * s
        large = ops.greater(ops.abs(deviation), min(switch, _FLOAT32_MAX))
        z2 = ops.square(ops.divide(ops.where(large, 0.0, deviation), s))
        log_large = ops.subtract(2.0 * ops.log(ops.where(large, ops.abs(deviation), 1.0)),
                                 math.log(s * s * nu))
        log1p_z2 = ops.where(large, log_large, ops.log1p(z2 / nu))
        return ops.add(
            n * const, -0.5 * (nu + 1.0) * ops.sum(log1p_z2)
        )

    def sample(self, shape, seed=None):
        # w = μ + s·z / sqrt(χ²_ν/ν), with χ²_ν = 2·Gamma(ν/2, 1).
        shape = self._sample_shape(shape)
        seeds = self._seeds(seed)
        z = keras.random.normal(shape, seed=seeds)
        alpha, s = 0.5 * self.df, self._scale_for(shape)
        if self.df >= _LOG_GAMMA_DF:
            g = keras.random.gamma(shape, alpha=alpha, seed=seeds)
            return ops.add(self.loc, s * z / ops.sqrt(2.0 * g / self.df))
        # g = g₁·exp(-E/α), in logs: g, and 1/g, may lie beyond float32's range.
        log_g = ops.subtract(
            ops.log(keras.random.gamma(shape, alpha=alpha + 1.0, seed=seeds)),
            keras.random.gamma(shape, alpha=1.0, seed=seeds) / alpha)
        log_w = ops.add(ops.log(ops.abs(z)), 0.5 * (math.log(alpha) - log_g) + math.log(s))
        return ops.add(self.loc, ops.sign(z) * ops.exp(log_w))

    def get_config(self):
        return {"df": self.df, "scale": self.scale, "loc": self.loc}


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class HeStudentT(_FanScaled, StudentT):
    """He-scaled Student-t prior ``w_i ~ t_ν(0, s·sqrt(2/fan_in))``.

    Heavy tails (Fortuin et al. 2022) at the scale of He et al.'s
    initialisation, so that the prior's scale in function space does not grow
    with the width of the layer feeding a weight (an unscaled
    :class:`StudentT` of scale s gives pre-activations of scale
    ``s·sqrt(fan_in)``). ``fan_in`` as in :class:`HeNormal` (given, or read
    from the shape; :func:`keras_bnn.bayesian` passes the equation's for an
    ``EinsumDense`` kernel); ``log p(w)`` is the density of
    :class:`StudentT` at that scale.

    Args:
        df: ν > 0.
        scale: s > 0 (``1.0``: the t's scale parameter equals He's standard
            deviation).
        fan_in: None (read from the shape) or an integer >= 1.

    Raises:
        ValueError: if ``df`` or ``scale`` is not positive, ``fan_in`` not an
            integer >= 1, or (at build time) when attached to a weight of
            rank < 2.
    """

    def __init__(self, df=3.0, scale=1.0, fan_in=None):
        super().__init__(df=df, scale=scale, loc=0.0)
        self.fan_in = _check_fan(fan_in, "fan_in", type(self).__name__)

    def _scale_for(self, shape):
        return self.scale * self._fan_stddev(shape)

    def get_config(self):
        return self._fan_config({"df": self.df, "scale": self.scale})


def Cauchy(scale=1.0, loc=0.0):
    """Cauchy prior: :class:`StudentT` with ``df=1``.

    Args:
        scale: s > 0.
        loc: location.

    Returns:
        A :class:`StudentT` instance.

    Raises:
        ValueError: if ``scale`` is not positive or ``loc`` not finite.
    """
    check_positive(scale, "scale", "Cauchy")  # named as the caller knows it
    check_finite(loc, "loc", "Cauchy")
    return StudentT(df=1.0, scale=scale, loc=loc)
