"""Model builders. Each returns a :class:`keras_bnn.BayesianModel` whose
outputs are logits (no softmax), built from prior-aware layers only, so every
weight carries a prior; compile with a ``from_logits=True`` loss, e.g.
``keras.losses.SparseCategoricalCrossentropy(from_logits=True)``.
"""

from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.models.cnn import cnn
from keras_bnn.models.cnn_lstm import cnn_lstm
from keras_bnn.models.mlp import mlp
from keras_bnn.models.resnet import resnet20_frn, resnet_pp

__all__ = ["BayesianModel", "cnn", "cnn_lstm", "mlp", "resnet20_frn", "resnet_pp"]
