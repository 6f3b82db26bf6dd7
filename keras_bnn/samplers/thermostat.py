"""Thermostat samplers: SGNHT (Ding et al. 2014) and ATMC (Heek & Kalchbrenner 2019).

Both simulate, per parameter, the SDE (ATMC paper eq. 4, tempered)

    dθ = ∇K(p) dt
    dp = -∇U(θ) dt - β(ξ)·p dt + sqrt(2·α(ξ)·m·T) dW
    dξ = (p·∇K(p) - T)/Q dt,        β(ξ) = α(ξ) + ξ,

and differ only in the noise function α: SGNHT uses the Nosé–Hoover choice
``α(ξ) = D``; ATMC uses ``α(ξ) = max(D - ξ, 0)``, so ``β(ξ) = max(D, ξ) ≥ D``
(never negative friction). For any thermostat mass Q > 0 the stationary law
is ``∝ exp(-(U(θ) + K(p))/T) · exp(-Q·ξ²/(2T))``: the θ-marginal does not
depend on Q. keras_bnn takes ``Q = T·Q₁`` (``thermostat_mass`` = Q₁,
default ``10/D²``), so ``dξ = (p·∇K(p)/T - 1)/Q₁ dt`` responds to a
*relative* excess of kinetic energy at the same rate at every temperature
(with ``Q = 1``, a chain at T = 0.03 would see its thermostat move 33×
slower than at T = 1), and ξ's stationary spread ``1/sqrt(Q₁)`` does not
shrink with T.

Minibatch noise. A minibatch gradient ``G`` carries noise of variance ``V``
per parameter, which injects ``h²V`` into p per step: the heat that a
friction ``b = h·V/(2·T·m)`` dissipates. The sampler estimates ``V`` online
(:func:`keras_bnn.samplers.integrators.gradient_noise_update`) and shifts the
thermostat's set point by ``b̂ = h·V̂/(2·T·m)``: ATMC uses
``α = max(D - ξ - b̂, 0)``, ``β = max(D, ξ + b̂)``; SGNHT
``α = max(D - b̂, 0)``, ``β = α + b̂ + ξ``. With ``b̂ = b`` the total noise
``α + b`` and the friction still differ by exactly ξ, so the stationary law
above is unchanged and ξ only learns the estimate's residual: a chain
started at a MAP point reaches its temperature without waiting for ξ to
climb to b (at T ≪ 1, b ≫ D). This corrects the *diagonal* of the noise
covariance only; correlated noise (the rule on real data) is removed from
every coordinate, which over-cools weakly determined directions (measured:
posterior sd ≈ sqrt(1 - r) of the truth with ``r = b/D``), so keep the
:meth:`~keras_bnn.samplers.Sampler.gradient_noise_ratio` ``r`` small.

One fused step of the splitting (eqs. 8–11, with the B half-steps of
consecutive iterations merged) is the exact Ornstein–Uhlenbeck solution for p
over time h with G = n·∇ (the minibatch ∇U) held fixed, then the A flow:

    p ← e^{-βh}·p - (1 - e^{-βh})/β · G + sqrt(T·α·m·(1 - e^{-2βh})/β) · η
    θ ← θ + h·∇K(p)
    ξ ← ξ + h·(p·∇K(p)/T - 1)/Q₁

(Algorithm 1 of the paper prints these with wrong signs in the exponents;
:func:`keras_bnn.samplers.integrators.sgnht` and
:func:`~keras_bnn.samplers.integrators.atmc` implement the step.)
Momentum: Gaussian ``∇K(p) = p/m``, or relativistic (eq. 5)
``∇K(p) = p / (m·sqrt(p²/(m²c²) + 1))``, whose speed is below c, so no step
moves a parameter by more than ``h·c``.
"""

import math

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn.samplers import integrators
from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import argument_error, check_choice, check_positive


def _update(position, momentum, thermostat, gradient, noise_variance, noise, step_size,
            temperature, noise_level, mass, thermostat_mass, speed_limit, adaptive):
    """ATMC's (``adaptive``) or SGNHT's step with ``b̂ = h·V̂/(2·T·m)``.

    Returns the new ``(θ, p, ξ)``, ``Σp·∇K(p)`` and ``Σb̂``: the sums are
    taken here so that they fuse with the step.
    """
    noise_friction = noise_variance * (step_size / (2.0 * temperature * mass))
    step = integrators.atmc if adaptive else integrators.sgnht
    new = step(position, momentum, thermostat, gradient, noise, step_size, temperature,
               noise_level=noise_level, mass=mass, thermostat_mass=thermostat_mass,
               speed_limit=speed_limit, noise_friction=noise_friction)
    return (new.position, new.momentum, new.thermostat, ops.sum(new.kinetic),
            ops.sum(noise_friction))


_fused_update = backend.fused(_update)


class ThermostatSampler(Sampler):
    """Shared shell of :class:`SGNHT` and :class:`ATMC`; see the module doc.

    The step is :func:`integrators.sgnht` or :func:`integrators.atmc`, fused
    into one XLA kernel on TensorFlow. State (:meth:`~Sampler.state`):
    ``"momentum"`` p and ``"thermostat"`` ξ, shaped like each variable.

    Args:
        step_size: ``"auto"`` (warm-up, :mod:`keras_bnn.samplers.warmup`)
            or h > 0 (float or schedule).
        noise: D > 0, the momentum noise; default ``-log(0.9)/h`` (the ATMC
            paper's choice: friction ``e^{-βh} ≤ 0.9`` per step at the base
            step h: the initial one, or the warm-up's variable step
            ``h·s_v``, which D then follows, so ``r ∝ h²``; with a fixed D,
            ``r ∝ h``).
        mass: m > 0, the momentum mass (preconditioner).
        momentum: ``"gaussian"`` or ``"relativistic"``.
        speed_limit: c > 0, required for relativistic momentum: no parameter
            moves more than ``h·c`` in one step.
        thermostat_mass: Q₁ > 0, the thermostat mass in units of T
            (``Q = T·Q₁``, in time²); it sets how fast ξ responds, not what is
            sampled. Default ``10/D²``: ξ's stationary spread ``1/sqrt(Q₁)`` is
            a third of D (it follows the warm-up's h with D), and ξ
            corrects a 10 % error in the noise estimate
            within a few epochs (measured on a digits MLP from a MAP start:
            Q₁ = 1 left the kinetic temperature 8 % low after 60 epochs at
            T = 0.01; Q₁ = 0.01–0.05 brought it within 1–2 % by epoch 10–20).
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``warmup_steps``,
            ``target_noise_ratio``, ``name`` (see :class:`Sampler`).

    Raises:
        ValueError: for non-positive values, an unknown ``momentum``, or a
            relativistic momentum without ``speed_limit``.
    """

    def __init__(
        self,
        step_size="auto",
        noise=None,
        mass=1.0,
        momentum="gaussian",
        speed_limit=None,
        thermostat_mass=None,
        **kwargs,
    ):
        super().__init__(step_size=step_size, **kwargs)
        owner = type(self).__name__
        # With step_size="auto" the defaults follow the tuned h (None here).
        self.noise_level = (
            check_positive(noise, "noise", owner) if noise is not None
            else None if self.warmup is not None else -math.log(0.9) / self.initial_step_size
        )
        if self.warmup is not None and noise is not None:
            self.noise_ratio_exponent = 1
        self.mass = check_positive(mass, "mass", owner)
        self.thermostat_mass = (
            check_positive(thermostat_mass, "thermostat_mass", owner)
            if thermostat_mass is not None
            else None if self.noise_level is None else 10.0 / self.noise_level**2
        )
        self.momentum = check_choice(momentum, "momentum", ("gaussian", "relativistic"),
                                     type(self).__name__)
        if momentum == "relativistic":
            if speed_limit is None:
                raise ValueError(
                    f"{owner}: momentum='relativistic' needs `speed_limit` (c > 0), "
                    "the largest parameter change per unit time."
                )
            self.speed_limit = check_positive(speed_limit, "speed_limit", owner)
        elif speed_limit is not None:
            raise argument_error(
                "speed_limit", f"be None with momentum={momentum!r} (it applies to "
                "momentum='relativistic' only)", speed_limit, owner)
        else:
            self.speed_limit = None

    #: ATMC's adaptive noise ``α = max(D - ξ, 0)`` (True) or SGNHT's ``α = D``.
    adaptive_noise = False
    noise_ratio_exponent = 2  # r = b̂/D = h·V̂/(2TmD) at D = -log(0.9)/h
    fixed_attributes = {**Sampler.fixed_attributes, "noise_level": "noise", **{
        name: name for name in ("mass", "momentum", "speed_limit", "thermostat_mass")}}
    fixed_arguments = (*Sampler.fixed_arguments, "noise")

    def _noise_values(self, variable):
        """``(D, Q₁)``: the fixed values, or ``-log(0.9)/h_v`` and ``10/D²`` of
        the warm-up's step for ``variable``."""
        dtype = variable.dtype
        if self.noise_level is None:
            noise_level = -math.log(0.9) / ops.cast(self.base_step_size(variable), dtype)
        else:
            noise_level = ops.cast(self.noise_level, dtype)
        if self.thermostat_mass is None:
            return noise_level, 10.0 / ops.square(noise_level)
        return noise_level, ops.cast(self.thermostat_mass, dtype)

    def velocity(self, p):
        """``∇K(p)`` of this sampler's kinetic energy (see :func:`integrators.velocity`)."""
        return integrators.velocity(p, self.mass, self.speed_limit)

    def build_state(self, var_list):
        self.add_slot(var_list, "momentum")
        self.add_slot(var_list, "thermostat")

    def sample_step(self, variable, potential_grad, h, temperature, noise_variance):
        state = self.state(variable)
        dtype = variable.dtype
        noise_level, thermostat_mass = self._noise_values(variable)
        thermostat = state["thermostat"]
        if self.noise_level is None:  # ξ is a rate ∝ 1/h_v: carried across a change of h_v
            thermostat = thermostat * ops.cast(self.step_change(variable), dtype)
        position, momentum, thermostat, kinetic, noise_friction = _fused_update(
            variable,
            state["momentum"],
            thermostat,
            potential_grad,
            noise_variance,
            self.noise(variable),
            h,
            temperature,
            noise_level,
            ops.cast(self.mass, dtype),
            thermostat_mass,
            None if self.speed_limit is None else ops.cast(self.speed_limit, dtype),
            adaptive=self.adaptive_noise,
        )
        self.assign(state["momentum"], momentum)
        self.assign(state["thermostat"], thermostat)
        self.assign(variable, position)
        # r = b̂/D: the gradient noise's share of the nominal noise level D.
        size = math.prod(variable.shape)
        return kinetic, noise_friction / (size * noise_level)

    def carry_step_change(self, variable, change):
        """ξ is a rate ∝ 1/h_v (with the default noise level): ``ξ ← ξ·change``
        when ``h_v ← h_v/change``
        (see :meth:`keras_bnn.samplers.warmup.StepSizeWarmup.change`)."""
        if self.noise_level is None:
            thermostat = self.state(variable)["thermostat"]
            thermostat.assign(thermostat.value * change)

    def get_config(self):
        config = super().get_config()
        config.update(
            noise=self.noise_level,
            mass=self.mass,
            momentum=self.momentum,
            speed_limit=self.speed_limit,
            thermostat_mass=self.thermostat_mass,
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
