"""Tiny models of each kind of Keras layer, for the walk of ``tests/test_layer_priors.py``.

Importable from ``tests/`` and from ``tests/workers/layer_priors_reload.py``
(which reloads their saved files in a fresh process: the classes registered
here must be importable there). Each model maps its input to 3 logits.
"""

import keras
import numpy as np

import keras_bnn as kb

L = keras.layers
#: Examples in a model's batch of data (two batches of 4: two sampler steps).
N = 8


@keras.saving.register_keras_serializable(package="layer_models")
class TwoDense(keras.Model):
    """A subclassed model: its Dense layers are named per process (``dense_7``)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = L.Dense(4, activation="tanh")
        self.out = L.Dense(3)

    def call(self, inputs):
        return self.out(self.hidden(inputs))


@keras.saving.register_keras_serializable(package="layer_models")
class Scale(L.Layer):
    """A custom layer whose weight has no ``*_regularizer`` attribute (``add_weight``)."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(int(input_shape[-1]), 3), name="w")

    def call(self, inputs):
        return inputs @ self.w


def _head(inputs, hidden):
    """The functional model of ``inputs`` whose ``hidden`` feeds 3 logits."""
    return keras.Model(inputs, L.Dense(3, name="logits")(L.Flatten()(hidden)))


def _sequence(layer, steps=5, features=3):
    inputs = keras.Input((steps, features))
    return _head(inputs, layer(inputs))


def _image(layer, shape=(6, 6, 2)):
    inputs = keras.Input(shape)
    return _head(inputs, layer(inputs))


def _embedding():
    inputs = keras.Input((5,), dtype="int32")
    return _head(inputs, L.Embedding(10, 4)(inputs))


def _stateful():
    inputs = keras.Input(batch_shape=(4, 5, 3))
    return _head(inputs, L.LSTM(4, stateful=True)(inputs))


def _normalized(layer):
    inputs = keras.Input((4,))
    return _head(inputs, layer(L.Dense(4)(inputs)))


def _attention():
    inputs = keras.Input((5, 4))
    return _head(inputs, L.MultiHeadAttention(2, 3, name="mha")(inputs, inputs))


def _shared():
    inputs = keras.Input((4,))
    shared = L.Dense(4, activation="tanh", name="shared")
    return _head(inputs, shared(shared(inputs)))


def _nested_sequential():
    inner = keras.Sequential([keras.Input((4,)), L.Dense(5, name="inner")], name="seq")
    inputs = keras.Input((4,))
    return _head(inputs, inner(inputs))


def _nested_functional():
    inner_inputs = keras.Input((4,))
    inner = keras.Model(inner_inputs, L.Dense(5, name="inner")(inner_inputs), name="fun")
    inputs = keras.Input((4,))
    return _head(inputs, inner(inputs))


def _subclassed():
    for _ in range(3):  # numbers its Dense layers past those of a fresh process
        L.Dense(1)
    model = TwoDense()
    model(np.zeros((1, 4), "float32"))
    return model


def _custom_weight():
    inputs = keras.Input((4,))
    return keras.Model(inputs, Scale()(inputs))


#: ``{case: (make the Keras model, input shape of one example, input dtype)}``.
CASES = {
    "embedding": (_embedding, (5,), "int32"),
    "lstm": (lambda: _sequence(L.LSTM(4)), (5, 3), "float32"),
    "gru_sequences": (lambda: _sequence(L.GRU(4, return_sequences=True)), (5, 3), "float32"),
    "simple_rnn": (lambda: _sequence(L.SimpleRNN(4)), (5, 3), "float32"),
    "bidirectional": (lambda: _sequence(L.Bidirectional(L.LSTM(3, return_sequences=True))),
                      (5, 3), "float32"),
    "stateful_lstm": (_stateful, (5, 3), "float32"),
    "conv1d": (lambda: _sequence(L.Conv1D(3, 3), steps=8, features=2), (8, 2), "float32"),
    "conv2d": (lambda: _image(L.Conv2D(3, 3)), (6, 6, 2), "float32"),
    "conv3d": (lambda: _image(L.Conv3D(2, 2), (4, 4, 4, 1)), (4, 4, 4, 1), "float32"),
    "conv2d_transpose": (lambda: _image(L.Conv2DTranspose(2, 3, strides=2), (3, 3, 2)),
                         (3, 3, 2), "float32"),
    "depthwise_conv2d": (lambda: _image(L.DepthwiseConv2D(3, depth_multiplier=2)),
                         (6, 6, 2), "float32"),
    "separable_conv2d": (lambda: _image(L.SeparableConv2D(3, 3)), (6, 6, 2), "float32"),
    "layer_normalization": (lambda: _normalized(L.LayerNormalization()), (4,), "float32"),
    "group_normalization": (lambda: _normalized(L.GroupNormalization(groups=2)), (4,),
                            "float32"),
    "multi_head_attention": (_attention, (5, 4), "float32"),
    "einsum_dense": (lambda: _sequence(L.EinsumDense("abc,cd->abd", output_shape=(5, 3),
                                                     bias_axes="d"), features=4),
                     (5, 4), "float32"),
    "time_distributed": (lambda: _sequence(L.TimeDistributed(L.Dense(3))), (5, 3), "float32"),
    "shared_layer": (_shared, (4,), "float32"),
    "nested_sequential": (_nested_sequential, (4,), "float32"),
    "nested_functional": (_nested_functional, (4,), "float32"),
    "subclassed": (_subclassed, (4,), "float32"),
    "custom_weight": (_custom_weight, (4,), "float32"),
}
#: The priors the walk gives: ``kernel_prior``, ``bias_prior`` (fixed scales, so
#: that the test computes ``-log p`` by hand; embeddings and normalisation
#: scales get ``kb.bayesian``'s named defaults).
KERNEL_PRIOR, BIAS_PRIOR = kb.priors.Normal(0.0, 0.7), kb.priors.Laplace(0.3)


def case(name, seed=0):
    """``(BayesianModel, x, y)`` of a case: ``N`` examples, labels 0, 1, 2, 0, ..."""
    make, shape, dtype = CASES[name]
    keras.utils.set_random_seed(seed)
    model = kb.bayesian(make(), kernel_prior=KERNEL_PRIOR, bias_prior=BIAS_PRIOR)
    rng = np.random.default_rng(seed)
    x = (rng.integers(0, 10, size=(N, *shape)) if dtype == "int32"
         else rng.normal(size=(N, *shape))).astype(dtype)
    return model, x, np.arange(N, dtype="int32") % 3


def prior_configs(model):
    """Each trainable weight's prior, in order: ``[shape, class name, config]``."""
    return [[list(v.shape), type(v.regularizer).__name__,
             None if v.regularizer is None else v.regularizer.get_config()]
            for v in model.trainable_variables]


def minus_log_prior(model):
    """``-log p(θ)`` of the model's weights, from their priors (``kb.priors.log_prior``)."""
    return -float(keras.ops.convert_to_numpy(kb.priors.log_prior(model)))


def block_with_one_conv_prior():
    """A ``kb.layers.ResNetPPBlock`` whose first convolution's direction has a prior of its
    own (the block's config records one prior for all its convolutions)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 6, 2))
    hidden = kb.layers.ResNetPPBlock(2, name="blk")(inputs)
    return kb.bayesian(_head(inputs, hidden),
                       priors={"blk/conv1/direction": kb.priors.Normal(0.0, 0.5)})
