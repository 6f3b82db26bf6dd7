"""Stochastic gradient HMC as symplectic-Euler Langevin (Wenzel et al. 2020)."""

import keras
from keras import ops

from keras_bnn.samplers import integrators
from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import argument_error, check_choice, check_fraction, check_positive

_INTEGRATORS = {
    "symplectic_euler": integrators.sghmc_symplectic_euler,
    "baoab": integrators.sghmc_baoab,
}


@keras.saving.register_keras_serializable(package="keras_bnn")
class SGHMC(Sampler):
    """SGHMC: underdamped Langevin, symplectic Euler (default) or BAOAB.

    SDE: ``dθ = M⁻¹m dt``, ``dm = -∇U dt - γ m dt + sqrt(2γT) M^{1/2} dW``,
    stationary law ``∝ exp(-(U(θ) + mᵀM⁻¹m/2)/T)``. One symplectic-Euler
    step (the cold-posterior paper's scheme):

    ``m ← (1 - hγ)·m - h·G + sqrt(2γhT)·M^{1/2}·η``,  ``θ ← θ + h·M⁻¹·m``

    (:func:`integrators.sghmc_symplectic_euler`); ``integrator="baoab"``
    uses BAOAB instead (:func:`integrators.sghmc_baoab`), whose positions are
    more accurate at large steps. The kinetic temperature is read from the
    half-step momentum (symplectic Euler) or the momentum after the O step
    (BAOAB), both of which equal T at equilibrium.

    Minibatch noise of variance V adds ``h²V`` to m per step; it is not
    subtracted (a per-parameter subtraction over-cools weakly determined
    directions when the noise is correlated, as it is on real data), so the
    noisiest directions run hot by ``≈ r``, the logged
    ``gradient_noise_ratio``; keep it below ``NOISE_RATIO_LIMIT``.

    ``G = n·∇`` is the minibatch gradient of U. The mass is diagonal: by
    default one fixed scalar ``M`` per variable. A ``preconditioner`` makes it
    the adaptive mass shared with SGLD (:func:`integrators.rmsprop_mass`),
    ``v ← ρ·v + (1-ρ)·G²``, ``M = sqrt(v) + ε``: per parameter with
    ``"rmsprop"``, one scalar per variable (``v`` averages ``mean(G²)``)
    with ``"rmsprop_layerwise"``. Each step first moves the mass, then
    rescales the momentum by ``sqrt(M_new/M_old)`` so its kinetic
    temperature ``m²/M`` is unchanged by the adaptation (the ``Γ`` correction
    of a moving mass is neglected; fix the mass, the default, for exact
    targets).

    State (:meth:`~Sampler.state`): ``"momentum"`` m, ``"mass"`` M (a scalar
    per variable unless ``preconditioner="rmsprop"``) and, with a
    preconditioner, ``"second_moment"`` v.

    Args:
        step_size: ``"auto"`` (warm-up, :mod:`keras_bnn.samplers.warmup`)
            or h > 0 (float or schedule).
        friction: γ > 0; default ``0.1/h`` (momentum decay ``1 - hγ = 0.9``
            at the base step size h: the initial one, or the warm-up's
            variable step ``h·s_v``, which γ then follows, so ``r ∝ h²``;
            with a fixed γ, ``r ∝ h``).
            Symplectic Euler requires ``h·γ < 1``.
        mass: M > 0, the fixed mass of every parameter (the initial one with
            a preconditioner).
        preconditioner: ``None`` (fixed mass), ``"rmsprop"`` or
            ``"rmsprop_layerwise"``.
        rho: averaging constant ρ in (0, 1) of the adaptive mass.
        epsilon: ε > 0 of the adaptive mass.
        integrator: ``"symplectic_euler"`` or ``"baoab"``.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``warmup_steps``,
            ``target_noise_ratio``, ``name`` (see :class:`Sampler`).

    Raises:
        ValueError: for non-positive values, an unknown preconditioner or
            integrator, or ``h·γ ≥ 1`` with symplectic Euler.
    """

    def __init__(
        self,
        step_size="auto",
        friction=None,
        mass=1.0,
        preconditioner=None,
        rho=0.99,
        epsilon=1e-8,
        integrator="symplectic_euler",
        **kwargs,
    ):
        super().__init__(step_size=step_size, **kwargs)
        self.integrator = check_choice(integrator, "integrator", tuple(_INTEGRATORS), "SGHMC")
        # With step_size="auto" the default friction follows the tuned h (None here).
        self.friction = (
            check_positive(friction, "friction", "SGHMC") if friction is not None
            else None if self.warmup is not None else 0.1 / self.initial_step_size
        )
        if self.warmup is not None and friction is not None:
            self.noise_ratio_exponent = 1
        elif (integrator == "symplectic_euler" and self.warmup is None
              and self.friction * self.initial_step_size >= 1.0):
            raise argument_error(
                "friction", f"satisfy h·γ < 1 at the initial step size h = "
                f"{self.initial_step_size!r} (the momentum decays by 1 - h·γ per step)",
                friction, "SGHMC")
        self.mass = check_positive(mass, "mass", "SGHMC")
        self.preconditioner = check_choice(preconditioner, "preconditioner",
                                           integrators.PRECONDITIONERS, "SGHMC")
        self.rho = check_fraction(rho, "rho", "SGHMC")
        self.epsilon = check_positive(epsilon, "epsilon", "SGHMC")

    def build_state(self, var_list):
        self.add_slot(var_list, "momentum")
        layerwise = self.preconditioner != "rmsprop"
        self.add_slot(var_list, "mass", layerwise=layerwise, value=self.mass)
        if self.preconditioner:
            self.add_slot(var_list, "second_moment", layerwise=layerwise)

    def sample_step(self, variable, potential_grad, h, temperature, noise_variance):
        state = self.state(variable)
        momentum, mass = state["momentum"], state["mass"]
        if self.preconditioner:
            new_second_moment, new_mass = integrators.rmsprop_mass(
                state["second_moment"], potential_grad,
                integrators.moving_average_rho(self.rho, self.iterations), self.epsilon,
                layerwise=self.preconditioner == "rmsprop_layerwise")
            momentum = integrators.rescale_momentum(momentum, mass, new_mass)  # old M read first
            self.assign(state["second_moment"], new_second_moment)
            self.assign(mass, new_mass)
            mass = new_mass
        new = _INTEGRATORS[self.integrator](
            variable, momentum, potential_grad, self.noise(variable), h, temperature,
            self._friction_value(variable), mass)
        self.assign(state["momentum"], new.momentum)
        self.assign(variable, new.position)
        kinetic = ops.square(new.kinetic_momentum)
        # r = h²·V̂/injected: the variance minibatch noise adds to m per step
        # over the variance the step injects.
        if len(mass.shape) == 0:  # a scalar mass: divide the sums, not every element
            return (ops.sum(kinetic) / mass,
                    ops.square(h) * ops.mean(noise_variance) / new.injected_variance)
        return (ops.sum(kinetic / mass),
                ops.square(h) * ops.mean(noise_variance / new.injected_variance))

    noise_ratio_exponent = 2  # r = h²·V̂/(2γhTM) at γ = 0.1/h
    fixed_attributes = {**Sampler.fixed_attributes, **{name: name for name in (
        "friction", "mass", "preconditioner", "rho", "epsilon", "integrator")}}

    def _friction_value(self, variable):
        """γ: the fixed friction, or ``0.1/h_v`` of the warm-up's step for ``variable``."""
        if self.friction is not None:
            return ops.cast(self.friction, variable.dtype)
        return 0.1 / ops.cast(self.base_step_size(variable), variable.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            friction=self.friction,
            mass=self.mass,
            preconditioner=self.preconditioner,
            rho=self.rho,
            epsilon=self.epsilon,
            integrator=self.integrator,
        )
        return config
