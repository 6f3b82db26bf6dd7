"""Tempered SG-MCMC samplers, as Keras 3 optimizers.

``SGLD``, ``SGHMC``, ``SGNHT`` and ``ATMC`` sample ``p(θ) ∝ exp(-U(θ)/T)``
from minibatches; ``HMC`` (full batch, Metropolis-corrected) is the exact
reference;
:func:`get` resolves a sampler from an instance, a name or a config.
:data:`REGISTRY` is the one table of the names a run accepts
(``RunConfig.sampler``): the samplers and the SGD/MAP baseline, each with
its default step size.
"""

import dataclasses

import keras

from keras_bnn.samplers.base import NOISE_RATIO_LIMIT, Sampler
from keras_bnn.samplers.hmc import HMC
from keras_bnn.samplers.sghmc import SGHMC
from keras_bnn.samplers.sgld import SGLD
from keras_bnn.samplers.thermostat import ATMC, SGNHT, ThermostatSampler
from keras_bnn.validation import argument_error


@dataclasses.dataclass(frozen=True)
class Method:
    """How a run named ``sampler=<name>`` moves the weights.

    Attributes:
        optimizer: a :class:`Sampler` subclass, or for a point estimate the
            Keras optimizer class.
        step_size: the default h0: ``"auto"`` (the warm-up chooses it,
            :mod:`keras_bnn.samplers.warmup`) or a number (SDE time units;
            for a point estimate its learning rate).
        fixed: constructor arguments the entry sets unless ``sampler_args``
            give them (the baseline's momentum, HMC's adaptation).
    """

    optimizer: type
    step_size: object
    fixed: dict = dataclasses.field(default_factory=dict)

    @property
    def collects(self):
        """True for a sampler, whose iterates after burn-in are posterior
        samples; False for a point estimate, whose last iterate is the run's
        one sample (it has no temperature and no noise seed)."""
        return issubclass(self.optimizer, Sampler)

    def build(self, step_size, seed, temperature, **kwargs):
        """The optimizer of a run.

        Args:
            step_size: h0 > 0 or "auto" (a sampler's initial step size, or the
                baseline's learning rate).
            seed: seed of a sampler's noise (a point estimate has none).
            temperature: a sampler's posterior temperature T > 0 (a point
                estimate takes T = 1, which ``RunConfig.validate`` checks).
            **kwargs: further constructor arguments (``sampler_args``).

        Returns:
            A Keras optimizer: a :class:`Sampler`, or the baseline's.

        Raises:
            ValueError: for bad constructor arguments (named by the class).
        """
        if not self.collects:
            return self.optimizer(step_size, **{**self.fixed, **kwargs})
        return self.optimizer(step_size=step_size, seed=seed, temperature=temperature,
                              **{**self.fixed, **kwargs})


#: HMC transitions a run spends adapting the leapfrog step (dual averaging
#: toward acceptance 0.8), unless its ``sampler_args`` say otherwise: the
#: run's warm-up, as ``step_size="auto"`` is the SG samplers'. 300, as the
#: README's exact references on the bundled datasets use. Without it (h0 =
#: 10⁻³, measured on wine's full batch) the chain accepted every proposal
#: and was stationary only after 6 437 transitions, against 319 with it.
HMC_ADAPTATION_STEPS = 300

#: Every name a run accepts (``RunConfig.sampler``, ``--sampler``): the
#: samplers, and ``"sgd"``, the SGD/MAP baseline (``SGD(momentum=0.9)``).
REGISTRY = {
    "sgld": Method(SGLD, "auto"),
    "sghmc": Method(SGHMC, "auto"),
    "sgnht": Method(SGNHT, "auto"),
    "atmc": Method(ATMC, "auto"),
    "hmc": Method(HMC, 1e-3, {"num_adaptation_steps": HMC_ADAPTATION_STEPS}),
    "sgd": Method(keras.optimizers.SGD, 0.05, {"momentum": 0.9}),
}
#: The samplers by name (what ``compile(sampler="atmc")`` accepts).
BY_NAME = {name: method.optimizer for name, method in REGISTRY.items() if method.collects}


def get(identifier, **kwargs):
    """Resolves a sampler.

    Args:
        identifier: a :class:`Sampler`, a name (``"sgld"``, ``"sghmc"``,
            ``"sgnht"``, ``"atmc"``, ``"hmc"``, any case) or a serialized sampler dict.
        **kwargs: constructor arguments used with a name.

    Returns:
        A :class:`Sampler`.

    Raises:
        ValueError: for an unknown name or an object that is not a sampler.
    """
    if isinstance(identifier, Sampler):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key not in BY_NAME:
            raise argument_error("sampler", f"be one of {', '.join(map(repr, BY_NAME))}",
                                 identifier)
        return BY_NAME[key](**kwargs)
    if isinstance(identifier, dict):
        sampler = keras.optimizers.deserialize(identifier)
        if isinstance(sampler, Sampler):
            return sampler
    raise argument_error(
        "sampler", f"be a keras_bnn.samplers.Sampler, one of the names "
        f"{', '.join(map(repr, BY_NAME))}, or a serialized sampler", identifier)


__all__ = [
    "ATMC", "BY_NAME", "HMC", "Method", "NOISE_RATIO_LIMIT", "REGISTRY", "SGHMC", "SGLD",
    "SGNHT", "Sampler", "ThermostatSampler", "get",
]
