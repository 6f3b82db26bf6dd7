"""keras_bnn: Bayesian deep learning by sampling, for Keras 3.

Submodules: ``priors``, ``layers``, ``models``, ``samplers``, ``schedules``,
``callbacks``, ``metrics``, ``diagnostics``, ``data``, ``plots``.
"""

from keras_bnn import callbacks
from keras_bnn import priors
from keras_bnn import samplers
from keras_bnn import schedules
from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.store import SampleStore

__version__ = "0.1.0"

__all__ = ["BayesianModel", "PosteriorEnsemble", "SampleStore", "callbacks", "priors", "samplers", "schedules"]
