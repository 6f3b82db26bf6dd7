"""Tempered SG-MCMC samplers, as Keras 3 optimizers.

``SGLD``, ``SGHMC``, ``SGNHT`` and ``ATMC`` sample ``p(θ) ∝ exp(-U(θ)/T)``;
:func:`get` resolves a sampler from an instance, a name or a config.
"""

import keras

from keras_bnn.samplers.base import NOISE_RATIO_LIMIT, Sampler
from keras_bnn.samplers.sghmc import SGHMC
from keras_bnn.samplers.sgld import SGLD
from keras_bnn.samplers.thermostat import ATMC, SGNHT, ThermostatSampler

_BY_NAME = {"sgld": SGLD, "sghmc": SGHMC, "sgnht": SGNHT, "atmc": ATMC}


def get(identifier, **kwargs):
    """Resolves a sampler.

    Args:
        identifier: a :class:`Sampler`, a name (``"sgld"``, ``"sghmc"``,
            ``"sgnht"``, ``"atmc"``, any case) or a serialized sampler dict.
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
        if key not in _BY_NAME:
            raise ValueError(
                f"Unknown sampler {identifier!r} for `sampler`; allowed names: "
                f"{', '.join(_BY_NAME)}."
            )
        return _BY_NAME[key](**kwargs)
    if isinstance(identifier, dict):
        sampler = keras.optimizers.deserialize(identifier)
        if isinstance(sampler, Sampler):
            return sampler
    raise ValueError(
        "`sampler` must be a keras_bnn.samplers.Sampler, one of the names "
        f"{', '.join(_BY_NAME)}, or a serialized sampler; received {identifier!r}."
    )


__all__ = [
    "ATMC", "NOISE_RATIO_LIMIT", "SGHMC", "SGLD", "SGNHT", "Sampler", "ThermostatSampler", "get",
]
