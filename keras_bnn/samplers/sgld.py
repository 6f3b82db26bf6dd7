"""Stochastic gradient Langevin dynamics (Welling & Teh 2011; Li et al. 2016)."""

import keras
from keras import ops

from keras_bnn.samplers.base import Sampler, moving_average_rho
from keras_bnn.validation import check_choice, check_fraction, check_positive


def _sgld_step(grad, eta, h, temperature, second_moment=None, rho=None, epsilon=None):
    """``(Δθ, v, P)`` of one SGLD step; ``second_moment=None`` means ``P = 1``."""
    if second_moment is None:
        return ops.sqrt(2.0 * h * temperature) * eta - h * grad, None, 1.0
    new_second_moment = rho * second_moment + (1.0 - rho) * ops.square(grad)
    precond = 1.0 / (epsilon + ops.sqrt(new_second_moment))
    step = ops.sqrt(2.0 * h * temperature * precond) * eta - h * precond * grad
    return step, new_second_moment, precond


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
        step_size: ``"auto"`` (warm-up, :mod:`keras_bnn.samplers.warmup`;
            here ``r = h·mean(P·V̂)/(2T)`` grows as h) or h > 0 (float or
            schedule).
        preconditioner: ``None`` or ``"rmsprop"``.
        rho: RMSprop averaging constant ρ in (0, 1).
        epsilon: ε > 0 added to ``sqrt(v)``.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``warmup_steps``,
            ``target_noise_ratio``, ``name`` (see :class:`Sampler`).

    Raises:
        ValueError: for an unknown ``preconditioner`` or out-of-range values.
    """

    has_momentum = False

    def __init__(self, step_size="auto", preconditioner=None, rho=0.99, epsilon=1e-8, **kwargs):
        super().__init__(step_size=step_size, **kwargs)
        self.preconditioner = check_choice(preconditioner, "preconditioner",
                                           (None, "rmsprop"), "SGLD")
        self.rho = check_fraction(rho, "rho", "SGLD")
        self.epsilon = check_positive(epsilon, "epsilon", "SGLD")

    def build_state(self, var_list):
        if self.preconditioner:
            self._second_moments = [
                self.add_variable_from_reference(v, name="second_moment") for v in var_list
            ]

    def sample_step(self, variable, potential_grad, h, temperature, noise_variance):
        eta = self.noise(variable)
        if not self.preconditioner:
            step, _, precond = _sgld_step(potential_grad, eta, h, temperature)
        else:
            second_moment = self.slot(self._second_moments, variable)
            step, new_second_moment, precond = _sgld_step(
                potential_grad, eta, h, temperature,
                second_moment, moving_average_rho(self.rho, self.iterations), self.epsilon,
            )
            self.assign(second_moment, new_second_moment)
        self.assign_add(variable, step)
        # r = h²P²V / (2hTP) = h·P·V/(2T): minibatch over injected variance.
        return None, h * ops.mean(precond * noise_variance) / (2.0 * temperature)

    def get_config(self):
        config = super().get_config()
        config.update(preconditioner=self.preconditioner, rho=self.rho, epsilon=self.epsilon)
        return config
