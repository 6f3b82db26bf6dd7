"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``nonfinite`` (the NaN/Inf policy), ``metrics``,
``diagnostics``, ``data``, ``plots``, ``likelihoods``, ``export`` (TF
Serving export; TensorFlow backend), ``serving``, ``runs`` (what the
``keras-bnn`` command runs; ``experiment`` is its former name).

``import keras_bnn`` imports no submodule: each name below is imported on
its first use (PEP 562 module ``__getattr__``), so the ``keras-bnn`` command
answers ``--help`` and argument errors without importing Keras or TensorFlow.
"""

import importlib

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

