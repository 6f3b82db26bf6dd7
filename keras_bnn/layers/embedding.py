"""Prior-aware embedding layer."""

import keras

from keras_bnn import priors
from keras_bnn.layers.prior_aware import PriorAwareMixin


@keras.saving.register_keras_serializable(package="keras_bnn")
class Embedding(PriorAwareMixin, keras.layers.Embedding):
    """``keras.layers.Embedding`` with a prior on the table: ``y = E[token]``.

    Args:
        input_dim: vocabulary size.
        output_dim: embedding dimension.
        embeddings_prior: prior on ``E`` (``(input_dim, output_dim)``);
            default ``Normal(0, 1)``. A lookup is a linear map of a one-hot
            vector (fan-in 1), so a fan-in-scaled prior would be meaningless
            here; a unit Gaussian gives unit-scale embeddings.
        **kwargs: every other ``keras.layers.Embedding`` argument except
            ``embeddings_regularizer``.

    Raises:
        ValueError: for an unknown prior, an ``embeddings_regularizer``, or (at
            build) a prior that does not fit the table, naming the argument.
    """

    prior_arguments = {
        "embeddings_prior": ("embeddings_regularizer", priors.Normal),
    }
