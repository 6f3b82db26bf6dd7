"""Element-wise priors: every weight w_i independent and identically distributed.

:class:`Normal` (and its fan-scaled :class:`HeNormal`, :class:`GlorotNormal`),
:class:`Laplace`, :class:`StudentT` (and its fan-scaled :class:`HeStudentT`)
and :func:`Cauchy`; ``log p(w) =
Σ_i log p(w_i)`` with normalising constants, written in ``keras.ops``.
"""

import math

import keras
import numpy as np
from keras import ops

from keras_bnn.priors.base import Prior, public
from keras_bnn.validation import check_finite, check_positive

_LOG_2PI = math.log(2.0 * math.pi)


def _he_stddev(prior, shape):
    """He et al.'s ``sqrt(2/fan_in)``, ``fan_in = prod(shape[:-1])`` (rank checked)."""
    prior.validate_shape(shape, "x")
    return math.sqrt(2.0 / int(np.prod(shape[:-1])))


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
        self.validate_shape(shape, "shape")
        sigma = self._stddev_for(shape)
        return keras.random.normal(
            shape, mean=self.mean, stddev=sigma, seed=self._seeds(seed)
        )

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev}


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class HeNormal(Normal):
    """He-scaled Gaussian prior ``w_i ~ N(0, (s·sqrt(2/fan_in))²)``.

    ``fan_in`` is read from the weight's shape: ``shape[0]`` for a dense
    kernel ``(in, out)``, ``prod(shape[:-1])`` for a convolution kernel
    ``(..., in, out)``.

    Args:
        scale: s > 0 (``1.0`` gives He et al.'s initialisation variance).

    Raises:
        ValueError: if ``scale`` is not positive, or (at build time) when
            attached to a weight of rank < 2.
    """

    min_rank = 2

    def __init__(self, scale=1.0):
        self.scale = check_positive(scale, "scale", type(self).__name__)
        super().__init__(mean=0.0, stddev=1.0)

    def _stddev_for(self, shape):
        return self.scale * _he_stddev(self, shape)

    def get_config(self):
        return {"scale": self.scale}


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class GlorotNormal(HeNormal):
    """Glorot-scaled Gaussian prior ``w_i ~ N(0, (s·sqrt(2/(fan_in+fan_out)))²)``.

    Glorot & Bengio's initialisation variance as a prior. For a dense kernel
    ``(in, out)``: ``fan_in = in``, ``fan_out = out``; for a convolution
    kernel ``(*k, in, out)`` both are multiplied by the receptive field
    ``prod(k)``. ``log p(w)`` is the Normal density of :class:`Normal`.

    Args:
        scale: s > 0 (``1.0`` gives Glorot's initialisation variance).

    Raises:
        ValueError: if ``scale`` is not positive, or (at build time) when
            attached to a weight of rank < 2.
    """

    def _stddev_for(self, shape):
        self.validate_shape(shape, "x")
        receptive_field = int(np.prod(shape[:-2]))
        fan_in, fan_out = (receptive_field * int(n) for n in shape[-2:])
        return self.scale * math.sqrt(2.0 / (fan_in + fan_out))


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
        dev = ops.sum(ops.abs(ops.subtract(x, self.loc)))
        return ops.subtract(
            ops.divide(ops.negative(dev), self.scale),
            n * math.log(2.0 * self.scale),
        )

    def sample(self, shape, seed=None):
        # Inverse CDF: w = μ - b·sign(u)·log(1-2|u|), u ~ U(-½, ½).
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
    - (ν+1)/2 · log(1 + ((w_i-μ)/s)²/ν)``.

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
            math.lgamma(0.5 * (nu + 1.0))
            - math.lgamma(0.5 * nu)
            - 0.5 * math.log(nu * math.pi)
            - math.log(s)
        )
        z2 = ops.square(ops.divide(ops.subtract(x, self.loc), s))
        return ops.add(
            n * const, -0.5 * (nu + 1.0) * ops.sum(ops.log1p(z2 / nu))
        )

    def sample(self, shape, seed=None):
        # w = μ + s·z / sqrt(χ²_ν/ν), with χ²_ν = 2·Gamma(ν/2, 1).
        seeds = self._seeds(seed)
        z = keras.random.normal(shape, seed=seeds)
        g = keras.random.gamma(shape, alpha=0.5 * self.df, seed=seeds)
        s = self._scale_for(shape)
        return ops.add(self.loc, s * z / ops.sqrt(2.0 * g / self.df))

    def get_config(self):
        return {"df": self.df, "scale": self.scale, "loc": self.loc}


@public
@keras.saving.register_keras_serializable(package="keras_bnn")
class HeStudentT(StudentT):
    """He-scaled Student-t prior ``w_i ~ t_ν(0, s·sqrt(2/fan_in))``.

    Heavy tails (Fortuin et al. 2022) at the scale of He et al.'s
    initialisation, so that the prior's scale in function space does not grow
    with the width of the layer feeding a weight (an unscaled
    :class:`StudentT` of scale s gives pre-activations of scale
    ``s·sqrt(fan_in)``). ``fan_in`` as in :class:`HeNormal`; ``log p(w)`` is
    the density of :class:`StudentT` at that scale.

    Args:
        df: ν > 0.
        scale: s > 0 (``1.0``: the t's scale parameter equals He's standard
            deviation).

    Raises:
        ValueError: if ``df`` or ``scale`` is not positive, or (at build
            time) when attached to a weight of rank < 2.
    """

    min_rank = 2

    def __init__(self, df=3.0, scale=1.0):
        super().__init__(df=df, scale=scale, loc=0.0)

    def _scale_for(self, shape):
        return self.scale * _he_stddev(self, shape)

    def get_config(self):
        return {"df": self.df, "scale": self.scale}


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
