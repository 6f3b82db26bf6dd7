"""Priors over network weights, as Keras regularizers with real log-densities.

Every prior is a :class:`keras.regularizers.Regularizer`. Called on a weight
tensor it returns ``-log p(w)``: the full negative
log-density, normalising constants included (except :class:`UnitNormDirection`,
which is documented as unnormalised). The tempered posterior's mean-form
potential (see the design note) adds the prior as ``(1/n) * (-log p(θ))``:
the scaling by ``1/n`` is :meth:`keras_bnn.BayesianModel.potential_terms`'s,
so a prior is never changed by the model it sits in.

Densities are written with ``keras.ops`` (closed forms) so that they run under
every Keras backend; the tests check them against ``scipy.stats`` and
TensorFlow Probability.
"""

import math

import keras
import numpy as np
from keras import ops

from keras_bnn.validation import argument_error, check_finite, check_positive

_LOG_2PI = math.log(2.0 * math.pi)

__all__ = [
    "Prior",
    "Normal",
    "Laplace",
    "StudentT",
    "Cauchy",
    "HeNormal",
    "GlorotNormal",
    "GroupLaplace",
    "UnitNormDirection",
    "get",
    "serialize",
]


class Prior(keras.regularizers.Regularizer):
    """Base class: a log-density over a weight tensor that is also a regularizer.

    Subclasses implement :meth:`log_prob` (summed over all elements) and
    :meth:`sample`. ``__call__`` returns ``-log_prob(w)`` (a
    :class:`keras_bnn.BayesianModel` scales its layer losses by ``1/n``).
    """

    #: Smallest weight rank this prior accepts (see :meth:`validate_shape`).
    min_rank = 0

    def __call__(self, x):
        return ops.negative(self.log_prob(x))

    def log_prob(self, x):
        """Total log-density of ``x`` (a scalar, summed over all elements).

        Args:
            x: weight tensor.

        Returns:
            Scalar tensor ``log p(x)`` in the dtype of ``x``.
        """
        raise NotImplementedError

    def sample(self, shape, seed=None):
        """Draws one weight tensor of ``shape`` from the prior.

        Args:
            shape: tuple of ints.
            seed: int or ``keras.random.SeedGenerator``: equal seeds give equal
                draws.

        Returns:
            Tensor of ``shape`` (float32).

        Raises:
            ValueError: if ``shape`` has a rank the prior does not accept.
        """
        raise NotImplementedError

    def validate_shape(self, shape, argument="prior"):
        """Checks that this prior can sit on a weight of ``shape``.

        Args:
            shape: the weight's shape.
            argument: name of the layer argument that carries this prior, used
                in the error message (e.g. ``"kernel_prior"``).

        Raises:
            ValueError: naming ``argument`` when the rank is too small.
        """
        if len(shape) < self.min_rank:
            raise ValueError(
                f"`{argument}`: {type(self).__name__} needs a weight of rank "
                f">= {self.min_rank}; got a weight of shape {tuple(shape)}."
            )

    def _seeds(self, seed):
        return seed if isinstance(seed, keras.random.SeedGenerator) else (
            keras.random.SeedGenerator(0 if seed is None else int(seed))
        )


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
        self.validate_shape(shape, "x")
        fan_in = int(np.prod(shape[:-1]))
        return self.scale * math.sqrt(2.0 / fan_in)

    def get_config(self):
        return {"scale": self.scale}


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
        self.df = check_positive(df, "df", "StudentT")
        self.scale = check_positive(scale, "scale", "StudentT")
        self.loc = check_finite(loc, "loc", "StudentT")

    def log_prob(self, x):
        nu, s = self.df, self.scale
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
        return ops.add(self.loc, self.scale * z / ops.sqrt(2.0 * g / self.df))

    def get_config(self):
        return {"df": self.df, "scale": self.scale, "loc": self.loc}


def Cauchy(scale=1.0, loc=0.0):
    """Cauchy prior: :class:`StudentT` with ``df=1``.

    Args:
        scale: s > 0.
        loc: location.

    Returns:
        A :class:`StudentT` instance.
    """
    return StudentT(df=1.0, scale=scale, loc=loc)


class _GroupPrior(Prior):
    """A prior over groups: the slices of a weight at each index of ``axis``.

    For a dense kernel ``(in, out)`` and ``axis=-1`` each group is the fan-in
    vector of one output feature; for a conv kernel ``(h, w, in, out)`` it is
    one filter. ``d`` is the group size (the product of the other axes).
    """

    def __init__(self, axis=-1):
        self.axis = int(axis)

    def _group_sq_norms(self, x):
        axis = self.axis % len(x.shape)
        reduce_axes = tuple(i for i in range(len(x.shape)) if i != axis)
        if not reduce_axes:  # rank-1 weight: every element is its own group
            return ops.square(x), 1
        d = int(np.prod([x.shape[i] for i in reduce_axes]))
        return ops.sum(ops.square(x), axis=reduce_axes), d

    def validate_shape(self, shape, argument="prior"):
        super().validate_shape(shape, argument)
        if not -len(shape) <= self.axis < len(shape):
            raise ValueError(
                f"`{argument}`: {type(self).__name__}(axis={self.axis}) does not "
                f"fit a weight of shape {tuple(shape)}; allowed axes are "
                f"{-len(shape)}..{len(shape) - 1}."
            )

    def _uniform_directions(self, shape, seeds):
        """Normal draws normalised to unit norm in each group (uniform on the sphere)."""
        z = keras.random.normal(shape, seed=seeds)
        sq, _ = self._group_sq_norms(z)
        return z / self._expand(ops.sqrt(sq), shape)

    def _expand(self, per_group, shape):
        axis = self.axis % len(shape)
        target = [1] * len(shape)
        target[axis] = shape[axis]
        return ops.reshape(per_group, target)

    def get_config(self):
        return {"axis": self.axis}


@keras.saving.register_keras_serializable(package="keras_bnn")
class GroupLaplace(_GroupPrior):
    """Group Laplace prior on per-feature norms, ``p(θ_g) ∝ exp(-‖θ_g‖/b)``.

    Normalised over R^d (d = group size):
    ``log p(θ_g) = -‖θ_g‖/b - log Z_d``, with
    ``log Z_d = log 2 + (d/2)·log π - lgamma(d/2) + d·log b + lgamma(d)``
    (the radial integral ``S_{d-1} ∫ r^{d-1} e^{-r/b} dr``). For ``d = 1`` it
    is the ordinary Laplace density. The ATMC paper uses ``b = 5`` on the
    ResNet++ scales. ``‖·‖`` uses a safe square root so the gradient at an
    all-zero group is 0, not NaN.

    Args:
        scale: b > 0.
        axis: the feature axis (one group per index of this axis).

    Raises:
        ValueError: if ``scale`` is not positive, or ``axis`` does not fit the
            weight.
    """

    min_rank = 1

    def __init__(self, scale=5.0, axis=-1):
        super().__init__(axis)
        self.scale = check_positive(scale, "scale", "GroupLaplace")

    def _log_normaliser(self, d):
        return (
            math.log(2.0)
            + 0.5 * d * math.log(math.pi)
            - math.lgamma(0.5 * d)
            + d * math.log(self.scale)
            + math.lgamma(d)
        )

    def log_prob(self, x):
        sq, d = self._group_sq_norms(x)
        positive = ops.greater(sq, 0.0)
        norms = ops.where(positive, ops.sqrt(ops.where(positive, sq, 1.0)), 0.0)
        groups = float(np.prod(sq.shape))
        return ops.subtract(
            ops.negative(ops.sum(norms)) / self.scale,
            groups * self._log_normaliser(d),
        )

    def sample(self, shape, seed=None):
        # Radially symmetric: uniform direction times radius r ~ Gamma(d, b).
        self.validate_shape(shape, "shape")
        seeds = self._seeds(seed)
        directions = self._uniform_directions(shape, seeds)
        d = int(np.prod(shape)) // shape[self.axis % len(shape)]
        groups = (shape[self.axis % len(shape)],)
        radius = self.scale * keras.random.gamma(groups, alpha=float(d), seed=seeds)
        return directions * self._expand(radius, shape)

    def get_config(self):
        return {"scale": self.scale, "axis": self.axis}


@keras.saving.register_keras_serializable(package="keras_bnn")
class UnitNormDirection(_GroupPrior):
    """ATMC direction prior ``p(φ_g) ∝ exp(-d/2 · (‖φ_g‖² - 1)²)`` (eq. 13).

    UNNORMALISED: ``log_prob`` omits the normalising constant, which does not
    depend on the weights and so changes neither gradients nor samples. It
    keeps the weight-normalised direction vectors near unit length, so the
    effective step size of a sampler does not drift. ``d`` is the group size.

    Args:
        axis: the feature axis (one direction vector per index of this axis).

    Raises:
        ValueError: (at build time) when attached to a weight of rank < 2, or
            when ``axis`` does not fit the weight.
    """

    min_rank = 2
    _GRID = 4096

    def log_prob(self, x):
        sq, d = self._group_sq_norms(x)
        return ops.multiply(-0.5 * d, ops.sum(ops.square(ops.subtract(sq, 1.0))))

    def sample(self, shape, seed=None):
        # Uniform direction times a radius drawn by inverse CDF on a fine grid
        # from the radial density r^(d-1)·exp(-d/2·(r²-1)²).
        self.validate_shape(shape, "shape")
        seeds = self._seeds(seed)
        directions = self._uniform_directions(shape, seeds)
        axis = self.axis % len(shape)
        d = int(np.prod(shape)) // shape[axis]
        r_max = 1.0 + 8.0 / math.sqrt(d)
        r = np.linspace(r_max / self._GRID, r_max, self._GRID)
        log_w = (d - 1) * np.log(r) - 0.5 * d * (r**2 - 1.0) ** 2
        cdf = np.cumsum(np.exp(log_w - log_w.max()))
        cdf /= cdf[-1]
        u = keras.random.uniform((shape[axis],), seed=seeds)
        index = ops.minimum(ops.searchsorted(cdf.astype("float32"), u), self._GRID - 1)
        radius = ops.take(r.astype("float32"), index)
        return directions * self._expand(radius, shape)


_BY_NAME = {
    "normal": Normal,
    "laplace": Laplace,
    "student_t": StudentT,
    "cauchy": Cauchy,
    "he_normal": HeNormal,
    "glorot_normal": GlorotNormal,
    "group_laplace": GroupLaplace,
    "unit_norm_direction": UnitNormDirection,
}


def get(identifier, argument="prior"):
    """Resolves a prior from an instance, a name, a config dict or ``None``.

    Args:
        identifier: a :class:`Prior`, one of the names
            ``"normal", "laplace", "student_t", "cauchy", "he_normal",
            "glorot_normal", "group_laplace", "unit_norm_direction"`` (default arguments), a
            dict from :func:`serialize`, or ``None``.
        argument: the caller's argument name, used in error messages.

    Returns:
        A :class:`Prior`, or ``None`` for ``None``.

    Raises:
        ValueError: for an unknown name or an object that is not a prior.
    """
    if identifier is None or isinstance(identifier, Prior):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key not in _BY_NAME:
            raise ValueError(
                f"Unknown prior for `{argument}`: {identifier!r}. Allowed names: "
                f"{', '.join(sorted(_BY_NAME))}."
            )
        return _BY_NAME[key]()
    if isinstance(identifier, dict):
        try:
            prior = keras.saving.deserialize_keras_object(identifier)
        except TypeError:  # unknown class: reported below, naming the argument
            prior = None
        if isinstance(prior, Prior):
            return prior
    raise argument_error(
        argument, f"be a keras_bnn.priors.Prior, a prior name ({', '.join(sorted(_BY_NAME))}), "
        "a serialized prior or None", identifier)


def serialize(prior):
    """Serializes a prior (or ``None``) for a layer's ``get_config``.

    Args:
        prior: a :class:`Prior` or ``None``.

    Returns:
        A config dict, or ``None``.
    """
    return None if prior is None else keras.saving.serialize_keras_object(prior)


def log_prior(model):
    """Total ``log p(θ)`` of a model: the sum over its prior-carrying weights.

    Args:
        model: a built Keras model (or layer).

    Returns:
        Scalar tensor.
    """
    terms = [
        v.regularizer.log_prob(v.value)
        for v in model.weights
        if isinstance(getattr(v, "regularizer", None), Prior)
    ]
    return ops.sum(ops.stack(terms)) if terms else ops.zeros(())
