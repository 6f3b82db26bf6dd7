"""Stochastic gradient Langevin dynamics (Welling & Teh 2011; Li et al. 2016)."""

import keras
from keras import ops

from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import check_choice, check_fraction, check_positive


@keras.saving.register_keras_serializable(package="keras_bnn")
class SGLD(Sampler):
    """SGLD: Euler–Maruyama steps of ``dθ = -∇U dt + sqrt(2T) dW``.

    ``θ ← θ - h·P·G + sqrt(2·h·T·P)·η``, ``η ~ N(0, I)``, with ``G = n·∇``
    the minibatch gradient of U. Without a preconditioner ``P = 1``. With
    ``preconditioner="rmsprop"`` (pSGLD, Li et al. 2016)
    ``v ← ρ·v + (1-ρ)·G²`` and ``P = 1/(ε + sqrt(v))`` elementwise; as in
    pSGLD the drift correction ``Γ`` of the changing ``P`` is neglected. The
    stationary law of the discrete chain approaches ``exp(-U/T)`` as h → 0
    (for a unit Gaussian target its variance is ``T/(1 - h/2)``).

    Args:
        step_size: h > 0 (float or schedule).
        preconditioner: ``None`` or ``"rmsprop"``.
        rho: RMSprop averaging constant ρ in (0, 1).
        epsilon: ε > 0 added to ``sqrt(v)``.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``name`` (see
            :class:`Sampler`).

    Raises:
        ValueError: for an unknown ``preconditioner`` or out-of-range values.
    """

    has_momentum = False

    def __init__(self, step_size=1e-4, preconditioner=None, rho=0.99, epsilon=1e-8, **kwargs):
        super().__init__(step_size=step_size, **kwargs)
        self.preconditioner = check_choice(preconditioner, "preconditioner", (None, "rmsprop"))
        self.rho = check_fraction(rho, "rho", "SGLD")
        self.epsilon = check_positive(epsilon, "epsilon", "SGLD")

    def build_state(self, var_list):
        if self.preconditioner:
            self._second_moments = [
                self.add_variable_from_reference(v, name="second_moment") for v in var_list
            ]

    def sample_step(self, variable, potential_grad, h, temperature):
        if self.preconditioner:
            v = self.slot(self._second_moments, variable)
            # First step: start the average at G² instead of 0.
            rho = ops.where(ops.equal(self.iterations, 0), 0.0, self.rho)
            self.assign(v, rho * v + (1.0 - rho) * ops.square(potential_grad))
            precond = 1.0 / (self.epsilon + ops.sqrt(v))
        else:
            precond = 1.0
        drift = h * precond * potential_grad
        diffusion = ops.sqrt(2.0 * h * temperature * precond) * self.noise(variable)
        self.assign_add(variable, diffusion - drift)

    def get_config(self):
        config = super().get_config()
        config.update(preconditioner=self.preconditioner, rho=self.rho, epsilon=self.epsilon)
        return config
