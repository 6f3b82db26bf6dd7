"""Tempered SG-MCMC samplers, as Keras 3 optimizers.

``SGLD``, ``SGHMC``, ``SGNHT`` and ``ATMC`` sample ``p(θ) ∝ exp(-U(θ)/T)``
from minibatches; ``HMC`` (full batch, Metropolis-corrected) is the exact
reference;
:func:`get` resolves a sampler from an instance, a name or a config.
"""

import keras

from keras_bnn.samplers.base import NOISE_RATIO_LIMIT, Sampler
from keras_bnn.samplers.hmc import HMC
from keras_bnn.samplers.sghmc import SGHMC
from keras_bnn.samplers.sgld import SGLD
from keras_bnn.samplers.thermostat import ATMC, SGNHT, ThermostatSampler
from keras_bnn.validation import argument_error

#: The samplers by name (what ``compile(sampler="atmc")`` and the CLI accept).
BY_NAME = {"sgld": SGLD, "sghmc": SGHMC, "sgnht": SGNHT, "atmc": ATMC, "hmc": HMC}


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
    "ATMC", "BY_NAME", "HMC", "NOISE_RATIO_LIMIT", "SGHMC", "SGLD", "SGNHT", "Sampler",
    "ThermostatSampler", "get",
]
