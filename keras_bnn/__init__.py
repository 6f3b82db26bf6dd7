"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``nonfinite`` (the NaN/Inf policy), ``metrics``,
``diagnostics``, ``data``, ``plots``, ``likelihoods``, ``export`` (TF
Serving export; TensorFlow backend), ``serving``, ``runs`` (what the
``keras-bnn`` command runs; ``experiment`` is its former name).

``import keras_bnn`` imports every submodule (which registers the package's
Keras serializables), except in the ``keras-bnn`` command, which answers
``--help`` and argument errors without importing TensorFlow: there the
names below are imported on first use.
"""

import importlib
import os
import sys

__version__ = "0.1.0"

_SUBMODULES = ("callbacks", "data", "diagnostics", "experiment", "export", "layers",
               "likelihoods", "metrics", "models", "nonfinite", "plots", "priors", "runs",
               "samplers", "schedules", "serving")
_ATTRIBUTES = {
    "PosteriorEnsemble": "keras_bnn.ensemble",
    "BayesianModel": "keras_bnn.models.bayesian_model",
    "GradientNoiseWarning": "keras_bnn.models.bayesian_model",
    "NonFiniteError": "keras_bnn.nonfinite",
    "prior_predictive": "keras_bnn.prior_predictive",
    "SampleStore": "keras_bnn.store",
}

__all__ = sorted([*_SUBMODULES, *_ATTRIBUTES])


def __getattr__(name):
    if name in _SUBMODULES:
        value = importlib.import_module(f"keras_bnn.{name}")
    elif name in _ATTRIBUTES:
        value = getattr(importlib.import_module(_ATTRIBUTES[name]), name)
    else:
        raise AttributeError(f"module 'keras_bnn' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])


def _launched_as_cli():
    """True in the ``keras-bnn`` console script and ``python -m keras_bnn.cli``."""
    if os.path.basename(sys.argv[0] if sys.argv else "") == "keras-bnn":
        return True
    argv = getattr(sys, "orig_argv", [])  # the interpreter's options come first
    module = next((argv[i + 1] if arg == "-m" else arg[2:] for i, arg in enumerate(argv[:-1])
                   if arg.startswith("-m")), None)
    return module == "keras_bnn.cli"


if not _launched_as_cli():
    for _name in __all__:
        __getattr__(_name)
