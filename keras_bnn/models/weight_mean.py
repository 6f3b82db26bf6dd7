"""The mean of the weights a dataset gives ``fit``, counted by the train step.

``fit`` checks array ``sample_weight`` and ``class_weight`` before training
(:func:`keras_bnn.train_size.warn_on_train_size`); the weights of a
``tf.data.Dataset``, ``PyDataset`` or generator that yields ``(x, y, w)``,
and ``class_weight`` with one (Keras maps it into per-example weights), are
only seen batch by batch. The train step adds each batch's weights to
:class:`WeightTotals` (three scalars an output, summed over replicas: no host work,
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
from keras_bnn.loss_checks import normalises_weights
from keras_bnn.output_slots import output_paths, slot_name, weight_slots
from keras_bnn.train_size import WEIGHT_MEAN_TOLERANCE, warn_on_terms, warn_on_weight_mean
from keras_bnn.validation_weights import warn_on_validation_mean

#: Standard errors of the mean a first epoch that is not one pass over the
#: data (``steps_per_epoch``) may differ by from the data's mean: a
#: two-sided normal tail of 6e-5, a false warning in one fit of ~16 000.
STANDARD_ERRORS = 4.0


def weight_names(sample_weight, paths, template="the sample_weight{} in fit's data"):
    """How :class:`WarnOnEpochTotals` names each output's weights, in their slots
    (:func:`keras_bnn.output_slots.weight_slots`, as the array check names them).

    Args:
        sample_weight: the first batch's weights, or None where it is unknown.
        paths: the outputs' paths (:func:`keras_bnn.output_slots.output_paths`).
        template: the name, ``{}`` where the output's key goes.

    Returns:
        list: a name for each output, ``"the sample_weight['bin'] in fit's data"`` for
        one output's, ``"the sample_weight in fit's data"`` for the first slot's otherwise.

    Raises:
        ValueError: for weights without an entry at an output's path.
    """
    names = [template.format(f" (output {index})" if index else "")
             for index in range(len(paths))]
    if sample_weight is None:
        return names
    for index, leaves in enumerate(weight_slots(sample_weight, paths,
                                                template.format("").replace("the ", ""))):
        if slot_name(leaves):  # one output's weights, by key or position
            names[index] = template.format(slot_name(leaves))
    return names


def match_outputs(model, y):
    """Gives ``model``'s :class:`WeightTotals` a slot for each output ``fit``'s labels
    ``y`` have, where the model does not say its outputs (a subclassed one: Keras
    broadcasts one loss to every output, or the loss ``compile`` was given last
    has another structure than the one its totals were made for).

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        y: ``fit``'s labels, or a batch's; None: nothing changes.
    """
    trackers = model._sampling_trackers
    paths = output_paths(model, y)
    if y is None or trackers["weight_totals"].paths == paths:
        return
    for name in ("weight_totals", "validation_weight_totals"):
        totals = WeightTotals(paths, name=name)
        if model._tracker.is_in_store("metrics", trackers[name]):
            model._tracker.replace_tracked_value("metrics", trackers[name], totals)
        dict.__setitem__(trackers, name, totals)  # tracked above (the tracker may be locked)
    model.train_function = model.test_function = None  # traced with the old ones


class WeightTotals(keras.metrics.Metric):
    """Σw, Σw², the number of weights (by output), and the loss's terms and sequences, that
    the train step has seen since :meth:`clear`.

    A Keras metric so that its state is the step's on every backend (JAX
    passes it in and out of the compiled step; ``tf.distribute`` keeps a
    copy per replica, summed when read). Keras resets every metric at each
    epoch and at ``evaluate`` (validation included): :meth:`reset_state`
    does nothing, so the first epoch's totals last until
    :class:`WarnOnEpochTotals` reads them. Its ``result()`` is empty: it
    logs nothing.

    Args:
        paths: the model's outputs' paths (:func:`keras_bnn.output_slots.output_paths`): a
            slot of weight totals each (:func:`keras_bnn.output_slots.weight_slots`).
        name: the metric's name.
    """

    def __init__(self, paths=((),), name="weight_totals", **kwargs):
        super().__init__(name=name, **kwargs)
        self.paths = [tuple(path) for path in paths]
        outputs = len(self.paths)
        self.weight_totals = [self.add_variable(shape=(outputs,), initializer="zeros",
                                                name=part, aggregation="sum")
                              for part in ("total", "squares", "count")]
        self.term_totals = [self.add_variable(shape=(), initializer="zeros", name=part,
                                              aggregation="sum")
                            for part in ("terms", "sequences")]

    def update_state(self, sample_weight, counted=None):
        """Adds a batch's weights to their outputs' totals
        (:func:`keras_bnn.output_slots.weight_slots`).

        Args:
            sample_weight: the batch's ``sample_weight`` as the step unpacks it.
            counted: the positions the loss counts (``[b, T, ...]`` of 0/1:
                :func:`keras_bnn.loss_terms.step_positions`), or None (every
                weight counts): the totals are then ``Σ m·w``, ``Σ m·w²`` and
                ``Σ m``, as the array check's mean over the loss's terms.
        """
        sums = []
        for leaves in weight_slots(sample_weight, self.paths):
            weights, counts = zip(*(self._flat(w, counted) for _, w in leaves)) if leaves else (
                [ops.zeros((0,), self.dtype)], [ops.zeros((0,), self.dtype)])
            weights, counts = ops.concatenate(weights), ops.concatenate(counts)
            sums.append((ops.sum(counts * weights), ops.sum(counts * weights * weights),
                         ops.sum(counts)))
        for variable, values in zip(self.weight_totals, zip(*sums)):
            variable.assign_add(ops.stack(values))

    def _flat(self, weights, counted):
        """``(weights, counts)``, flat: ``weights`` laid over ``counted`` (its trailing
        axes of 1 dropped, or axes added), or every weight counted once."""
        weights = ops.cast(weights, self.dtype)
        if counted is None:
            weights = ops.reshape(weights, (-1,))
            return weights, ops.ones_like(weights)
        while len(weights.shape) > len(counted.shape) and weights.shape[-1] == 1:
            weights = ops.squeeze(weights, -1)
        while len(weights.shape) < len(counted.shape):
            weights = ops.expand_dims(weights, -1)
        weights = ops.broadcast_to(weights, ops.shape(counted))
        return ops.reshape(weights, (-1,)), ops.reshape(ops.cast(counted, self.dtype), (-1,))

    def update_step(self, model, y, y_pred, sample_weight, sequences=None):
        """Adds a step's weights, over the positions its loss counts, and (given
        ``sequences``) its loss terms and sequences, for a per-timestep loss or one of
        an ``ignore_class`` (:func:`keras_bnn.loss_terms.step_positions`; decided at
        trace time).

        Args:
            model: the model whose step calls this.
            y, y_pred: the batch's labels and predictions.
            sample_weight: the batch's weights, or None.
            sequences: the batch's number of examples, or None (terms not counted:
                ``evaluate``'s step).
        """
        counted = loss_terms.step_positions(model, y, y_pred)
        if sample_weight is not None:
            self.update_state(sample_weight, counted)
        if counted is None or sequences is None:
            return
        for variable, value in zip(self.term_totals, (ops.sum(counted), sequences)):
            variable.assign_add(ops.cast(value, self.dtype))

    def reset_state(self):
        """Nothing: the totals last across Keras' resets (see :meth:`clear`)."""

    def clear(self):
        """Sets the totals to 0 (``fit``'s start)."""
        for variable in self.weight_totals + self.term_totals:
            variable.assign(ops.zeros(variable.shape, self.dtype))

    def result(self):
        """``{}``: nothing logged."""
        return {}

    def read(self):
        """``(mean, standard deviation, count)`` of each output's weights seen, on the host.

        Returns:
            list: a tuple of floats per output; ``(nan, nan, 0.0)`` where no
            weight was seen.
        """
        totals, squares, counts = (backend.to_numpy(v).astype("float64").reshape(-1)
                                   for v in self.weight_totals)
        read = []
        for total, square, count in zip(totals, squares, counts):
            mean = total / count if count else math.nan
            read.append((float(mean), math.sqrt(max(square / count - mean * mean, 0.0))
                         if count else math.nan, float(count)))
        return read

    def read_terms(self):
        """``(terms, sequences)`` seen, on the host (floats; 0 where none was counted)."""
        return tuple(float(backend.to_numpy(v)) for v in self.term_totals)


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
        names: each output's weights, as the warning names them
            (:func:`weight_names`), or None (not checked).
        train_size: the model's n.
        one_pass: whether an epoch is one pass over the data.
        where: the line that called ``fit``, which the warning names
            (:func:`keras_bnn.train_size.call_site`).
        check_terms: whether to check the terms against ``train_size``:
            ``"timesteps"`` (a per-timestep loss's), ``"labels"`` (the labels
            an ``[N, K]`` output's loss scores, not its ``ignore_class``:
            checked also where every label was scored), or False.
        warn: ``warn(name, mean, seen)`` for weights of mean not 1, or None
            (:func:`keras_bnn.train_size.warn_on_weight_mean`); one that is given
            waits for the first epoch with weights (validation's, every
            ``validation_freq`` epochs).
    """

    def __init__(self, totals, names, train_size, one_pass, where, check_terms=False,
                 warn=None):
        super().__init__()
        self.totals, self.names, self.train_size, self.one_pass = (totals, names, train_size,
                                                                   one_pass)
        self.where, self.check_terms, self.warn = where, check_terms, warn
        self.done = False

    def on_train_begin(self, logs=None):
        self.totals.clear()
        self.done = False

    def on_epoch_end(self, epoch, logs=None):
        read = self.totals.read() if self.names is not None else []
        if self.done or (self.warn is not None and not any(count for *_, count in read)):
            return
        self.done = True
        if self.check_terms:
            terms, sequences = self.totals.read_terms()
            labels = self.check_terms == "labels"
            if (sequences and (terms != sequences or labels)
                    and abs(terms - self.train_size) > WEIGHT_MEAN_TOLERANCE * terms):
                warn_on_terms(self.train_size, f"{sequences:.0f}", f"{terms:.0f}", self.where,
                              per_timestep=not labels)
        if self.names is None:
            return
        off = [(abs(mean - 1.0), name, mean, count)
               for name, (mean, spread, count) in zip(self.names, read)
               if count and abs(mean - 1.0) > WEIGHT_MEAN_TOLERANCE + (
                   0.0 if self.one_pass else STANDARD_ERRORS * spread / math.sqrt(count))]
        if off:  # as the array check: the output's mean farthest from 1
            _, name, mean, count = max(off, key=lambda item: item[0])
            seen = f"the first epoch's {count:.0f} weights"
            if self.warn is not None:
                self.warn(name, mean, seen)
            else:
                warn_on_weight_mean(name, mean, seen, self.train_size, where=self.where)


def for_fit(model, arguments, where, terms_warned=False, first=None):
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
        first: the first batch (:func:`keras_bnn.fit_data.check_fit_data`), whose
            weights' structure names each output's (:func:`weight_names`), or None.

    Returns:
        The callback, or None.
    """
    if array_examples(arguments.get("x")) is not None:
        return None
    one_pass = arguments.get("steps_per_epoch") is None
    totals = model._sampling_trackers["weight_totals"]
    names = None if normalises_weights(model.loss) else weight_names(
        None if first is None else first[2], totals.paths)
    if names is not None and arguments.get("class_weight"):  # Keras': one output's
        names[0] = "fit's class_weight"
    check_terms = one_pass and not terms_warned and loss_terms.counts_terms(model) and (
        "timesteps" if loss_terms.has_positions(model) else "labels")
    if names is None and not check_terms:
        return None
    return WarnOnEpochTotals(totals, names, model.train_size, one_pass=one_pass, where=where,
                             check_terms=check_terms)


def for_validation(model, arguments, first, where):
    """The :class:`WarnOnEpochTotals` of the weights ``fit``'s ``validation_data`` yields (a
    dataset, ``PyDataset`` or generator: arrays are checked before training,
    :func:`keras_bnn.validation_weights.warn_on_validation_weights`), or None.

    ``evaluate`` (validation too) adds each batch's weights to the model's
    ``validation_weight_totals`` (:meth:`keras_bnn.BayesianModel.compute_loss`);
    the callback reads them after the first epoch that validated, and warns
    with :class:`keras_bnn.validation_weights.ValidationWeightWarning`, output
    by output.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        arguments: ``fit``'s arguments by name.
        first: ``validation_data``'s first batch
            (:func:`keras_bnn.fit_data.check_fit_data`), or None.
        where: the line that called ``fit`` (:func:`keras_bnn.train_size.call_site`).

    Returns:
        The callback, or None.
    """
    validation = arguments.get("validation_data")
    if (validation is None or isinstance(validation, (tuple, list))
            or normalises_weights(model.loss)):
        return None
    totals = model._sampling_trackers["validation_weight_totals"]
    names = weight_names(None if first is None else first[2], totals.paths,
                         "fit(validation_data)'s sample_weight{}")
    return WarnOnEpochTotals(
        totals, names, model.train_size, one_pass=arguments.get("validation_steps") is None,
        where=where, warn=lambda name, mean, seen: warn_on_validation_mean(
            name, mean, seen.replace("epoch's", "validation's"), where))
