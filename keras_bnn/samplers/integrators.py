"""The update rules of the SG-MCMC samplers, as pure functions of tensors.

In the spirit of BlackJAX's ``diffusions.py``: every integrator takes the
state it advances (``position`` θ, then ``momentum``/``thermostat`` where the
scheme has them), then ``gradient`` (``G = n·∇``, the minibatch estimate of
``∇U``), ``noise`` (``η ~ N(0, I)`` shaped like θ, drawn by the caller:
nothing here is random), ``step_size`` (h) and ``temperature`` (T), then the
scheme's own parameters by keyword, and returns a named tuple holding the
new state (plus what the step measured on the way, for the diagnostics).
Everything is written with ``keras.ops``, elementwise, so it runs on every
Keras backend, and per-variable scalars (a layer-wise mass) broadcast.

The samplers in :mod:`keras_bnn.samplers` are stateful shells around these
functions: they hold the state in optimizer variables, draw the noise from
``(seed, variable index, step)`` and log the diagnostics.

Preconditioning is one concept everywhere: an adaptive diagonal **mass**
``M = sqrt(v) + ε``, with ``v`` an RMSprop average of ``G²``
(:func:`rmsprop_mass`), per parameter or one per variable (layer-wise).
SGLD steps with the preconditioner ``P = M⁻¹``; SGHMC uses ``M`` as its mass.
"""

from typing import NamedTuple

from keras import ops

# Below |β·h| < _SMALL (only reachable when β can cross 0, i.e. SGNHT) the
# drift coefficient uses its series limit (1 - e^{-x})/β → h(1 - x/2),
# avoiding 0/0.
_SMALL = 1e-6

#: The ``preconditioner`` values of SGLD and SGHMC: none, or the adaptive
#: diagonal mass of :func:`rmsprop_mass`, per parameter (``"rmsprop"``) or one
#: per variable (``"rmsprop_layerwise"``).
PRECONDITIONERS = (None, "rmsprop", "rmsprop_layerwise")


class SGLDState(NamedTuple):
    """The result of :func:`sgld`: the new position θ."""

    position: object


class SGHMCState(NamedTuple):
    """The result of :func:`sghmc_symplectic_euler` and :func:`sghmc_baoab`.

    Attributes:
        position: the new θ.
        momentum: the new m.
        kinetic_momentum: the momentum whose ``m²/M`` has mean T at
            equilibrium (the kinetic temperature is read from it).
        injected_variance: the variance of the noise the step adds to m.
    """

    position: object
    momentum: object
    kinetic_momentum: object
    injected_variance: object


class ThermostatState(NamedTuple):
    """The result of :func:`sgnht` and :func:`atmc`.

    Attributes:
        position: the new θ.
        momentum: the new p.
        thermostat: the new ξ.
        kinetic: ``p·∇K(p)`` of the new momentum, elementwise (its mean is T
            at equilibrium).
    """

    position: object
    momentum: object
    thermostat: object
    kinetic: object


# --------------------------------------------------------------------- SGLD
def sgld(position, gradient, noise, step_size, temperature, preconditioner=1.0):
    """One SGLD step (Welling & Teh 2011; pSGLD, Li et al. 2016).

    ``θ ← θ - h·P·G + sqrt(2·h·T·P)·η``: the Euler–Maruyama step of
    ``dθ = -P·∇U dt + sqrt(2·T·P) dW`` (the drift correction of a changing
    ``P`` is neglected, as in pSGLD).

    Args:
        position: θ.
        gradient: G, the minibatch ``∇U(θ)``.
        noise: η ~ N(0, I), shaped like θ.
        step_size: h > 0.
        temperature: T > 0.
        preconditioner: the diagonal ``P > 0`` (``1/M`` of
            :func:`rmsprop_mass`), or ``1.0``.

    Returns:
        :class:`SGLDState`.
    """
    step = (ops.sqrt(2.0 * step_size * temperature * preconditioner) * noise
            - step_size * preconditioner * gradient)
    return SGLDState(position + step)


def rmsprop_mass(second_moment, gradient, rho, epsilon, layerwise=False):
    """The adaptive diagonal mass: ``v ← ρ·v + (1-ρ)·G²``, ``M = sqrt(v) + ε``.

    With ``layerwise=True`` ``v`` averages ``mean(G²)`` over the variable, so
    ``M`` is one scalar per variable. SGLD's preconditioner is ``P = 1/M``.

    Args:
        second_moment: v before the step (shaped like G, or a scalar when
            layer-wise).
        gradient: G.
        rho: ρ in [0, 1) (0 makes v the current ``G²``).
        epsilon: ε > 0.
        layerwise: one mass per variable instead of one per parameter.

    Returns:
        ``(v, M)``: the new second moment and mass.
    """
    square = ops.square(gradient)
    if layerwise:
        square = ops.mean(square)
    second_moment = rho * second_moment + (1.0 - rho) * square
    return second_moment, ops.sqrt(second_moment) + epsilon


def rescale_momentum(momentum, mass, new_mass):
    """``m·sqrt(M_new/M_old)``: the momentum whose ``m²/M`` a new mass leaves unchanged.

    Args:
        momentum: m.
        mass: M before the change.
        new_mass: M after it.

    Returns:
        The rescaled m.
    """
    return ops.sqrt(new_mass / mass) * momentum


# -------------------------------------------------------------------- SGHMC
def sghmc_symplectic_euler(
    position, momentum, gradient, noise, step_size, temperature, friction, mass=1.0
):
    """One SGHMC step by symplectic Euler (the cold-posterior paper's scheme).

    ``m ← (1 - hγ)·m - h·G + sqrt(2γhTM)·η``,  ``θ ← θ + h·m/M``: the
    discretised ``dθ = M⁻¹m dt``, ``dm = -∇U dt - γm dt + sqrt(2γTM) dW``.
    The stored m has ``E[m²/M] = T/(1 - hγ/2)``; the half-step
    ``(m_old + m_new)/2`` (``kinetic_momentum``) reads exactly T on any
    Gaussian target (stationary covariance of the linear recursion, checked
    for hγ ≤ 0.3, hω ≤ 1).

    Args:
        position, momentum: θ and m.
        gradient: G, the minibatch ``∇U(θ)``.
        noise: η ~ N(0, I), shaped like θ.
        step_size: h > 0 with ``h·γ < 1``.
        temperature: T > 0.
        friction: γ > 0.
        mass: M > 0 (a scalar or shaped like θ).

    Returns:
        :class:`SGHMCState`.
    """
    injected = 2.0 * friction * step_size * temperature * mass
    new_m = (1.0 - step_size * friction) * momentum - step_size * gradient
    new_m = new_m + ops.sqrt(injected) * noise
    return SGHMCState(position + (step_size / mass) * new_m, new_m,
                      0.5 * (momentum + new_m), injected)


def sghmc_baoab(position, momentum, gradient, noise, step_size, temperature, friction, mass=1.0):
    """One SGHMC step by BAOAB (Leimkuhler & Matthews 2013), one gradient per step.

    The closing half kick of one step and the opening half kick of the next
    use the same gradient (taken where the last step ended), so they merge
    into one full kick: ``m ← m - hG``; ``θ ← θ + (h/2)·m/M``;
    ``m ← c·m + sqrt(T·M·(1-c²))·η`` with ``c = e^{-γh}`` (the exact
    Ornstein–Uhlenbeck step); ``θ ← θ + (h/2)·m/M``. Positions are exact for
    a Gaussian target at any stable h, and the momentum after the O step
    (also the stored one) has ``E[m²/M] = T``.

    Args:
        as :func:`sghmc_symplectic_euler` (any ``h > 0``).

    Returns:
        :class:`SGHMCState`.
    """
    kicked = momentum - step_size * gradient
    decay = ops.exp(-step_size * friction)
    injected = temperature * mass * (1.0 - ops.square(decay))
    new_m = decay * kicked + ops.sqrt(injected) * noise
    return SGHMCState(position + (0.5 * step_size / mass) * (kicked + new_m), new_m,
                      new_m, injected)


# --------------------------------------------------------------- thermostats
def ornstein_uhlenbeck_coefficients(beta, step_size, positive=False):
    """``(e^{-βh}, (1-e^{-βh})/β, (1-e^{-2βh})/β)`` from one ``expm1``.

    With ``e = expm1(-βh)``: ``e^{-βh} = 1 + e``, ``(1-e^{-βh})/β = -e/β``
    and, as ``1 - e^{-2x} = (1 - e^{-x})(1 + e^{-x})``, the variance
    coefficient is ``drift·(2 + e)`` (``1 + e`` is exact to one ulp of 1,
    absolute, enough for a factor in [0, 1] that multiplies p). ``expm1``
    keeps ``-e/β`` accurate for small ``βh > 0``, so when ``β > 0`` is
    guaranteed (``positive=True``: ATMC) no guard is needed; otherwise
    ``|βh| < 1e-6`` switches to the series ``h·(1 - βh/2)`` (the limits at
    β = 0 are h and 2h).

    Args:
        beta: the friction β (any sign unless ``positive``).
        step_size: h ≥ 0.
        positive: whether ``β > 0`` everywhere.

    Returns:
        ``(decay, drift, variance)``.
    """
    x = beta * step_size
    e = ops.expm1(-x)
    if positive:
        drift = e / -beta
    else:
        small = ops.less(ops.abs(x), _SMALL)
        drift = ops.where(small, step_size * (1.0 - 0.5 * x), e / -ops.where(small, 1.0, beta))
    return e + 1.0, drift, drift * (2.0 + e)


def velocity(momentum, mass=1.0, speed_limit=None):
    """``∇K(p)``: ``p/m`` (Gaussian) or ``p/(m·sqrt(p²/(m²c²)+1))`` (relativistic).

    The relativistic form (ATMC paper eq. 5) is evaluated as ``c·u/sqrt(u²+1)``
    with ``u = p/(mc)``, and for ``|u| > 1`` as ``c·sign(u)/sqrt(1+1/u²)``, so
    a huge (or infinite) momentum gives speed c instead of overflowing u².

    Args:
        momentum: p.
        mass: m > 0.
        speed_limit: c > 0 for relativistic momentum, None for Gaussian.

    Returns:
        ``∇K(p)``, shaped like p (below c in magnitude when relativistic).
    """
    gaussian = momentum * (1.0 / mass)
    if speed_limit is None:
        return gaussian
    u = gaussian * (1.0 / speed_limit)
    large = ops.greater(ops.abs(u), 1.0)
    safe_u = ops.where(large, 1.0, u)
    inverse = ops.where(large, 1.0 / u, 1.0)
    fraction = ops.where(
        large,
        ops.sign(u) / ops.sqrt(1.0 + ops.square(inverse)),
        safe_u / ops.sqrt(ops.square(safe_u) + 1.0),
    )
    return speed_limit * fraction


def _thermostat(position, momentum, thermostat, gradient, noise, step_size, temperature,
                alpha, beta, positive, mass, thermostat_mass, speed_limit):
    """The fused OU step of p, then θ and ξ, for the noise α and friction β given."""
    decay, drift, variance = ornstein_uhlenbeck_coefficients(beta, step_size, positive)
    noise_scale = ops.sqrt(alpha * variance * (temperature * mass))
    new_p = decay * momentum - drift * gradient + noise_scale * noise
    new_velocity = velocity(new_p, mass, speed_limit)
    kinetic = new_p * new_velocity
    new_xi = thermostat + (step_size / thermostat_mass) * (kinetic * (1.0 / temperature) - 1.0)
    return ThermostatState(position + step_size * new_velocity, new_p, new_xi, kinetic)


def sgnht(position, momentum, thermostat, gradient, noise, step_size, temperature, *,
          noise_level, thermostat_mass, mass=1.0, speed_limit=None, noise_friction=0.0):
    """One SGNHT step (Ding et al. 2014), per parameter: noise ``α = max(D - b̂, 0)``.

    With friction ``β = α + b̂ + ξ`` (any sign), the exact Ornstein–Uhlenbeck
    step of p over h with G held fixed, then the A flow:

    ``p ← e^{-βh}·p - (1 - e^{-βh})/β·G + sqrt(T·α·m·(1 - e^{-2βh})/β)·η``,
    ``θ ← θ + h·∇K(p)``, ``ξ ← ξ + h·(p·∇K(p)/T - 1)/Q₁``
    (:mod:`keras_bnn.samplers.thermostat` derives it).

    Args:
        position, momentum, thermostat: θ, p and ξ.
        gradient: G, the minibatch ``∇U(θ)``.
        noise: η ~ N(0, I), shaped like θ.
        step_size: h ≥ 0.
        temperature: T > 0.
        noise_level: D > 0.
        thermostat_mass: Q₁ > 0 (the thermostat mass is ``Q = T·Q₁``).
        mass: m > 0.
        speed_limit: c > 0 for relativistic momentum (see :func:`velocity`).
        noise_friction: b̂ ≥ 0, the friction that dissipates the estimated
            minibatch noise (``h·V̂/(2·T·m)``); 0 for exact gradients.

    Returns:
        :class:`ThermostatState`.
    """
    alpha = ops.maximum(noise_level - noise_friction, 0.0)
    beta = alpha + noise_friction + thermostat
    return _thermostat(position, momentum, thermostat, gradient, noise, step_size, temperature,
                       alpha, beta, False, mass, thermostat_mass, speed_limit)


def atmc(position, momentum, thermostat, gradient, noise, step_size, temperature, *,
         noise_level, thermostat_mass, mass=1.0, speed_limit=None, noise_friction=0.0):
    """One ATMC step (Heek & Kalchbrenner 2019): noise ``α = max(D - ξ - b̂, 0)``.

    Friction ``β = max(D, ξ + b̂) = α + ξ + b̂ ≥ D > 0``; otherwise the update of
    :func:`sgnht`:

    ``p ← e^{-βh}·p - (1 - e^{-βh})/β·G + sqrt(T·α·m·(1 - e^{-2βh})/β)·η``,
    ``θ ← θ + h·∇K(p)``, ``ξ ← ξ + h·(p·∇K(p)/T - 1)/Q₁``.

    Args:
        as :func:`sgnht`.

    Returns:
        :class:`ThermostatState`.
    """
    shifted = thermostat + noise_friction
    alpha = ops.maximum(noise_level - shifted, 0.0)
    beta = ops.maximum(shifted, noise_level)  # = α + ξ + b̂, in one pass
    return _thermostat(position, momentum, thermostat, gradient, noise, step_size, temperature,
                       alpha, beta, True, mass, thermostat_mass, speed_limit)


# ---------------------------------------------------------- gradient noise
def gradient_noise_update(gradient, previous_gradient, noise_variance, decay):
    """One step of the online estimate of the minibatch gradient-noise variance.

    ``V̂ ← decay·V̂ + (1 - decay)·½·(G_k - G_{k-1})²`` elementwise. Successive
    minibatch gradients are taken at nearly the same θ, so their difference
    is mostly the difference of two independent noise draws, of variance
    ``2V``; what θ moved in one step adds ``(H·Δθ)²``, which shrinks with T
    (at T = 1 on the gold-standard logistic regression it adds ~8 %).

    Args:
        gradient, previous_gradient: ``G = n·∇`` at this and the last step.
        noise_variance: V̂ before this step.
        decay: the averaging constant (``0`` replaces V̂, ``1`` keeps it).

    Returns:
        The new V̂.
    """
    return decay * noise_variance + (1.0 - decay) * 0.5 * ops.square(gradient - previous_gradient)


def moving_average_rho(rho, iterations):
    """ρ of an RMSprop-style average ``v ← ρ·v + (1-ρ)·x``, 0 at step 0.

    At the first step the average takes its first value instead of starting
    from 0.

    Args:
        rho: the averaging constant in (0, 1).
        iterations: the optimizer's step counter.

    Returns:
        Scalar tensor.
    """
    return ops.where(ops.equal(iterations, 0), 0.0, rho)
