"""Thermostat samplers: SGNHT (Ding et al. 2014) and ATMC (Heek & Kalchbrenner 2019).

Both simulate, per parameter, the SDE (ATMC paper eq. 4, tempered)

    dθ = ∇K(p) dt
    dp = -∇U(θ) dt - β(ξ)·p dt + sqrt(2·α(ξ)·m·T) dW
    dξ = (p·∇K(p) - T) dt,         β(ξ) = α(ξ) + ξ,

and differ only in the noise function α: SGNHT uses the Nosé–Hoover choice
``α(ξ) = D``; ATMC uses ``α(ξ) = max(D - ξ, 0)``, so ``β(ξ) = max(D, ξ) ≥ D``
(never negative friction). With a minibatch gradient the thermostat ξ rises
until the friction absorbs the gradient noise.

One fused step of the splitting (eqs. 8–11, with the B half-steps of
consecutive iterations merged) is the exact Ornstein–Uhlenbeck solution for p
over time h with G = n·∇ (the minibatch ∇U) held fixed, then the A flow:

    p ← e^{-βh}·p - (1 - e^{-βh})/β · G + sqrt(T·α·m·(1 - e^{-2βh})/β) · η
    θ ← θ + h·∇K(p)
    ξ ← ξ + h·(p·∇K(p) - T)

(Algorithm 1 of the paper prints these with wrong signs in the exponents.)
Momentum: Gaussian ``∇K(p) = p/m``, or relativistic (eq. 5)
``∇K(p) = p / (m·sqrt(p²/(m²c²) + 1))``, whose speed is below c, so no step
moves a parameter by more than ``h·c``.
"""

import math

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import check_choice, check_positive

# Below |β·h| < _SMALL (only reachable when β can cross 0, i.e. SGNHT) the
# drift coefficient uses its series limit (1 - e^{-x})/β → h(1 - x/2),
# avoiding 0/0.
_SMALL = 1e-6


def _ou_coefficients(beta, h, positive=False):
    """Returns ``(e^{-βh}, (1-e^{-βh})/β, (1-e^{-2βh})/β)`` from one ``expm1``.

    With ``e = expm1(-βh)``: ``e^{-βh} = 1 + e``, ``(1-e^{-βh})/β = -e/β`` and,
    as ``1 - e^{-2x} = (1 - e^{-x})(1 + e^{-x})``, the variance coefficient is
    ``drift·(2 + e)`` (``1 + e`` is exact to one ulp of 1, absolute, enough
    for a factor in [0, 1] that multiplies p). ``expm1`` keeps ``-e/β`` accurate for small ``βh > 0``
    (the end of a cyclical step-size cycle), so when ``β > 0`` is guaranteed
    (``positive=True``: ATMC, where ``β = max(D, ξ) ≥ D``) no guard is needed;
    otherwise ``|βh| < _SMALL`` switches to the series ``h·(1 - βh/2)``.
    Fewer elementwise passes than separate ``exp``/``expm1`` calls: this runs
    over every parameter at every step.
    """
    x = beta * h
    e = ops.expm1(-x)
    if positive:
        drift = e / -beta
    else:
        small = ops.less(ops.abs(x), _SMALL)
        drift = ops.where(small, h * (1.0 - 0.5 * x), e / -ops.where(small, 1.0, beta))
    return e + 1.0, drift, drift * (2.0 + e)


def _velocity(p, mass, speed_limit):
    """``∇K(p)``: ``p/m`` (Gaussian, ``speed_limit=None``) or relativistic.

    The relativistic form ``p/(m·sqrt(p²/(m²c²)+1))`` is evaluated as
    ``c·u/sqrt(u²+1)`` with ``u = p/(mc)``, and for ``|u| > 1`` as
    ``c·sign(u)/sqrt(1+1/u²)``, so a huge (or infinite) momentum gives speed c
    instead of overflowing u².
    """
    velocity = p * (1.0 / mass)
    if speed_limit is None:
        return velocity
    u = velocity * (1.0 / speed_limit)
    large = ops.greater(ops.abs(u), 1.0)
    safe_u = ops.where(large, 1.0, u)
    inverse = ops.where(large, 1.0 / u, 1.0)
    fraction = ops.where(
        large,
        ops.sign(u) / ops.sqrt(1.0 + ops.square(inverse)),
        safe_u / ops.sqrt(ops.square(safe_u) + 1.0),
    )
    return speed_limit * fraction


def _thermostat_step(p, xi, grad, eta, h, temperature, noise_level, mass, speed_limit, adaptive):
    """One step of the module doc's scheme; returns ``(p, ξ, Δθ, Σp·∇K(p))``.

    ``adaptive=True`` is ATMC (``α = max(D - ξ, 0)``, ``β = max(D, ξ)``),
    ``False`` SGNHT (``α = D``, ``β = D + ξ``). Scalars are combined first:
    every elementwise operation is a pass over the parameters.
    """
    if adaptive:
        alpha = ops.maximum(noise_level - xi, 0.0)
        beta = ops.maximum(xi, noise_level)  # = α + ξ, in one pass
    else:
        alpha = noise_level
        beta = noise_level + xi
    decay, drift, variance = _ou_coefficients(beta, h, positive=adaptive)
    noise_scale = ops.sqrt(alpha * variance * (temperature * mass))
    new_p = decay * p - drift * grad + noise_scale * eta
    velocity = _velocity(new_p, mass, speed_limit)
    kinetic = new_p * velocity
    return new_p, xi + h * (kinetic - temperature), h * velocity, ops.sum(kinetic)


_fused_thermostat_step = backend.fused(_thermostat_step)


class ThermostatSampler(Sampler):
    """Shared integrator of :class:`SGNHT` and :class:`ATMC`; see the module doc.

    Args:
        step_size: h > 0 (float or schedule).
        noise: D > 0, the momentum noise; default ``-log(0.9)/h0`` (the ATMC
            paper's choice: friction ``e^{-βh} ≤ 0.9`` per step at h0).
        mass: m > 0, the momentum mass (preconditioner).
        momentum: ``"gaussian"`` or ``"relativistic"``.
        speed_limit: c > 0, required for relativistic momentum: no parameter
            moves more than ``h·c`` in one step.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``name``.

    Raises:
        ValueError: for non-positive values, an unknown ``momentum``, or a
            relativistic momentum without ``speed_limit``.
    """

    def __init__(
        self,
        step_size=1e-3,
        noise=None,
        mass=1.0,
        momentum="gaussian",
        speed_limit=None,
        **kwargs,
    ):
        super().__init__(step_size=step_size, **kwargs)
        owner = type(self).__name__
        self.noise_level = (
            -math.log(0.9) / self.initial_step_size
            if noise is None
            else check_positive(noise, "noise", owner)
        )
        self.mass = check_positive(mass, "mass", owner)
        self.momentum = check_choice(momentum, "momentum", ("gaussian", "relativistic"))
        if momentum == "relativistic":
            if speed_limit is None:
                raise ValueError(
                    f"{owner}: momentum='relativistic' needs `speed_limit` (c > 0), "
                    "the largest parameter change per unit time."
                )
            self.speed_limit = check_positive(speed_limit, "speed_limit", owner)
        elif speed_limit is not None:
            raise ValueError(
                f"{owner}: `speed_limit` applies to momentum='relativistic' only; "
                f"received speed_limit={speed_limit!r} with momentum={momentum!r}."
            )
        else:
            self.speed_limit = None

    #: ATMC's adaptive noise ``α = max(D - ξ, 0)`` (True) or SGNHT's ``α = D``.
    adaptive_noise = False

    def velocity(self, p):
        """``∇K(p)`` of this sampler's kinetic energy (see :func:`_velocity`)."""
        return _velocity(p, self.mass, self.speed_limit)

    def build_state(self, var_list):
        self._momenta = [self.add_variable_from_reference(v, name="momentum") for v in var_list]
        self._thermostats = [
            self.add_variable_from_reference(v, name="thermostat") for v in var_list
        ]

    def sample_step(self, variable, potential_grad, h, temperature):
        p = self.slot(self._momenta, variable)
        xi = self.slot(self._thermostats, variable)
        dtype = variable.dtype
        new_p, new_xi, step, kinetic = _fused_thermostat_step(
            p,
            xi,
            potential_grad,
            self.noise(variable),
            h,
            temperature,
            ops.cast(self.noise_level, dtype),
            ops.cast(self.mass, dtype),
            None if self.speed_limit is None else ops.cast(self.speed_limit, dtype),
            adaptive=self.adaptive_noise,
        )
        self.assign(p, new_p)
        self.assign(xi, new_xi)
        self.assign_add(variable, step)
        return kinetic

    def get_config(self):
        config = super().get_config()
        config.update(
            noise=self.noise_level,
            mass=self.mass,
            momentum=self.momentum,
            speed_limit=self.speed_limit,
        )
        return config


@keras.saving.register_keras_serializable(package="keras_bnn")
class SGNHT(ThermostatSampler):
    """Stochastic gradient Nosé–Hoover thermostat, per parameter: ``α(ξ) = D``.

    Friction ``β = D + ξ`` can become negative when ``ξ < -D`` (the Nosé–Hoover
    behaviour the ATMC paper warns about); see :class:`ThermostatSampler` for
    the arguments and the update.
    """


@keras.saving.register_keras_serializable(package="keras_bnn")
class ATMC(ThermostatSampler):
    """Adaptive thermostat Monte Carlo: ``α(ξ) = max(D - ξ, 0)``.

    The injected noise shrinks as the thermostat ξ detects gradient noise, and
    the friction ``β = max(D, ξ)`` never drops below D. Paper defaults:
    ``D = -log(0.9)/h0``, cyclical cosine step size, relativistic momentum
    with ``m = (v_avg/h0)^-2`` and ``c = v_max/h0``. See
    :class:`ThermostatSampler` for the arguments and the update.
    """

    adaptive_noise = True
