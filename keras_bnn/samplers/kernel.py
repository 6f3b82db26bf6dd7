"""The transition-kernel interface that ``BayesianModel.train_step`` drives.

A train step of a :class:`keras_bnn.BayesianModel` is one transition of a
Markov chain on the trainable weights θ. The model binds the batch into a
:class:`BatchPotential` (functions of θ built from :mod:`keras_bnn.backend`)
and hands it to its kernel's :meth:`TransitionKernel.transition`; the kernel
never calls back into the model. Two kinds implement the interface:

* the SG-MCMC samplers (:class:`keras_bnn.samplers.Sampler`), one optimizer
  update from the minibatch gradient at the current weights
  (:func:`gradient_step`), and :class:`OptimizerKernel`, the same step of a
  plain Keras optimizer (the SGD/MAP baseline);
* :class:`keras_bnn.samplers.HMC`, a whole leapfrog trajectory and
  Metropolis test, which evaluates the potential at weight values of its own.
"""

import abc
from typing import Any, Callable, NamedTuple, Optional

from keras_bnn import backend


class BatchPotential(NamedTuple):
    """The mean-form potential ``U(θ)/n`` of one batch, as a kernel sees it.

    ``U(θ)/n = mean_i(-log p(y_i|x_i,θ)) + (1/n)·(-log p(θ))`` (see
    :meth:`keras_bnn.BayesianModel.potential_terms`).

    Attributes:
        at_current: ``() -> (y_pred, loss, prior_term, gradients)``: the
            forward pass at the current weights (non-trainable updates such
            as batch statistics applied), this replica's potential and prior
            term, and its gradients, which an optimizer sums over replicas
            (``backend.value_and_gradients``).
        at: ``values -> (potential, gradients, (y_pred, loss, prior_term))``:
            the global potential and its gradients at weight values
            ``values`` (one tensor per trainable variable; nothing is
            assigned), identical on every replica, and this replica's
            predictions, potential and prior term there
            (``backend.potential_and_gradients``).
        batch_size: the number of examples in the (global) batch, or None
            when it is not static, under several replicas (whose static
            length is not the global batch's: ``fit`` and ``train_on_batch``
            check it on the host), or when the loss averages over other
            terms than examples (``train_size`` then counts those:
            :func:`keras_bnn.loss_terms.counts_terms`).
    """

    at_current: Callable[[], tuple]
    at: Callable[[list], tuple]
    batch_size: Optional[int]


class Transition(NamedTuple):
    """What one transition reports back to the model.

    Attributes:
        y_pred: predictions at the state the transition started from.
        loss: this replica's mean-form potential there.
        prior_term: this replica's ``(1/n)·(-log p(θ))`` there.
        skipped: float scalar, 1.0 when the step changed nothing because the
            potential or a gradient was not finite (the XLA and JAX side of
            :mod:`keras_bnn.nonfinite`), else 0.0.
        logs: ``{name: scalar tensor}``, one entry per name of the kernel's
            :attr:`TransitionKernel.metric_names`.
    """

    y_pred: Any
    loss: Any
    prior_term: Any
    skipped: Any
    logs: dict


class TransitionKernel(abc.ABC):
    """One Markov transition of a model's trainable weights per train step."""

    #: Whether each transition must see the whole training set to target the
    #: posterior exactly (HMC's Metropolis test); a minibatch kernel
    #: (SG-MCMC) is exact only as its step size goes to 0.
    full_batch = False

    @property
    @abc.abstractmethod
    def metric_names(self):
        """The names of the diagnostics :meth:`transition` logs, in log order.

        Returns:
            Tuple of names among ``step_size``, ``kinetic_temperature``,
            ``configurational_temperature``, ``gradient_noise_ratio`` and
            ``acceptance_rate``.
        """

    @abc.abstractmethod
    def transition(self, potential, variables, skip_nonfinite):
        """Moves ``variables`` (and the kernel's state) one transition.

        Args:
            potential: the batch's :class:`BatchPotential`.
            variables: the model's trainable variables.
            skip_nonfinite: True where a NaN/Inf step cannot raise (XLA,
                JAX): the step then changes nothing and reports
                ``skipped = 1``; False: it raises (TensorFlow graph mode,
                ``InvalidArgumentError`` with :data:`keras_bnn.nonfinite.MARKER`).

        Returns:
            A :class:`Transition`.
        """

    def check_batch_size(self, x=None, batch_size=None, terms=None):
        """Called by ``BayesianModel.fit`` with its ``x`` and the batch size.

        A minibatch kernel accepts any batch; a :attr:`full_batch` kernel
        warns here when a batch would hold fewer than all examples.

        Args:
            x: the training inputs.
            batch_size: ``fit``'s ``batch_size`` for arrays; for a dataset or
                ``PyDataset`` the size of its first batch (None: unknown).
            terms: the loss terms of that first batch where the loss
                averages over other terms than examples (``train_size``
                counts them: :func:`keras_bnn.loss_terms.counts_terms`),
                else None.
        """
        del x, batch_size, terms


def gradient_step(optimizer, potential, variables, skip_nonfinite):
    """One optimizer update from the batch gradient at the current weights.

    ``optimizer.apply(∇(U/n), θ)``, under the NaN/Inf policy of
    :mod:`keras_bnn.nonfinite`: with ``skip_nonfinite`` a non-finite step is
    skipped whole (``backend.apply_if_finite``); otherwise the optimizer's
    own check raises (``Sampler.apply``; a plain Keras optimizer applies).

    Args:
        optimizer: a Keras optimizer (a :class:`keras_bnn.samplers.Sampler`
            or the baseline's).
        potential: the batch's :class:`BatchPotential`.
        variables: the trainable variables.
        skip_nonfinite: see :meth:`TransitionKernel.transition`.

    Returns:
        ``(y_pred, loss, prior_term, skipped)`` as in :class:`Transition`.
    """
    y_pred, loss, prior_term, gradients = potential.at_current()
    if skip_nonfinite:
        skipped = backend.apply_if_finite(optimizer, loss, gradients, variables)
    else:
        optimizer.apply(gradients, variables)
        skipped = 0.0
    return y_pred, loss, prior_term, skipped


class OptimizerKernel(TransitionKernel):
    """A plain Keras optimizer as a kernel: the SGD/MAP baseline.

    Each transition is one :func:`gradient_step`; nothing beyond the loss is
    logged.

    Args:
        optimizer: a ``keras.optimizers.Optimizer``.
    """

    metric_names = ()

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def transition(self, potential, variables, skip_nonfinite):
        return Transition(*gradient_step(self.optimizer, potential, variables, skip_nonfinite),
                          logs={})
