"""Prior-aware Keras layers.

Every layer here takes one ``*_prior`` argument per weight (a
:class:`keras_bnn.priors.Prior`, a prior name, a serialized prior, or ``None``
for none) and attaches it as that weight's regularizer, so ``layer.losses``
holds ``-log p(w)`` and the layer serialises its priors.

Default priors: ``HeNormal(1.0)`` on kernels and ``Normal(0, 1)`` on biases
(see :data:`keras_bnn.layers.dense.KERNEL_PRIOR_ARGUMENTS` for why);
``Normal(0, 1)`` on embeddings; ``UnitNormDirection`` on weight-norm
directions and ``GroupLaplace(5)`` on their scales (ATMC paper); for FRN,
``Normal(1, 1)`` on γ and ``Normal(0, 1)`` on β and τ.
"""

from keras_bnn.layers.conv import Conv1D, Conv2D
from keras_bnn.layers.dense import Dense
from keras_bnn.layers.embedding import Embedding
from keras_bnn.layers.frn import FRN, TLU
from keras_bnn.layers.prior_aware import PriorAwareMixin
from keras_bnn.layers.recurrent import LSTM
from keras_bnn.layers.resnet_pp import ResNetPPBlock
from keras_bnn.layers.weight_norm import WeightNormConv2D, WeightNormDense

__all__ = [
    "Conv1D",
    "Conv2D",
    "Dense",
    "Embedding",
    "FRN",
    "LSTM",
    "PriorAwareMixin",
    "ResNetPPBlock",
    "TLU",
    "WeightNormConv2D",
    "WeightNormDense",
]
