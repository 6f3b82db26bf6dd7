"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``nonfinite`` (the NaN/Inf policy), ``metrics``,
``diagnostics``, ``data``, ``plots``, ``likelihoods``, ``export`` (TF
Serving export; TensorFlow backend), ``serving``, ``runs`` (what the
``keras-bnn`` command runs; ``experiment`` is its former name).

``import keras_bnn`` imports no submodule: each name below is imported on
its first use (PEP 562 module ``__getattr__``), so the ``keras-bnn`` command
answers ``--help`` and argument errors without importing Keras or TensorFlow.
The Keras classes of the package (priors, layers, models, samplers, the
ensemble) are registered for ``keras.saving.load_model`` as soon as Keras is
imported, before or after ``keras_bnn`` (:func:`_register_with_keras`).
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

_SUBMODULES = ("callbacks", "data", "diagnostics", "experiment", "export", "layers",
               "likelihoods", "metrics", "models", "nonfinite", "plots", "priors", "runs",
               "ood", "samplers", "schedules", "serving")
_ATTRIBUTES = {
    "PosteriorEnsemble": "keras_bnn.ensemble",
    "BayesianModel": "keras_bnn.models.bayesian_model",
    "bayesian": "keras_bnn.bayesian",
    "GradientNoiseWarning": "keras_bnn.models.bayesian_model",
    "MissingPriorWarning": "keras_bnn.prior_guard",
    "NotConvergedWarning": "keras_bnn.callbacks",
    "NonFiniteError": "keras_bnn.nonfinite",
    "prior_predictive": "keras_bnn.predictive_checks",
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



#: Modules whose import registers the package's Keras classes
#: (``@keras.saving.register_keras_serializable``).
_SERIALIZABLE = ("keras_bnn.priors", "keras_bnn.layers", "keras_bnn.models",
                 "keras_bnn.samplers", "keras_bnn.ensemble")


def _register_with_keras():
    for module in _SERIALIZABLE:
        importlib.import_module(module)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Registers the package's classes right after ``import keras`` finishes.

    Saved models name their classes ``keras_bnn>Dense`` etc., which Keras
    finds only among registered objects: without this, ``import keras_bnn``
    followed by ``keras.saving.load_model(...)`` would fail until some
    ``keras_bnn`` name had been used. Importing Keras here instead would make
    every ``keras-bnn`` argument error wait for TensorFlow.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "keras":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _register_with_keras()

        spec.loader.exec_module = exec_module
        return spec


if "keras" in sys.modules:
    _register_with_keras()
else:
    sys.meta_path.insert(0, _AfterKerasImport())
