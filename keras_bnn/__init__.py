"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``metrics``, ``diagnostics``, ``data``, ``plots``,
``likelihoods``, ``serving``, ``experiment`` (what the ``keras-bnn`` command
runs).
"""

from keras_bnn import callbacks
from keras_bnn import data
from keras_bnn import diagnostics
from keras_bnn import experiment
from keras_bnn import layers
from keras_bnn import likelihoods
from keras_bnn import metrics
from keras_bnn import models
from keras_bnn import plots
from keras_bnn import priors
from keras_bnn import samplers
from keras_bnn import schedules
from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.prior_predictive import prior_predictive
from keras_bnn.store import SampleStore

__version__ = "0.1.0"

__all__ = [
    "BayesianModel",
    "PosteriorEnsemble",
    "SampleStore",
    "callbacks",
    "data",
    "diagnostics",
    "experiment",
    "layers",
    "likelihoods",
    "metrics",
    "models",
    "plots",
    "prior_predictive",
    "priors",
    "samplers",
    "schedules",
]
