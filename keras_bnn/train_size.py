"""Whether ``fit``'s data weigh as the ``train_size`` examples the potential assumes.

``U(θ) = n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)`` with n = ``train_size``:
:func:`warn_on_train_size` compares the number of examples (or loss terms)
``fit`` trains on, and the mean of its weights, with n before any graph runs
(:class:`TrainSizeWarning`); :mod:`keras_bnn.models.weight_mean` checks what
only the first epoch tells. The warnings name the line that called ``fit``
(:func:`call_site`, :func:`warn_at`).
"""

import sys
import warnings

import numpy as np

from keras_bnn import distribute
from keras_bnn import loss_terms
from keras_bnn.fit_data import array_examples, batch_length, cardinality, is_distributed
from keras_bnn.loss_checks import normalises_weights
from keras_bnn.output_slots import output_paths, slot_name, weight_slots


class TrainSizeWarning(UserWarning):
    """The likelihood weighs the training data as another number of examples than it holds.

    ``U(θ) = n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)`` with n = ``train_size``:
    ``compile(train_size=...)`` differs from the number of examples ``fit``
    trains on, or ``fit``'s ``sample_weight`` / ``class_weight`` do not
    average 1 over them (the data then weigh as ``mean(w)·n`` examples).
    ``validation_data``'s weights warn with
    :class:`keras_bnn.validation_weights.ValidationWeightWarning`.
    """


#: How far from 1 the mean of ``fit``'s weights may be before :class:`TrainSizeWarning`
#: names it: weights divided by their mean read 1 to float round-off, far
#: inside it; weights that make the data weigh as 1 % more or fewer examples
#: are let through.
WEIGHT_MEAN_TOLERANCE = 0.01


def call_site(stacklevel):
    """The line a warning issued here with ``stacklevel`` would name (for
    :func:`warn_on_weight_mean`'s ``where``: ``fit``'s caller, read at its start).

    Args:
        stacklevel: as ``warnings.warn``'s, counted from the function that
            calls this one (1: that function's line, 2: its caller's, ...).

    Returns:
        ``(filename, line number, the module's globals)``.
    """
    frame = sys._getframe(stacklevel)  # what warnings.warn's stacklevel reads
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals


def warn_on_weight_mean(name, mean, seen, n, where):
    """Issues the :class:`TrainSizeWarning` of weights whose mean is not 1.

    Each ``fit`` checks the weights it is given and warns about them; the
    warning names the line that called ``fit`` (``where``),
    so that Python's warning filters decide whether a later ``fit`` shows it
    again (the default filter: once per line and message), as for any warning.

    Args:
        name: the weights, as the message names them (``"fit's class_weight"``).
        mean: their mean over ``seen``.
        seen: what the mean is over (``"the 20 training examples"``).
        n: ``train_size``.
        where: ``(filename, line number, module globals)`` of the line the
            warning names (:func:`call_site` at ``fit``'s start).

    Warns:
        TrainSizeWarning: naming the weights, their mean and the number of
            examples the data weigh as.
    """
    message = (
        f"keras_bnn: {name} has mean {mean:.4g} over {seen}: the likelihood "
        f"n·(1/b)·Σ w_i·ℓ_i weighs the data as {mean * n:.6g} examples "
        f"(compile(train_size={n}) × {mean:.4g}) against the prior, so the posterior is "
        "narrower (mean > 1) or wider (mean < 1) than with weights of mean 1. Divide the "
        "weights by their mean (or compile the loss with reduction='mean_with_sample_weight') "
        "to reweight the examples among themselves; keep them only to temper the likelihood "
        "on purpose.")
    warn_at(message, TrainSizeWarning, where)


def warn_at(message, category, where):
    """``warnings.warn`` of ``message`` as if issued at ``where`` (:func:`call_site`).

    The module's globals give Python the source line through their ``__loader__``
    only where the line is in the module's own file: code run with ``exec()``
    (a script without a source file) has a line of ``"<string>"`` in the globals
    it runs in, whose loader reads another source (until 2026-12-01 Python's
    ``warn_explicit`` then raised ``IndexError`` from ``fit``, past that
    source's last line, or showed a line of that other file).

    Args:
        message: the warning's text.
        category: its Warning class.
        where: ``(filename, line number, module globals)``.
    """
    filename, line, module_globals = where
    own_file = module_globals.get("__file__") == filename
    warnings.warn_explicit(message, category, filename, line,
                           module=module_globals.get("__name__", "<string>"),
                           registry=module_globals.setdefault("__warningregistry__", {}),
                           module_globals=module_globals if own_file else None)


def _epoch_batches(x):
    """The batches in one pass over a ``tf.data.Dataset`` or ``PyDataset``, or None if unknown."""
    count = cardinality(x)  # -1: infinite, -2: unknown
    if count is None:
        count = getattr(x, "num_batches", None)
    return count if isinstance(count, int) and count > 0 else None


def _class_weights(y, class_weight):
    """Each example's weight from ``fit``'s ``class_weight`` (as Keras maps it)."""
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = np.argmax(labels, -1) if labels.shape[-1] != 1 else labels[..., 0]
    labels = np.round(labels).astype("int64")
    weights = np.ones(labels.shape, "float64")
    for label, weight in class_weight.items():
        weights[labels == int(label)] = weight
    return weights


def weight_mean(arguments, count, counted=None, paths=((),), argument="fit's sample_weight"):
    """``(argument name, mean weight)`` of ``fit``'s array weights over the first
    ``count`` examples, or None (no weights, or not arrays): over the loss values
    the loss counts (``counted``, :func:`keras_bnn.loss_terms.training_positions`:
    ``Σ m·w / Σ m``; None: every one), the weights' ranks matched to theirs. For a
    model of several outputs (``paths``, :func:`output_paths`) given weights by
    output (each scales its own output's term, :func:`weight_slots`), the mean
    farthest from 1, named by its output (the first in the outputs' order on a tie);
    ``argument`` names the weights in the error of weights without an output's."""
    sample_weight, class_weight, y = (arguments.get(name)
                                      for name in ("sample_weight", "class_weight", "y"))
    if sample_weight is not None and array_examples(sample_weight) is not None:
        slots = [(f"sample_weight{slot_name(leaves)}", [leaf for _, leaf in leaves])
                 for leaves in weight_slots(sample_weight, paths, argument)
                 if leaves]
        if len(slots) > 1 or len(slots[0][1]) > 1:
            means = [(name, float(np.mean(np.concatenate(
                [np.asarray(leaf, "float64")[:count].reshape(-1) for leaf in leaves]))))
                for name, leaves in slots]
            return max(means, key=lambda item: abs(item[1] - 1.0))
        name, weights = slots[0][0], np.asarray(slots[0][1][0], "float64")[:count]
    elif class_weight and y is not None and array_examples(y) is not None:
        name, weights = "class_weight", _class_weights(y, class_weight)[:count]
    else:
        return None
    if counted is None or not np.sum(counted):
        return name, float(np.mean(weights))
    while weights.ndim > counted.ndim and weights.shape[-1] == 1:
        weights = weights[..., 0]
    weights = weights.reshape(weights.shape + (1,) * (counted.ndim - weights.ndim))
    return name, float(np.sum(weights * counted) / np.sum(counted))


def warn_on_train_size(model, arguments, first, where):
    """Warns when ``fit`` trains on another number of examples than n = ``train_size``.

    The potential is ``n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)``: with n below the
    real N the data weigh N/n times too little against the prior (too wide a
    posterior), above it too much. Counted: arrays, exactly (after Keras'
    ``validation_split``); a ``tf.data.Dataset`` of known cardinality or a
    ``PyDataset`` of known length, as its batches times the first batch's
    size, within a batch (not with ``steps_per_epoch``, where an epoch need
    not be one pass over the data); a ``tf.distribute`` dataset's batch is
    the global one, its replicas' shards on every worker. Array ``sample_weight`` or
    ``class_weight`` whose mean over the training examples is not 1 (within
    1 %) make the data weigh as ``mean·n`` examples, and warn too, unless the
    loss's reduction is ``"mean_with_sample_weight"``
    (``n·Σ w_i·ℓ_i / Σ w_i``: the weights normalised in each batch). A
    generator's or an unknown-length dataset's size is the user's to give;
    the weights a dataset or generator yields are summed by the train step
    and checked after the first epoch (:mod:`keras_bnn.models.weight_mean`).
    For a per-timestep output (``[N, T, K]``, a tagger) n counts the terms
    the loss averages over, the (unmasked) timesteps
    (:func:`keras_bnn.loss_terms.training_terms`): arrays' exactly; a
    dataset's here only against n counting its examples (the first batch's
    terms an example, times its examples, are named), and exactly after a
    first epoch of one pass (:mod:`keras_bnn.models.weight_mean`) where
    this did not warn. For an output ``[N, K]`` whose loss has an
    ``ignore_class`` (unlabelled rows) n counts the labels scored, likewise:
    arrays' exactly; a dataset's here where its first batch has unlabelled
    rows and n counts its examples, or n exceeds them; else exactly after a
    first epoch of one pass.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        arguments: ``fit``'s arguments by name.
        first: the first batch of a dataset (:func:`keras_bnn.fit_data.first_batch`), or None.
        where: the line that called ``fit`` (:func:`call_site`), which the
            warnings name.

    Returns:
        bool: whether a dataset's terms (per timestep, or labels scored)
        warned already (the check after the first epoch then stays out).

    Warns:
        TrainSizeWarning: naming ``train_size``, or the weights' argument.
    """
    n = model.train_size
    terms_warned = False
    x = arguments.get("x")
    count, split = array_examples(x), arguments.get("validation_split")
    seen = None
    if count is not None:
        kept = int(count * (1.0 - split)) if split else count  # Keras' split point
        terms, _, counted = (loss_terms.training_positions(model, x, arguments.get("y"), kept)
                             or (None, None, None))
        if terms is not None and terms != kept:  # masked or per timestep: n counts its terms
            if terms != n:
                warn_on_terms(n, kept, f"{terms:.0f}", where, loss_terms.has_positions(model))
        elif kept != n:
            seen = f"{kept} examples" + (
                f" (validation_split={split} holds out {count - kept} of {count})" if split
                else "")
        # reduction="mean_with_sample_weight" normalises the weights within each batch.
        weights = (None if normalises_weights(model.loss) else weight_mean(
            arguments, kept, counted, output_paths(model, arguments.get("y"))))
        if weights is not None and abs(weights[1] - 1.0) > WEIGHT_MEAN_TOLERANCE:
            name, mean = weights
            over = f"the {kept} training examples"
            warn_on_weight_mean(f"fit's {name}", mean, over if counted is None else
                                f"the {terms:.0f} loss terms of {over}", n, where)
    elif first is not None and arguments.get("steps_per_epoch") is None:
        batches, size = _epoch_batches(x), batch_length(first[0])
        if size and is_distributed(x):  # a worker's share of the global batch
            size *= distribute.workers_per_batch(model.distribute_strategy)
        terms, length = loss_terms.batch_terms(model, first[0], first[1]), batch_length(first[0])
        about = bool(batches and size) and (batches - 1) * size < n < (batches + 1) * size
        # [N, K] labels of the loss's ignore_class: n counts the scored ones, maybe fewer
        # than the examples (the step counts them exactly, after the first epoch)
        fewer = terms is not None and not loss_terms.has_positions(model)
        if terms is not None and terms[0] != length:  # masked or per timestep: n counts terms
            if about:
                share = terms[0] / length  # the first batch's terms an example
                warn_on_terms(n, f"about {batches * size}", f"about {batches * size * share:.0f}",
                              where, not fewer)
                terms_warned = True
        elif batches and size and not about and not (fewer and n < batches * size):
            seen = (f"{batches} batches of {size} examples an epoch (about "
                    f"{batches * size} examples)")
            terms_warned = fewer
    if seen is not None:
        warn_at(
            f"keras_bnn: fit trains on {seen} but compile(train_size={n}): the potential "
            f"weighs the data as {n} examples, so the posterior is too wide (train_size too "
            "small) or too narrow (too large). Pass train_size=the number of training "
            "examples (for a dataset whose epoch passes over the data more than once, "
            "dataset.repeat(k), pass fit's steps_per_epoch: this check then stays out).",
            TrainSizeWarning, where)
    return terms_warned


def warn_on_terms(n, examples, terms, where, per_timestep=True):
    """Issues the :class:`TrainSizeWarning` of a loss whose terms ``train_size`` does not
    count: a per-timestep loss's, or the labels an ``[N, K]`` output's loss scores.

    Args:
        n: ``train_size``.
        examples, terms: the numbers of examples (sequences) and of loss
            terms, as the message names them.
        where: the line the warning names (:func:`call_site`).
        per_timestep: whether the terms are timesteps (else labels not the
            loss's ``ignore_class``: :func:`keras_bnn.loss_terms.counts_terms`).

    Warns:
        TrainSizeWarning: naming both numbers and ``train_size``.
    """
    if not per_timestep:
        warn_at(
            f"keras_bnn: fit trains on {examples} examples of which {terms} have labels the "
            f"loss scores (the others are its ignore_class, left out of its mean) but "
            f"compile(train_size={n}): the potential n·mean(ℓ) weighs the data as {n} "
            "labels, not the sum over the labels scored, so the posterior is too wide "
            "(train_size too small) or too narrow (too large). Pass train_size=the number "
            f"of labels scored ({terms}; keras_bnn.loss_terms.training_terms counts them).",
            TrainSizeWarning, where)
        return
    warn_at(
        f"keras_bnn: fit trains on {examples} sequences (examples) of {terms} loss terms "
        f"(their unmasked timesteps: the per-timestep loss is a mean over them) but "
        f"compile(train_size={n}): the potential n·mean(ℓ) weighs the data as {n} terms, "
        f"not their sum over every timestep of every sequence, so the posterior is too wide "
        "(train_size too small) or too narrow (too large). Pass train_size=the number of "
        f"loss terms ({terms}; keras_bnn.loss_terms.training_terms counts them).",
        TrainSizeWarning, where)
