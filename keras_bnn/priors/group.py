"""Group priors: densities of the per-feature slices ("groups") of a weight.

:class:`GroupLaplace` (a Laplace density on each group's norm) and
:class:`UnitNormDirection` (the ATMC prior keeping weight-normalised
directions near unit length), both over the slices of a weight at each index
of ``axis``.
"""

import math

import keras
import numpy as np
from keras import ops

from keras_bnn.priors.base import Prior, abs_with_zero_subgradient, public
from keras_bnn.validation import check_int, check_positive


class _GroupPrior(Prior):
    """A prior over groups: the slices of a weight at each index of ``axis``.

    For a dense kernel ``(in, out)`` and ``axis=-1`` each group is the fan-in
    vector of one output feature; for a conv kernel ``(h, w, in, out)`` it is
    one filter. ``d`` is the group size (the product of the other axes).
    """

    def __init__(self, axis=-1):
        self.axis = check_int(axis, "axis", owner=type(self).__name__)

    def _group_axes(self, x):
        """The axes one group of ``x`` spans (none for a rank-1 weight: every
        element is its own group) and the group size d."""
        self.validate_shape(x.shape, "x")  # the axis fits (a modulo would wrap it)
        axis = self.axis % len(x.shape)
        reduce_axes = tuple(i for i in range(len(x.shape)) if i != axis)
        return reduce_axes, int(np.prod([x.shape[i] for i in reduce_axes]))

    def _group_sq_norms(self, x):
        reduce_axes, d = self._group_axes(x)
        if not reduce_axes:
            return ops.square(x), d
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


@public
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

    def _group_norms(self, x):
        """Each group's norm ``‖θ_g‖`` and the group size d.

        Taken as ``m·‖θ_g/m‖``, m the group's largest ``|θ_gi|`` (constant to the
        gradient, which stays ``θ_g/‖θ_g‖``): ``‖θ_g‖²`` overflowed float32 past
        ``‖θ_g‖`` = 1.8e19 (log p -inf, gradient NaN at 3e38) and underflowed to 0
        below about 1e-19 (gradient 0 in place of ``-1/b`` per unit direction). An
        all-zero group has norm 0 and gradient 0, not NaN.
        """
        reduce_axes, d = self._group_axes(x)
        if not reduce_axes:
            return abs_with_zero_subgradient(x), d
        largest = ops.stop_gradient(ops.max(ops.abs(x), axis=reduce_axes, keepdims=True))
        positive = ops.greater(largest, 0.0)
        sq = ops.sum(ops.square(ops.divide(x, ops.where(positive, largest, 1.0))),
                     axis=reduce_axes)  # in [1, d] for a group not all zero
        positive = ops.reshape(positive, sq.shape)
        norms = ops.where(positive, ops.reshape(largest, sq.shape) * ops.sqrt(
            ops.where(positive, sq, 1.0)), 0.0)
        return norms, d

    def log_prob(self, x):
        norms, d = self._group_norms(x)
        groups = float(np.prod(norms.shape))
        return ops.subtract(
            ops.negative(ops.sum(norms)) / self.scale,
            groups * self._log_normaliser(d),
        )

    def sample(self, shape, seed=None):
        # Radially symmetric: uniform direction times radius r ~ Gamma(d, b).
        shape = self._sample_shape(shape)
        seeds = self._seeds(seed)
        directions = self._uniform_directions(shape, seeds)
        d = int(np.prod(shape)) // shape[self.axis % len(shape)]
        groups = (shape[self.axis % len(shape)],)
        radius = self.scale * keras.random.gamma(groups, alpha=float(d), seed=seeds)
        return directions * self._expand(radius, shape)

    def get_config(self):
        return {"scale": self.scale, "axis": self.axis}


@public
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
        """A uniform direction times a radius drawn by inverse CDF on a grid from
        the radial density ``r^(d-1)·exp(-d/2·(r²-1)²)``.

        Its mode tends to ``sqrt((1+√3)/2) ≈ 1.169`` as d grows (``(d-1)/d =
        2r²(r²-1)``), with sd ``≈ 0.38/√d``: the grid spans
        ``[1.17 - 12/√d, 1.2 + 8/√d]`` (from near 0 for small d), over 30
        sd below the mode and 80 above, so its spacing stays a small share of
        the sd at any d (a grid up to ``1 + 8/√d`` ended below the mode for
        d > 2 240: every radius sat at its top).
        """
        shape = self._sample_shape(shape)
        seeds = self._seeds(seed)
        directions = self._uniform_directions(shape, seeds)
        axis = self.axis % len(shape)
        d = int(np.prod(shape)) // shape[axis]
        r_max = 1.2 + 8.0 / math.sqrt(d)
        r_min = max(r_max / self._GRID, 1.17 - 12.0 / math.sqrt(d))
        r = np.linspace(r_min, r_max, self._GRID)
        log_w = (d - 1) * np.log(r) - 0.5 * d * (r**2 - 1.0) ** 2
        cdf = np.cumsum(np.exp(log_w - log_w.max()))
        cdf /= cdf[-1]
        u = keras.random.uniform((shape[axis],), seed=seeds)
        index = ops.minimum(ops.searchsorted(cdf.astype("float32"), u), self._GRID - 1)
        radius = ops.take(r.astype("float32"), index)
        return directions * self._expand(radius, shape)
