"""The IMDB CNN-LSTM of the cold-posterior paper, with priors."""

import keras

from keras_bnn import layers
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.validation import argument_error, check_int


def cnn_lstm(
    vocab_size,
    num_classes=2,
    sequence_length=100,
    embedding_dim=128,
    filters=64,
    kernel_size=5,
    pool_size=4,
    lstm_units=70,
    embeddings_prior="normal",
    kernel_prior="he_normal",
    bias_prior="normal",
    name="cnn_lstm",
):
    """Builds Embedding → Conv1D(ReLU) → MaxPool1D → LSTM → Dense.

    The defaults are the cold-posterior paper's IMDB model (20k-word
    vocabulary, 100 tokens, 128-d embeddings, 64 filters of width 5, pool 4,
    70 LSTM units, no dropout).

    Args:
        vocab_size: number of token ids (inputs are ints in ``[0, vocab_size)``).
        num_classes: number of output logits.
        sequence_length: tokens per example, or ``None`` for variable length.
        embedding_dim: embedding size.
        filters: Conv1D output channels.
        kernel_size: Conv1D window.
        pool_size: max-pooling window and stride.
        lstm_units: LSTM state size.
        embeddings_prior: prior on the embedding table (default
            ``Normal(0, 1)``).
        kernel_prior: prior on the Conv1D, LSTM (input and recurrent) and
            Dense kernels (default ``HeNormal(1.0)``).
        bias_prior: prior on every bias (default ``Normal(0, 1)``).
        name: model name.

    Returns:
        A :class:`keras_bnn.BayesianModel` mapping int token ids
        ``(batch, sequence_length)`` to logits (no softmax): compile it with a
        ``from_logits=True`` loss.

    Raises:
        ValueError: naming the argument, for a non-positive size argument, a
            ``sequence_length`` below ``kernel_size - 1 + pool_size`` (too
            short for the convolution and the pooling), or an unknown prior.
    """
    sizes = dict(vocab_size=vocab_size, num_classes=num_classes, embedding_dim=embedding_dim,
                 filters=filters, kernel_size=kernel_size, pool_size=pool_size,
                 lstm_units=lstm_units)
    (vocab_size, num_classes, embedding_dim, filters, kernel_size, pool_size, lstm_units) = (
        check_int(value, argument, 1, owner="cnn_lstm") for argument, value in sizes.items())
    if sequence_length is not None:
        sequence_length = check_int(sequence_length, "sequence_length", 1, owner="cnn_lstm")
    shortest = kernel_size - 1 + pool_size
    if sequence_length is not None and sequence_length < shortest:
        raise argument_error(
            "sequence_length", f"be >= kernel_size - 1 + pool_size = {shortest} (the "
            "convolution leaves sequence_length - kernel_size + 1 steps, the pooling needs "
            "pool_size of them)", sequence_length, "cnn_lstm")
    priors = dict(kernel_prior=kernel_prior, bias_prior=bias_prior)
    inputs = keras.Input(shape=(sequence_length,), dtype="int32", name="tokens")
    x = layers.Embedding(
        vocab_size, embedding_dim, embeddings_prior=embeddings_prior, name="embedding"
    )(inputs)
    x = layers.Conv1D(filters, kernel_size, activation="relu", name="conv", **priors)(x)
    x = keras.layers.MaxPooling1D(pool_size, name="pool")(x)
    x = layers.LSTM(lstm_units, recurrent_kernel_prior=kernel_prior, name="lstm", **priors)(x)
    logits = layers.Dense(num_classes, name="logits", **priors)(x)
    return BayesianModel(inputs, logits, name=name)
