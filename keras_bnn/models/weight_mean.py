"""The mean of the weights a dataset gives ``fit``, counted by the train step.

``fit`` checks array ``sample_weight`` and ``class_weight`` before training
(:func:`keras_bnn.train_size.warn_on_train_size`); the weights of a
``tf.data.Dataset``, ``PyDataset`` or generator that yields ``(x, y, w)``,
and ``class_weight`` with one (Keras maps it into per-example weights), are
only seen batch by batch. The train step adds each batch's weights to
:class:`WeightTotals` (three scalars, summed over replicas: no host work,
no second pass over the data), and :class:`WarnOnEpochTotals` reads them
once, after the first epoch, and issues the
:class:`keras_bnn.TrainSizeWarning` of the array check when their mean is
not 1. For a per-timestep loss the step also sums the terms the loss
averages over (its unmasked, not ignored timesteps) and the sequences (two
scalars more): after a first epoch that is one pass over a dataset,
:class:`WarnOnEpochTotals` compares them with ``train_size``, exactly
(the first batch's check before training, in
:func:`keras_bnn.train_size.warn_on_train_size`, only catches ``train_size``
= the number of sequences, and only estimates the terms). Like the array
checks, each ``fit`` checks its own data and its warning names the line
that called ``fit`` (not this module's), so that Python's warning filters
treat both alike: the default filter shows a message once per calling
line, ``"always"`` at every ``fit``.
"""

import math

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import loss_terms
from keras_bnn.fit_data import array_examples
from keras_bnn.train_size import WEIGHT_MEAN_TOLERANCE, warn_on_terms, warn_on_weight_mean
from keras_bnn.likelihoods import normalises_weights

#: Standard errors of the mean a first epoch that is not one pass over the
#: data (``steps_per_epoch``) may differ by from the data's mean: a
#: two-sided normal tail of 6e-5, a false warning in one fit of ~16 000.
STANDARD_ERRORS = 4.0


class WeightTotals(keras.metrics.Metric):
    """Σw, Σw², the number of weights, and the loss's terms and sequences, that the train
    step has seen since :meth:`clear`.

    A Keras metric so that its state is the step's on every backend (JAX
    passes it in and out of the compiled step; ``tf.distribute`` keeps a
    copy per replica, summed when read). Keras resets every metric at each
    epoch and at ``evaluate`` (validation included): :meth:`reset_state`
    does nothing, so the first epoch's totals last until
    :class:`WarnOnEpochTotals` reads them. Its ``result()`` is empty: it
    logs nothing.
    """

    def __init__(self, name="weight_totals", **kwargs):
        super().__init__(name=name, **kwargs)
        self.totals = [self.add_variable(shape=(), initializer="zeros", name=part,
                                         aggregation="sum")
                       for part in ("total", "squares", "count", "terms", "sequences")]

    def update_state(self, sample_weight):
        """Adds a batch's weights (one tensor, or a structure of them: every leaf counts).

        Args:
            sample_weight: the batch's ``sample_weight`` as the step unpacks it.
        """
        leaves = [ops.reshape(ops.cast(w, self.dtype), (-1,))
                  for w in keras.tree.flatten(sample_weight)]
        weights = ops.concatenate(leaves) if len(leaves) > 1 else leaves[0]
        for variable, value in zip(self.totals, (ops.sum(weights), ops.sum(weights * weights),
                                                 ops.cast(ops.size(weights), self.dtype))):
            variable.assign_add(value)

    def add_terms(self, model, y, y_pred, sequences):
        """Adds a batch's loss terms (:func:`keras_bnn.loss_terms.step_terms`) and sequences,
        for a per-timestep loss or one of an ``ignore_class`` (nothing otherwise:
        decided at trace time).

        Args:
            model: the model whose train step calls this.
            y, y_pred: the batch's labels and predictions.
            sequences: the batch's number of examples.
        """
        terms = loss_terms.step_terms(model, y, y_pred)
        if terms is None:
            return
        for variable, value in zip(self.totals[3:], (terms, sequences)):
            variable.assign_add(ops.cast(value, self.dtype))

    def reset_state(self):
        """Nothing: the totals last across Keras' resets (see :meth:`clear`)."""

    def clear(self):
        """Sets the totals to 0 (``fit``'s start)."""
        for variable in self.totals:
            variable.assign(ops.zeros((), self.dtype))

    def result(self):
        """``{}``: nothing logged."""
        return {}

    def read(self):
        """``(mean, standard deviation, count)`` of the weights seen, on the host.

        Returns:
            Floats; ``(nan, nan, 0.0)`` when no weight was seen.
        """
        total, squares, count = (float(backend.to_numpy(v)) for v in self.totals[:3])
        if count == 0:
            return math.nan, math.nan, 0.0
        mean = total / count
        return mean, math.sqrt(max(squares / count - mean * mean, 0.0)), count

    def read_terms(self):
        """``(terms, sequences)`` seen, on the host (floats; 0 where none was counted)."""
        return tuple(float(backend.to_numpy(v)) for v in self.totals[3:])


class WarnOnEpochTotals(keras.callbacks.Callback):
    """Warns after ``fit``'s first epoch when its weights do not average 1, or when its
    loss's terms are not ``train_size``.

    ``U(θ) = n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)``: weights of mean m weigh
    the data as m·n examples. An epoch that is one pass over the data (no
    ``steps_per_epoch``) saw every weight once, so its mean is the data's,
    held to the array check's :data:`keras_bnn.train_size.WEIGHT_MEAN_TOLERANCE`;
    with ``steps_per_epoch`` the epoch's m weights are a sample of them
    (or more than one pass), allowed ``STANDARD_ERRORS·s/√m`` more
    (s: their standard deviation). A per-timestep loss's ``n·mean(ℓ)`` is
    the data's ``Σ ℓ`` only for n = its terms ``Σ m`` over the data: a
    one-pass epoch counted them all, and n off by more than the same
    relative tolerance warns. Nothing is read before the end of the first
    epoch, nor after it.

    Args:
        totals: the model's :class:`WeightTotals`.
        name: the weights, as the warning names them, or None (not checked).
        train_size: the model's n.
        one_pass: whether an epoch is one pass over the data.
        where: the line that called ``fit``, which the warning names
            (:func:`keras_bnn.train_size.call_site`).
        check_terms: whether to check the terms against ``train_size``:
            ``"timesteps"`` (a per-timestep loss's), ``"labels"`` (the labels
            an ``[N, K]`` output's loss scores, not its ``ignore_class``:
            checked also where every label was scored), or False.
    """

    def __init__(self, totals, name, train_size, one_pass, where, check_terms=False):
        super().__init__()
        self.totals, self.name, self.train_size, self.one_pass = (totals, name, train_size,
                                                                  one_pass)
        self.where, self.check_terms = where, check_terms
        self.done = False

    def on_train_begin(self, logs=None):
        self.totals.clear()
        self.done = False

    def on_epoch_end(self, epoch, logs=None):
        if self.done:
            return
        self.done = True
        if self.check_terms:
            terms, sequences = self.totals.read_terms()
            labels = self.check_terms == "labels"
            if (sequences and (terms != sequences or labels)
                    and abs(terms - self.train_size) > WEIGHT_MEAN_TOLERANCE * terms):
                warn_on_terms(self.train_size, f"{sequences:.0f}", f"{terms:.0f}", self.where,
                              per_timestep=not labels)
        mean, spread, count = self.totals.read()
        if self.name is None or count == 0:  # no weights in the data
            return
        allowed = WEIGHT_MEAN_TOLERANCE + (
            0.0 if self.one_pass else STANDARD_ERRORS * spread / math.sqrt(count))
        if abs(mean - 1.0) > allowed:
            warn_on_weight_mean(self.name, mean, f"the first epoch's {count:.0f} weights",
                                self.train_size, where=self.where)


def for_fit(model, arguments, where, terms_warned=False):
    """The :class:`WarnOnEpochTotals` of ``model.fit(**arguments)``, or None where it has none.

    Arrays' weights and terms are checked before training
    (:func:`keras_bnn.train_size.warn_on_train_size`), and a loss of reduction
    ``"mean_with_sample_weight"`` normalises the weights in each batch. The
    terms are checked for a loss whose terms are not its examples (per
    timestep, or of an ``ignore_class``: :func:`keras_bnn.loss_terms.counts_terms`),
    an epoch of one pass (no
    ``steps_per_epoch``) and where the first batch's check did not warn.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        arguments: ``fit``'s arguments by name.
        where: the line that called ``fit``, which the warning names
            (:func:`keras_bnn.train_size.call_site`).
        terms_warned: whether ``warn_on_train_size`` warned already.

    Returns:
        The callback, or None.
    """
    if array_examples(arguments.get("x")) is not None:
        return None
    one_pass = arguments.get("steps_per_epoch") is None
    name = None if normalises_weights(model.loss) else (
        "fit's class_weight" if arguments.get("class_weight") else
        "the sample_weight in fit's data")
    check_terms = one_pass and not terms_warned and loss_terms.counts_terms(model) and (
        "timesteps" if loss_terms.has_positions(model) else "labels")
    if name is None and not check_terms:
        return None
    return WarnOnEpochTotals(model._sampling_trackers["weight_totals"], name, model.train_size,
                             one_pass=one_pass, where=where, check_terms=check_terms)
