"""Stochastic gradient HMC as symplectic-Euler Langevin (Wenzel et al. 2020)."""

import keras
from keras import ops

from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import check_choice, check_fraction, check_positive


def _sghmc_step(m, grad, eta, h, temperature, friction, mass, rescale):
    """``(m, Δθ, Σm²/M)`` of one SGHMC step; ``rescale`` (or None) first multiplies m."""
    if rescale is not None:
        m = rescale * m
    noise_scale = ops.sqrt(2.0 * friction * h * temperature * mass)
    new_m = (1.0 - h * friction) * m - h * grad + noise_scale * eta
    return new_m, (h / mass) * new_m, ops.sum(ops.square(new_m)) / mass


@keras.saving.register_keras_serializable(package="keras_bnn")
class SGHMC(Sampler):
    """SGHMC, the symplectic-Euler discretisation of underdamped Langevin.

    SDE: ``dθ = M⁻¹m dt``, ``dm = -∇U dt - γ m dt + sqrt(2γT) M^{1/2} dW``,
    stationary law ``∝ exp(-(U(θ) + mᵀM⁻¹m/2)/T)``. One step:

    ``m ← (1 - hγ)·m - h·G + sqrt(2γhT)·M^{1/2}·η``,  ``θ ← θ + h·M⁻¹·m``,

    with ``G = n·∇`` the minibatch gradient of U and a layer-wise mass: one
    scalar ``M`` per variable. With ``preconditioner="rmsprop"`` the mass
    follows the variable's gradient scale, ``v ← ρ·v + (1-ρ)·mean(G²)``,
    ``M = sqrt(v) + ε``, and the momentum is rescaled by ``sqrt(M_new/M_old)``
    so its kinetic temperature ``m²/M`` is unchanged by the adaptation (the
    ``Γ`` correction of a moving mass is neglected; fix the mass, the default,
    for exact targets).

    Args:
        step_size: h > 0 (float or schedule).
        friction: γ > 0; default ``0.1/h0`` (momentum decay ``1 - hγ = 0.9``
            at the initial step size). Requires ``h·γ < 1``.
        mass: the initial (or fixed) per-variable scalar mass M > 0.
        preconditioner: ``None`` (fixed mass) or ``"rmsprop"``.
        rho: averaging constant ρ in (0, 1) of the adaptive mass.
        epsilon: ε > 0 of the adaptive mass.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``name``.

    Raises:
        ValueError: for non-positive values or an unknown preconditioner.
    """

    def __init__(
        self,
        step_size=1e-4,
        friction=None,
        mass=1.0,
        preconditioner=None,
        rho=0.99,
        epsilon=1e-8,
        **kwargs,
    ):
        super().__init__(step_size=step_size, **kwargs)
        self.friction = (
            0.1 / self.initial_step_size
            if friction is None
            else check_positive(friction, "friction", "SGHMC")
        )
        if self.friction * self.initial_step_size >= 1.0:
            raise ValueError(
                "SGHMC: `friction` γ must satisfy h·γ < 1 at the initial step size "
                f"h = {self.initial_step_size!r} (the momentum decays by 1 - h·γ per "
                f"step); received friction={friction!r}."
            )
        self.mass = check_positive(mass, "mass", "SGHMC")
        self.preconditioner = check_choice(preconditioner, "preconditioner", (None, "rmsprop"))
        self.rho = check_fraction(rho, "rho", "SGHMC")
        self.epsilon = check_positive(epsilon, "epsilon", "SGHMC")

    def build_state(self, var_list):
        self._momenta = [self.add_variable_from_reference(v, name="momentum") for v in var_list]
        self._masses = [
            self.add_variable(
                shape=(),
                initializer=keras.initializers.Constant(self.mass),
                name=f"{v.path.replace('/', '_')}_mass",
            )
            for v in var_list
        ]
        if self.preconditioner:
            self._grad_sq = [
                self.add_variable(shape=(), name=f"{v.path.replace('/', '_')}_grad_sq")
                for v in var_list
            ]

    def _adapt_mass(self, variable, potential_grad, mass):
        """Updates the adaptive mass; returns the momentum rescaling ``sqrt(M_new/M_old)``."""
        v = self.slot(self._grad_sq, variable)
        rho = self._moving_average_rho()
        self.assign(v, rho * v + (1.0 - rho) * ops.mean(ops.square(potential_grad)))
        new_mass = ops.sqrt(v) + self.epsilon
        rescale = ops.sqrt(new_mass / mass)
        self.assign(mass, new_mass)
        return rescale

    def sample_step(self, variable, potential_grad, h, temperature):
        m = self.slot(self._momenta, variable)
        mass = self.slot(self._masses, variable)
        rescale = self._adapt_mass(variable, potential_grad, mass) if self.preconditioner else None
        new_m, step, kinetic = _sghmc_step(
            m,
            potential_grad,
            self.noise(variable),
            h,
            temperature,
            ops.cast(self.friction, variable.dtype),
            mass,
            rescale,
        )
        self.assign(m, new_m)
        self.assign_add(variable, step)
        return kinetic

    def get_config(self):
        config = super().get_config()
        config.update(
            friction=self.friction,
            mass=self.mass,
            preconditioner=self.preconditioner,
            rho=self.rho,
            epsilon=self.epsilon,
        )
        return config
