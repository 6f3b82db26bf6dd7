"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``metrics``, ``diagnostics``, ``data``, ``plots``,
``serving``, ``experiment`` (what the ``keras-bnn`` command runs).
"""

from keras_bnn import callbacks
from keras_bnn import data
from keras_bnn import diagnostics
from keras_bnn import layers
from keras_bnn import metrics
from keras_bnn import models
from keras_bnn import plots
from keras_bnn import priors
from keras_bnn import samplers
from keras_bnn import schedules
from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.models.bayesian_model import BayesianModel, GradientNoiseWarning
from keras_bnn.prior_predictive import prior_predictive
from keras_bnn.store import SampleStore

__version__ = "0.1.0"

__all__ = [
    "BayesianModel",
    "GradientNoiseWarning",
    "PosteriorEnsemble",
    "SampleStore",
    "callbacks",
    "data",
    "diagnostics",
    "layers",
    "metrics",
    "models",
    "plots",
    "prior_predictive",
    "priors",
    "samplers",
    "schedules",
]
