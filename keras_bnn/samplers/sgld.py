"""Stochastic gradient Langevin dynamics (Welling & Teh 2011; Li et al. 2016)."""

import keras
from keras import ops

from keras_bnn.samplers import integrators
from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import check_choice, check_fraction, check_positive


@keras.saving.register_keras_serializable(package="keras_bnn")
class SGLD(Sampler):
    """SGLD: Euler–Maruyama steps of ``dθ = -∇U dt + sqrt(2T) dW``.

    ``θ ← θ - h·P·G + sqrt(2·h·T·P)·η``, ``η ~ N(0, I)``, with ``G = n·∇``
    the minibatch gradient of U (:func:`integrators.sgld`). Without a
    preconditioner ``P = 1``. With one (pSGLD, Li et al. 2016) ``P = 1/M``,
    the inverse of the adaptive diagonal mass ``M = sqrt(v) + ε``,
    ``v ← ρ·v + (1-ρ)·G²`` (:func:`integrators.rmsprop_mass`): per parameter
    with ``preconditioner="rmsprop"``, one per variable (``v`` averages
    ``mean(G²)``) with ``"rmsprop_layerwise"``, the same concept as SGHMC's
    adaptive mass. As in pSGLD the drift correction ``Γ`` of the changing
    ``P`` is neglected. The stationary law of the discrete chain approaches
    ``exp(-U/T)`` as h → 0 (for a unit Gaussian target its variance is
    ``T/(1 - h/2)``).

    State (:meth:`~Sampler.state`): ``"second_moment"`` v with a
    preconditioner.

    Args:
        step_size: ``"auto"`` (warm-up, :mod:`keras_bnn.samplers.warmup`;
            here ``r = h·mean(P·V̂)/(2T)`` grows as h) or h > 0 (float or
            schedule).
        preconditioner: ``None``, ``"rmsprop"`` or ``"rmsprop_layerwise"``.
        rho: RMSprop averaging constant ρ in (0, 1).
        epsilon: ε > 0 added to ``sqrt(v)``.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``warmup_steps``,
            ``target_noise_ratio``, ``name`` (see :class:`Sampler`).

    Raises:
        ValueError: for an unknown ``preconditioner`` or out-of-range values.
    """

    has_momentum = False
    fixed_attributes = {**Sampler.fixed_attributes, "preconditioner": "preconditioner",
                        "rho": "rho", "epsilon": "epsilon"}

    def __init__(self, step_size="auto", preconditioner=None, rho=0.99, epsilon=1e-8, **kwargs):
        super().__init__(step_size=step_size, **kwargs)
        self.preconditioner = check_choice(preconditioner, "preconditioner",
                                           integrators.PRECONDITIONERS,
                                           "SGLD")
        self.rho = check_fraction(rho, "rho", "SGLD")
        self.epsilon = check_positive(epsilon, "epsilon", "SGLD")

    def build_state(self, var_list):
        if self.preconditioner:
            self.add_slot(var_list, "second_moment",
                          layerwise=self.preconditioner == "rmsprop_layerwise")

    def sample_step(self, variable, potential_grad, h, temperature, noise_variance):
        precond = 1.0
        if self.preconditioner:
            second_moment = self.state(variable)["second_moment"]
            new_second_moment, mass = integrators.rmsprop_mass(
                second_moment, potential_grad,
                integrators.moving_average_rho(self.rho, self.iterations),
                self.epsilon, layerwise=self.preconditioner == "rmsprop_layerwise")
            self.assign(second_moment, new_second_moment)
            precond = 1.0 / mass
        new = integrators.sgld(variable, potential_grad, self.noise(variable), h, temperature,
                               precond)
        self.assign(variable, new.position)
        # r = h²P²V / (2hTP) = h·P·V/(2T): minibatch over injected variance.
        return None, h * ops.mean(precond * noise_variance) / (2.0 * temperature)

    def get_config(self):
        config = super().get_config()
        config.update(preconditioner=self.preconditioner, rho=self.rho, epsilon=self.epsilon)
        return config
