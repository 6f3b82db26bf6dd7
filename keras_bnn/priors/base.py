"""The base class of the priors, and the public module path they report.

A :class:`Prior` is a :class:`keras.regularizers.Regularizer` whose value on a
weight tensor w is ``-log p(w)``; subclasses implement :meth:`Prior.log_prob`
and :meth:`Prior.sample`.
"""

import keras
from keras import ops

from keras_bnn.validation import check_seed, check_shape

#: The module every prior class reports (``__module__``): Keras writes it into
#: serialized configs, and a :class:`keras_bnn.SampleStore` hashes those
#: configs into its architecture fingerprint, so it must not change when the
#: classes move between files.
PUBLIC_MODULE = "keras_bnn.priors"


def public(cls):
    """Class decorator: reports ``cls`` as ``keras_bnn.priors.<name>`` (see :data:`PUBLIC_MODULE`).

    Args:
        cls: a prior class.

    Returns:
        ``cls``, with ``__module__`` set to :data:`PUBLIC_MODULE`.
    """
    cls.__module__ = PUBLIC_MODULE
    return cls


def abs_with_zero_subgradient(x):
    """``|x|``, whose gradient at 0 is 0 under every Keras backend.

    ``ops.abs`` has gradient 0 at 0 under TensorFlow but 1 under JAX, so a
    Laplace prior pushed zero-initialised biases down by ``1/b`` on JAX's first
    step only, and the chains of the two backends parted (0 is a subgradient
    of ``|x|``, and the one TensorFlow takes).

    Args:
        x: tensor.

    Returns:
        Tensor ``|x|`` of the dtype of ``x``.
    """
    return ops.where(ops.not_equal(x, 0.0), ops.abs(x), 0.0)


@public
class Prior(keras.regularizers.Regularizer):
    """Base class: a log-density over a weight tensor that is also a regularizer.

    Subclasses implement :meth:`log_prob` (summed over all elements) and
    :meth:`sample`. ``__call__`` returns ``-log_prob(w)`` (a
    :class:`keras_bnn.BayesianModel` scales its layer losses by ``1/n``).
    """

    #: Smallest weight rank this prior accepts (see :meth:`validate_shape`).
    min_rank = 0

    def __call__(self, x):
        return ops.negative(self.log_prob(x))

    def log_prob(self, x):
        """Total log-density of ``x`` (a scalar, summed over all elements).

        Args:
            x: weight tensor.

        Returns:
            Scalar tensor ``log p(x)`` in the dtype of ``x``.
        """
        raise NotImplementedError

    def sample(self, shape, seed=None):
        """Draws one weight tensor of ``shape`` from the prior.

        Args:
            shape: tuple of ints.
            seed: int or ``keras.random.SeedGenerator``: equal seeds give equal
                draws.

        Returns:
            Tensor of ``shape`` (float32).

        Raises:
            ValueError: if ``shape`` has a rank the prior does not accept, or
                ``seed`` is neither a generator nor an int in [0, 2³¹ − 1].
        """
        raise NotImplementedError

    def validate_shape(self, shape, argument="prior"):
        """Checks that this prior can sit on a weight of ``shape``.

        Args:
            shape: the weight's shape.
            argument: name of the layer argument that carries this prior, used
                in the error message (e.g. ``"kernel_prior"``).

        Raises:
            ValueError: naming ``argument`` when the rank is too small.
        """
        if len(shape) < self.min_rank:
            raise ValueError(
                f"`{argument}`: {type(self).__name__} needs a weight of rank "
                f">= {self.min_rank}; got a weight of shape {tuple(shape)}."
            )

    def _sample_shape(self, shape):
        """``shape`` (of :meth:`sample`) as a tuple of sizes >= 1 of a rank this prior takes.

        Raises:
            ValueError: naming ``shape`` for anything else.
        """
        scalar = isinstance(shape, (tuple, list)) and not shape  # a scalar weight's ()
        sizes = () if scalar else check_shape(shape, "shape",
                                              owner=f"{type(self).__name__}.sample")
        self.validate_shape(sizes, "shape")
        return sizes

    def _seeds(self, seed):
        return seed if isinstance(seed, keras.random.SeedGenerator) else (
            keras.random.SeedGenerator(0 if seed is None
                                       else check_seed(seed, owner=type(self).__name__))
        )
