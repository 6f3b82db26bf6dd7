"""What ``BayesianModel.compile``, ``fit``, ``evaluate`` and ``load_weights`` add to Keras'.

The model's methods keep Keras' signatures and their documentation; the
work they do before calling Keras' own is here: :func:`compile_arguments`
(the checks of ``compile``'s arguments, the sampler configured with n and
T), :func:`fit_arguments` (the checks of ``fit``'s data and arguments,
and the callbacks it adds),
:func:`evaluate_arguments` (the same data checks) and
:func:`sampler_state_on_load` (the sampler built when a weights file holds
its state). ``train_on_batch`` and ``test_on_batch``:
:mod:`keras_bnn.models.on_batch`.
"""

import contextlib
import math
import numbers
import warnings

import keras
import numpy as np

from keras_bnn import distribute
from keras_bnn import label_checks
from keras_bnn import loss_terms
from keras_bnn import nonfinite
from keras_bnn import precision
from keras_bnn import samplers as samplers_lib
from keras_bnn.fit_data import (array_examples, batch_length, check_epoch_ends, check_fit_data,
                                single_output)
from keras_bnn.loss_checks import check_logit_head, check_loss_reduction
from keras_bnn.callbacks import NotConvergedWarning, current_step, warmup_steps
from keras_bnn.models import fit_callbacks, on_batch, weight_mean
from keras_bnn.stochastic_layers import check_stochastic_layers
from keras_bnn.output_slots import output_paths
from keras_bnn.train_size import warn_on_train_size
from keras_bnn.validation import (argument_error, bound_arguments, check_bool,
                                  check_positive_int)
from keras_bnn.validation_weights import warn_on_validation_weights


def compile_arguments(model, optimizer, loss, sampler, temperature, train_size,
                      allow_flat_prior):
    """``compile``'s arguments, checked: what ``BayesianModel.compile`` gives Keras.

    Sets the model's ``train_size`` n, ``allow_flat_prior`` and ``sampler``
    (the sampler configured with n and T, or None for the SGD/MAP baseline).

    Args:
        model: the :class:`keras_bnn.BayesianModel` being compiled.
        optimizer, loss, sampler, temperature, train_size, allow_flat_prior:
            the arguments given to ``compile``; a sampler or a sampler's name
            (``"atmc"``) given as ``optimizer`` (also by ``compile_from_config``)
            is taken as ``sampler`` (Keras refused a name: "Could not interpret
            optimizer identifier: atmc", until 2026-12-01).

    Returns:
        The optimizer for ``keras.Model.compile``: the sampler, or the
        baseline's optimizer (None where none was given).

    Raises:
        ValueError: as ``BayesianModel.compile``: both ``sampler`` and
            ``optimizer``, a missing or invalid ``train_size``, ``temperature``
            without a sampler, an unknown sampler name, a sampler given a Keras
            optimizer option that changes the chain (:data:`CHAIN_CHANGING_OPTIONS`),
            a dtype policy or
            ``tf.distribute`` scope that does not fit, a loss or head that is not
            a batch-mean NLL of logits.
    """
    named = isinstance(optimizer, str) and optimizer.lower() in samplers_lib.BY_NAME
    if (named or isinstance(optimizer, samplers_lib.Sampler)) and sampler is None:
        sampler, optimizer = optimizer, None  # compile_from_config's, or a user's
    if sampler is not None and optimizer is not None:
        raise ValueError(
            "BayesianModel.compile: pass either `sampler` (posterior sampling) or "
            f"`optimizer` (SGD/MAP baseline), not both; got sampler={sampler!r} "
            f"and optimizer={optimizer!r}."
        )
    model.train_size = _check_train_size(train_size)
    if keras.backend.backend() == "tensorflow":
        distribute.check_variables(model, "compile")
    check_logit_head(model, loss)
    check_loss_reduction(loss)
    model.allow_flat_prior = check_bool(allow_flat_prior, "allow_flat_prior", "compile")
    if sampler is not None:
        sampler = samplers_lib.get(sampler)
        _check_sampler_options(sampler)
        precision.check_sampling_policy(model)
        if isinstance(sampler, samplers_lib.HMC):
            precision.check_metropolis_policy(model)
        sampler.configure(train_size=model.train_size, temperature=temperature)
        optimizer = sampler
    elif temperature is not None:
        raise ValueError(
            "BayesianModel.compile: `temperature` applies to posterior sampling only; "
            f"pass a `sampler` or drop it; got temperature={temperature!r}."
        )
    else:
        precision.check_baseline_policy(model)
    model.sampler = sampler
    return optimizer


#: The ``keras.optimizers.Optimizer`` options a sampler takes (its ``**kwargs``) that change
#: the chain, with what they do: refused by ``compile`` unless off (None, False or 0).
_CLIPPING = "clipping the gradient changes the potential U the chain samples"
CHAIN_CHANGING_OPTIONS = {
    "clipnorm": _CLIPPING, "clipvalue": _CLIPPING, "global_clipnorm": _CLIPPING,
    "weight_decay": "decoupled weight decay is a Gaussian prior that neither the potential nor "
                    "its logs count; give the layers a prior instead",
    "use_ema": "fit ends by setting the weights to their moving average, not the chain's last "
               "state, and a later fit goes on from there; the posterior mean is the collected "
               "samples' (kb.PosteriorEnsemble)",
    "gradient_accumulation_steps": "one transition then takes several batches, and the "
                                   "step counter, warm-up and noise keys count transitions; "
                                   "raise batch_size instead",
}


def _check_sampler_options(sampler):
    """Refuses a sampler given an option of :data:`CHAIN_CHANGING_OPTIONS` that is on.

    Keras applied them around the SG samplers' update, silently until 2026-11-30
    (measured on wine, SGLD h=1e-3, 6 steps: ``clipnorm=1e-6`` moved the
    weights 0.18 from the chain without it; ``use_ema=True`` ended ``fit``
    with the chain's weights replaced by their average, 0.35 away, also with
    HMC, whose transition skips Keras' clipping and decay: ignored there).

    Args:
        sampler: the :class:`keras_bnn.samplers.Sampler` being compiled.

    Raises:
        ValueError: naming the option and its allowed value.
    """
    for name, effect in CHAIN_CHANGING_OPTIONS.items():
        value = getattr(sampler, name, None)
        if value:
            raise argument_error(
                name, f"be {'False' if name == 'use_ema' else 'None'} for a sampler: {effect}",
                value, f"BayesianModel.compile: the sampler {type(sampler).__name__}")


def _check_train_size(train_size):
    if train_size is None:
        raise ValueError(
            "BayesianModel.compile: `train_size` is required: the number n of training "
            "examples, which scales the prior as (1/n)·(-log p(θ)) and the minibatch "
            f"gradient by n; got {train_size!r}."
        )
    return check_positive_int(train_size, "train_size", "BayesianModel.compile")


def fit_arguments(model, args, kwargs, where):
    """``fit``'s arguments, checked, with the callbacks ``BayesianModel.fit`` adds.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        args, kwargs: the arguments given to ``fit``.
        where: the line that called ``fit``
            (:func:`keras_bnn.train_size.call_site`), which its warnings name.

    Returns:
        dict: the keyword arguments for ``keras.Model.fit``.

    Raises:
        ValueError: as :meth:`keras_bnn.BayesianModel.fit`.
    """
    kwargs = bound_arguments(keras.Model.fit, args, kwargs)  # callbacks=, validation_data=, ...
    kwargs["sample_weight"] = _listed_weights(model, kwargs)
    kwargs["x"], first = check_fit_data(model, kwargs)
    on_batch.build_unbuilt(
        model, first or tuple(kwargs.get(k) for k in ("x", "y", "sample_weight")))
    check_epoch_ends(kwargs.get("x"), kwargs.get("steps_per_epoch"), "steps_per_epoch")
    _check_whole_executions(model, kwargs.get("steps_per_epoch"))
    if keras.backend.backend() == "tensorflow":
        distribute.check_jit_compile(model)
        distribute.check_variables(model)
    # what the checks read: [y], {name: y} of one output as y (Keras is given them as they are)
    read = dict(kwargs, **{name: single_output(model, kwargs.get(name))
                           for name in ("y", "sample_weight")})
    distribute.check_data_batches(kwargs, first)  # keras.distribution on JAX
    # a slot of weights for each output the labels have (a subclassed model's, by them)
    weight_mean.match_outputs(model, read.get("y") if first is None else first[1])
    terms_warned = warn_on_train_size(model, read, first, where)
    callbacks = kwargs.get("callbacks") or []
    if isinstance(callbacks, keras.callbacks.CallbackList):  # Keras takes one as it is: its list
        callbacks = callbacks.callbacks
    callbacks = list(callbacks)
    # a dataset's or generator's weights, and per-timestep terms, after the first epoch
    weights_check = weight_mean.for_fit(model, read, where, terms_warned, first)
    if weights_check is not None:
        callbacks.append(weights_check)
    validation = kwargs.get("validation_data")
    if validation is not None:  # val_nll is the early-stopping key: check its labels too
        # (x, y[, w]) arrays, or one dataset, PyDataset or generator (read once: peek)
        parts = tuple(validation)[:3] if isinstance(validation, (tuple, list)) else (
            validation,)
        parts = parts[:1] + tuple(single_output(model, part) for part in parts[1:])
        weights = _listed_weights(model, dict(zip(("y", "sample_weight"), parts[1:])))
        if len(parts) == 3 and weights is not parts[2]:  # (x, y, [numbers]): fit's rule
            parts = kwargs["validation_data"] = parts[:2] + (weights,)
        checked, first_validation = check_fit_data(
            model, dict(zip(("x", "y", "sample_weight"), parts)), owner="fit(validation_data)")
        if len(parts) == 1:
            kwargs["validation_data"] = validation = checked
        warn_on_validation_weights(model, parts, where)
        validation_check = weight_mean.for_validation(model, kwargs, first_validation, where)
        if validation_check is not None:  # a dataset's weights, after the first validation
            callbacks.append(validation_check)
        check_epoch_ends(validation, kwargs.get("validation_steps"), "validation_steps")
    _check_checkpoint_formats(callbacks)
    fit_callbacks.set_lower_better_modes(callbacks)
    if not getattr(model, "allow_flat_prior", False):
        callbacks.insert(0, fit_callbacks.WarnOnMissingPriors())
    callbacks.insert(0, label_checks.RaiseOnLabelCount(model))  # later batches' labels
    if model._skips_nonfinite_steps():  # first: stops before an epoch's sample is taken
        callbacks.insert(0, nonfinite.StopOnNonFinite())
    model.transition_kernel.check_batch_size(
        kwargs.get("x"), kwargs.get("batch_size") if first is None else batch_length(first[0]),
        terms=_first_batch_terms(model, read, first))
    if "gradient_noise_ratio" in model.transition_kernel.metric_names:
        callbacks.append(
            fit_callbacks.WarnOnGradientNoise(samplers_lib.NOISE_RATIO_LIMIT, callbacks))
    if isinstance(model.optimizer, samplers_lib.Sampler):
        fit_callbacks.check_keras_callbacks(callbacks)
        callbacks.append(fit_callbacks.LeaveWarmup(callbacks))
        check_stochastic_layers(model, model.transition_kernel.full_batch)
    kwargs["callbacks"] = callbacks
    return kwargs


def _check_checkpoint_formats(callbacks):
    """Refuses a ``ModelCheckpoint`` that would save the model in Keras' legacy HDF5 format.

    Keras takes ``ModelCheckpoint("best.h5")`` and writes the file, but
    ``keras.saving.load_model`` cannot rebuild a ``BayesianModel`` from it
    (measured: "Unknown layer: 'BayesianModel'"; with ``custom_objects`` its
    ``compile`` lacks ``train_size``): every checkpoint of the run was
    unreadable, found out only at reload (until 2026-12-01).

    Args:
        callbacks: the list given to ``fit``.

    Raises:
        ValueError: naming ``filepath`` and the formats that reload.
    """
    for callback in callbacks:
        path = str(getattr(callback, "filepath", ""))
        if (isinstance(callback, keras.callbacks.ModelCheckpoint)
                and not callback.save_weights_only and path.endswith(".h5")):
            raise argument_error(
                "filepath", "end in '.keras' for a BayesianModel's ModelCheckpoint (the "
                "model, its priors and the sampler's state, reloaded by "
                "keras.saving.load_model), or in '.weights.h5' with save_weights_only=True: "
                "Keras' legacy HDF5 format cannot rebuild a BayesianModel", path,
                "BayesianModel.fit: ModelCheckpoint")


def warn_on_stop_in_warmup(model, callbacks):
    """Warns when a callback stopped ``fit`` early (``EarlyStopping``: its
    ``stopped_epoch``) inside the sampler's warm-up.

    While ``step_size="auto"`` tunes h (its first 1000 steps; HMC's
    adaptation likewise) the weights hardly move, so ``val_nll`` stalls and
    ``EarlyStopping`` counts its patience there: on the digits (23 steps an
    epoch) ``EarlyStopping(monitor="val_nll", patience=3)`` stopped SGLD at
    step 414 and ATMC at step 299, ``patience=10`` SGLD at step 713, silently
    (until 2026-12-01): the chain had not started.

    Args:
        model: the :class:`keras_bnn.BayesianModel` after Keras' ``fit``.
        callbacks: the callbacks ``fit`` ran.
    """
    optimizer = model.optimizer
    if not (isinstance(optimizer, samplers_lib.Sampler) and model.stop_training):
        return
    # those that stopped it early (Keras' stopped_epoch), not a run's planned end
    stoppers = sorted({type(c).__name__ for c in callbacks if getattr(c, "stopped_epoch", 0)})
    step, tuned = current_step(optimizer), warmup_steps(optimizer)
    if step >= tuned or not stoppers:
        return
    steps = (getattr(model, "history", None) and model.history.params or {}).get("steps")
    more = f", about {math.ceil((tuned - step) / steps)} more epochs of {steps}" if steps else ""
    warnings.warn(
        f"{' and '.join(stoppers)} stopped fit at optimizer step {step}, inside "
        f"the sampler's warm-up (its first {tuned} steps{more}), where the step size is still "
        "tuned and the weights hardly move: the chain has not started, and the weights are "
        "no sample. Let the warm-up end first: EarlyStopping(start_from_epoch=<an epoch past "
        f"step {tuned}>), or fit the warm-up without the callback.",
        NotConvergedWarning, stacklevel=3)


def _check_whole_executions(model, steps_per_epoch):
    """Refuses, with a sampler, a ``steps_per_epoch`` that is not a multiple of
    ``compile(steps_per_execution=E)``.

    Keras' epoch iterator runs whole executions of ``E`` steps while the
    epoch's count is below ``steps_per_epoch``: ``ceil(steps_per_epoch / E)·E``
    steps an epoch (measured: 8, 16, 24 steps after 3 epochs of
    ``steps_per_epoch=5``, ``E=4``, as for an optimizer), and the sampler's
    epochs (``CyclicalSchedule``'s cycles, ``CollectSamples``' samples,
    ``TemperatureRamp``, the equilibrium windows) counted other steps than
    asked: ``CyclicalSchedule(cycle_epochs=2)`` took 1 sample in 6 epochs
    instead of 3 (until 2026-11-30).

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        steps_per_epoch: ``fit``'s, or None.

    Raises:
        ValueError: naming ``steps_per_epoch``, ``E`` and the steps Keras would run.
    """
    executed = model.steps_per_execution
    if (not isinstance(model.optimizer, samplers_lib.Sampler)
            or not isinstance(steps_per_epoch, numbers.Integral) or steps_per_epoch < 1
            or steps_per_epoch % executed == 0):
        return
    runs = -(-steps_per_epoch // executed) * executed
    raise argument_error(
        "steps_per_epoch", f"be a multiple of compile(steps_per_execution={executed}) when a "
        f"sampler samples: Keras runs whole executions, {runs} steps an epoch, and the "
        "sampler's epochs (CyclicalSchedule's cycles, CollectSamples' samples, "
        f"TemperatureRamp) would count other steps than asked (pass {runs}, or lower "
        "steps_per_execution)", steps_per_epoch, "BayesianModel.fit")


def _listed_weights(model, kwargs):
    """``fit``'s ``sample_weight`` as an array where it is a list or tuple of numbers, one
    per example, for a model of one output (Keras 3.15 takes arrays: the list made it
    refuse ``x``, "Unrecognized data type: x=..."); else as given."""
    weights = kwargs.get("sample_weight")
    if (isinstance(weights, (list, tuple)) and weights
            and all(isinstance(w, numbers.Real) for w in weights)
            and output_paths(model, single_output(model, kwargs.get("y"))) == [()]):
        return np.asarray(weights, keras.backend.floatx())
    return weights


def _first_batch_terms(model, kwargs, first):
    """The loss terms of ``fit``'s first batch, for a full-batch kernel's check, where the
    loss averages over other terms than examples (a per-timestep output's unmasked
    timesteps, the labels an ``ignore_class`` loss scores: ``train_size`` counts those,
    :func:`keras_bnn.loss_terms.counts_terms`); else None (``first``: the first batch of
    a dataset or ``PyDataset``, None for arrays)."""
    if first is not None:
        return on_batch.full_batch_terms(model, first[0], first[1])
    if not (model.transition_kernel.full_batch and loss_terms.counts_terms(model)):
        return None
    x = kwargs.get("x")
    rows = min(kwargs.get("batch_size") or 32, array_examples(x) or 0)
    counted = loss_terms.training_terms(model, x, kwargs.get("y"), rows)
    return None if counted is None else int(counted[0])


def evaluate_arguments(model, args, kwargs, where):
    """``evaluate``'s arguments, checked (not those of ``fit``'s validation).

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        args, kwargs: the arguments given to ``evaluate``.
        where: the line that called ``evaluate`` (:func:`keras_bnn.train_size.call_site`),
            which its warnings name.

    Returns:
        dict: the keyword arguments for ``keras.Model.evaluate``.

    Raises:
        ValueError: as :meth:`keras_bnn.BayesianModel.evaluate`; ``jit_compile=True``
            under a ``tf.distribute`` strategy of several replicas
            (:func:`keras_bnn.distribute.check_jit_compile`).
    """
    kwargs = bound_arguments(keras.Model.evaluate, args, kwargs)
    distribute.check_jit_compile(model, "evaluate")
    if not kwargs.get("_use_cached_eval_dataset"):  # not fit's validation, each epoch
        kwargs["x"], first = check_fit_data(model, kwargs, owner="evaluate")
        distribute.check_data_batches(kwargs, first, "evaluate")
        check_epoch_ends(kwargs.get("x"), kwargs.get("steps"), "steps", "evaluate")
        # nll reads the weights' mean times the data's mean NLL, as val_nll does
        parts = (kwargs["x"],) + tuple(single_output(model, kwargs.get(name))
                                       for name in ("y", "sample_weight"))
        warn_on_validation_weights(model, parts, where, "evaluate")
    return kwargs


@contextlib.contextmanager
def sampler_state_on_load(model):
    """Lets ``keras.Model.load_weights`` restore an unbuilt sampler's state.

    Inside the block a sampler that is not built is built when the file
    holds a built one's state (:meth:`keras_bnn.samplers.Sampler.load_own_variables`;
    under ``tf.distribute`` in the model's strategy). Nothing changes for a
    model without a sampler, or not built.

    Args:
        model: the :class:`keras_bnn.BayesianModel` whose weights are loaded.

    Yields:
        None.
    """
    optimizer = getattr(model, "optimizer", None)
    if not isinstance(optimizer, samplers_lib.Sampler) or not model.built:
        yield
        return
    # Under tf.distribute the state is made in the model's strategy, wherever
    # load_weights is called (built outside it, plain variables were
    # updated by each replica: the loaded chain did not go on).
    strategy = getattr(model, "_distribute_strategy", None)  # TensorFlow only

    def build():
        with strategy.scope() if strategy is not None else contextlib.nullcontext():
            optimizer.build(model.trainable_variables)

    optimizer.build_on_load = build
    try:
        yield
    finally:
        optimizer.build_on_load = None
