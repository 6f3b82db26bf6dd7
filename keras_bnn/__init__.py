"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``nonfinite`` (the NaN/Inf policy), ``metrics``,
``diagnostics``, ``directional_noise`` (the gradient noise by direction),
``equilibrium`` (the stationarity test that starts collection),
``collection_drift`` (the drift test of the collected epochs),
``data``, ``plots``, ``likelihoods``, ``export`` (TF Serving export;
TensorFlow backend), ``serving``, ``runs`` (what the ``keras-bnn`` command
runs; ``experiment`` is its former name).

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

_SUBMODULES = ("callbacks", "collection_drift", "data", "diagnostics", "directional_noise",
               "equilibrium", "experiment", "export", "layers", "likelihoods", "metrics", "models",
               "nonfinite", "plots", "priors", "runs", "ood", "samplers", "schedules", "serving")
_ATTRIBUTES = {
    "PosteriorEnsemble": "keras_bnn.ensemble",
    "BayesianModel": "keras_bnn.models.bayesian_model",
    "bayesian": "keras_bnn.bayesian",
    "DataDirWarning": "keras_bnn.fashion_mnist",
    "GradientNoiseWarning": "keras_bnn.models.fit_callbacks",
    "MidEpochBackupWarning": "keras_bnn.callbacks",
    "MinibatchHMCWarning": "keras_bnn.samplers.hmc",
    "MissingPriorWarning": "keras_bnn.prior_guard",
    "NoEnsembleWarning": "keras_bnn.callbacks",
    "NotConvergedWarning": "keras_bnn.callbacks",
    "RestoredWeightsWarning": "keras_bnn.callbacks",
    "SequentialAsOneLayerWarning": "keras_bnn.bayesian",
    "ShortWarmupWarning": "keras_bnn.samplers.warmup",
    "StiffnessWarning": "keras_bnn.samplers.warmup",
    "StochasticLayerWarning": "keras_bnn.stochastic_layers",
    "TrainSizeWarning": "keras_bnn.train_size",
    "UnservedVersionWarning": "keras_bnn.models_config",
    "ValidationWeightWarning": "keras_bnn.validation_weights",
    "WarmupSampleWarning": "keras_bnn.callbacks",
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
    """Registers the package's classes once Keras is imported.

    Saved models name their classes ``keras_bnn>Dense`` etc., which Keras
    finds only among registered objects: without this, ``import keras_bnn``
    followed by ``keras.saving.load_model(...)`` would fail until some
    ``keras_bnn`` name had been used. Importing Keras here instead would make
    every ``keras-bnn`` argument error wait for TensorFlow.

    When Keras is first imported by a ``keras_bnn`` module (``kb.priors`` as
    the first name used), that module is still half-executed: registering
    then would import modules that read names it has not yet defined. So the
    finder also wraps the loading of every ``keras_bnn.*`` module and, in that
    case, registers when the outermost one has finished executing.
    """

    def __init__(self):
        self.depth = 0  # keras_bnn modules executing, nested
        self.keras_imported = False

    def find_spec(self, name, path=None, target=None):
        if name != "keras" and not name.startswith("keras_bnn."):
            return None
        spec = self._spec_from_other_finders(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module
        if name == "keras":
            def exec_module(module):
                load(module)
                self.keras_imported = True
                self._register_when_idle()
        else:
            def exec_module(module):
                self.depth += 1
                try:
                    load(module)
                finally:
                    self.depth -= 1
                self._register_when_idle()
        spec.loader.exec_module = exec_module
        return spec

    def _spec_from_other_finders(self, name, path, target):
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    return spec
        return None

    def _register_when_idle(self):
        if self.keras_imported and self.depth == 0 and self in sys.meta_path:
            sys.meta_path.remove(self)
            _register_with_keras()


if "keras" in sys.modules:
    _register_with_keras()
else:
    sys.meta_path.insert(0, _AfterKerasImport())
