"""What ``BayesianModel.train_on_batch`` and ``test_on_batch`` add to Keras' methods.

Keras runs one batch through the same ``train_step`` as ``fit``, so the
transition, its warm-up and its logs are ``fit``'s; what ``fit`` does in its
callbacks and checks did not happen. :func:`train_on_batch` does it per
call: the data checks (:func:`keras_bnn.fit_data.check_fit_data`), once
per compiled optimizer the model's (weights without a prior, dropout, noise
and batch normalisation), the NaN/Inf policy (:mod:`keras_bnn.nonfinite`:
the skipped step of XLA and JAX raises at once) and the end of the warm-up
(:func:`keras_bnn.models.fit_callbacks.leave_warmup`, with its
:class:`keras_bnn.ShortWarmupWarning`). Nothing that needs epochs runs:
the :class:`keras_bnn.GradientNoiseWarning` (read
``model.optimizer.gradient_noise_ratios()``), ``train_size``'s count of the
training set, the mean of the weights over it (``sample_weight``,
``class_weight``: a batch cannot tell the classes' frequencies), and
:class:`keras_bnn.callbacks.CollectSamples`. A model
not yet built (a subclass) is built from the batch's shapes first
(:func:`build_unbuilt`, which ``fit`` uses too).
"""

import weakref

import keras

from keras_bnn import distribute, loss_terms, nonfinite
from keras_bnn import prior_guard
from keras_bnn.callbacks import current_step
from keras_bnn.fit_data import array_examples, check_fit_data
from keras_bnn.models import fit_callbacks
from keras_bnn.samplers.base import Sampler
from keras_bnn.stochastic_layers import check_stochastic_layers

#: model → the optimizer whose model checks :func:`_check_model` has done.
_CHECKED = weakref.WeakKeyDictionary()


def _check_model(model, owner):
    """``fit``'s checks of the model, once per compiled optimizer.

    Dropout, noise and batch normalisation are warned of (SG-MCMC) or
    refused (HMC) before the first step; weights without a prior are named
    once the model is built (a subclassed model builds at its first call).
    """
    if _CHECKED.get(model) is model.optimizer:
        return
    if isinstance(model.optimizer, Sampler):
        check_stochastic_layers(model, model.transition_kernel.full_batch, owner)
    if model.built:
        if not getattr(model, "allow_flat_prior", False):
            prior_guard.warn_missing_priors(model)
        _CHECKED[model] = model.optimizer


def build_unbuilt(model, data_batch):
    """Builds a model that is not built (a subclassed one) from a batch's shapes.

    Without a ``tf.distribute`` strategy Keras' TensorFlow trainer builds the
    model while it traces the train step, and the step hands the kernel
    ``model.trainable_variables`` before its forward pass has made them: a
    subclassed ``BayesianModel`` failed in ``fit`` and ``train_on_batch``
    with Keras' "Unknown variable". Nothing is done for a built model, or
    when the batch's shapes are unknown (a generator: build the model first).

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        data_batch: ``(x, y, sample_weight)`` of a batch or of ``fit``'s
            arrays, or None.
    """
    if model.built or data_batch is None or not all(
            hasattr(v, "shape") for v in keras.tree.flatten(data_batch) if v is not None):
        return
    model._symbolic_build(data_batch=data_batch)  # what Keras does under a strategy


def _check_batch_splits(x, owner):
    """Refuses a batch of arrays ``keras.distribution`` cannot split over its devices
    (JAX), naming ``len(x)``: until 2026-11-30 JAX's bare ``IndivisibleError``."""
    distribute.check_batches_split(owner, "len(x)", array_examples(x))


def _check_batch_terms(model, x, y):
    """HMC's minibatch check where ``train_size`` counts loss terms, not examples.

    The traced step checks the batch's examples (``BatchPotential.batch_size``),
    which is None where the loss averages over other terms (a per-timestep
    output's unmasked timesteps, labels not ``ignore_class``): until
    2026-11-30 ``train_on_batch`` of 8 sequences of 48 tokens with
    ``train_size=96`` ran a minibatch HMC transition with no
    ``MinibatchHMCWarning`` (``fit`` warned). Here the batch's terms are
    compared with ``train_size``, as ``fit`` compares its first batch's. So are its
    examples under a ``tf.distribute`` strategy of several replicas, where Keras hands
    every replica the whole batch: the step counted ``len(x)·R`` (HMC on 60 of 101
    examples on 2 replicas ran without the warning).
    """
    terms = full_batch_terms(model, x, y)
    strategy = getattr(model, "_distribute_strategy", None)  # TensorFlow only
    replicated = strategy is not None and strategy.num_replicas_in_sync > 1
    if terms is not None or replicated:
        examples = array_examples(x)
        if replicated and examples:  # each worker hands its replicas its own x
            examples *= distribute.workers_per_batch(strategy)
        model.transition_kernel.check_batch_size(batch_size=examples, terms=terms)


def full_batch_terms(model, x, y):
    """The loss terms of the batch ``(x, y)`` where a full-batch kernel's ``train_size``
    counts terms, not examples (:func:`keras_bnn.loss_terms.counts_terms`); else None.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        x, y: a batch's inputs and labels.

    Returns:
        int, or None (an SG kernel, a loss of one term an example, or terms
        that cannot be counted).
    """
    if not (model.transition_kernel.full_batch and loss_terms.counts_terms(model)):
        return None
    counted = loss_terms.batch_terms(model, x, y)
    return None if counted is None else int(counted[0])


def train_on_batch(model, keras_train_on_batch, x, y=None, sample_weight=None,
                   class_weight=None, return_dict=False):
    """One transition on a batch, with ``fit``'s checks and NaN/Inf policy.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        keras_train_on_batch: Keras' ``train_on_batch`` bound to ``model``.
        x, y, sample_weight, class_weight, return_dict: as in Keras.

    Returns:
        Keras' ``train_on_batch`` result: the batch's logs (``loss``,
        ``nll``, ``prior`` and the kernel's diagnostics), a dict with
        ``return_dict=True``.

    Raises:
        ValueError: as ``fit`` (:func:`keras_bnn.fit_data.check_fit_data`):
            labels the likelihood cannot score or given without a loss,
            inputs of another shape; dropout, noise or batch normalisation
            sampled by HMC; ``jit_compile=True`` under a ``tf.distribute``
            strategy (:func:`keras_bnn.distribute.check_jit_compile`).
            Under JAX's ``keras.distribution``, a batch whose length does not
            split over its devices, naming ``len(x)``.
        keras_bnn.NonFiniteError: when the potential or a gradient is
            NaN/Inf: the step changed nothing.

    Warns:
        keras_bnn.MinibatchHMCWarning: HMC on a batch of fewer than
            ``train_size`` examples, or loss terms where ``train_size``
            counts those (once per sampler until a ``fit``).
    """
    check_fit_data(model, {"x": x, "y": y}, owner="train_on_batch")
    _check_batch_splits(x, "train_on_batch")
    if keras.backend.backend() == "tensorflow":
        distribute.check_jit_compile(model, "train_on_batch")
    build_unbuilt(model, (x, y, sample_weight))
    _check_model(model, "train_on_batch")
    _check_batch_terms(model, x, y)
    with nonfinite.translated(lambda: current_step(model.optimizer)):
        logs = keras_train_on_batch(x, y, sample_weight=sample_weight,
                                    class_weight=class_weight, return_dict=True)
    nonfinite.raise_if_skipped(logs, "this train_on_batch")
    _check_model(model, "train_on_batch")
    if isinstance(model.optimizer, Sampler):
        fit_callbacks.leave_warmup(model)
    return logs if return_dict else model._flatten_metrics_in_order(logs)  # Keras' order


def test_on_batch(model, keras_test_on_batch, x, y=None, sample_weight=None, return_dict=False):
    """Keras' ``test_on_batch`` after ``evaluate``'s data checks.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        keras_test_on_batch: Keras' ``test_on_batch`` bound to ``model``.
        x, y, sample_weight, return_dict: as in Keras.

    Returns:
        Keras' result: ``loss`` = ``nll``, the batch's mean NLL.

    Raises:
        ValueError: as ``evaluate``: labels the likelihood cannot score, or
            labels given to a model compiled without a loss (``nll`` would
            read 0), a batch ``keras.distribution`` cannot split (``len(x)``),
            ``jit_compile=True`` under a ``tf.distribute`` strategy of several
            replicas (:func:`keras_bnn.distribute.check_jit_compile`).
    """
    check_fit_data(model, {"x": x, "y": y}, owner="test_on_batch")
    distribute.check_jit_compile(model, "test_on_batch")
    _check_batch_splits(x, "test_on_batch")
    return keras_test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)
