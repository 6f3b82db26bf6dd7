"""The dataset loaders behind :mod:`keras_bnn.data` (its public interface).

:mod:`~keras_bnn.datasets.pipeline` (in-memory arrays as ``tf.data``),
:mod:`~keras_bnn.datasets.synthetic` (the teacher task),
:mod:`~keras_bnn.datasets.bundled` (scikit-learn's bundled sets) and
:mod:`~keras_bnn.datasets.tfds_loaders` (MNIST, CIFAR-10, IMDB). None of them
imports TensorFlow at import time.
"""
