"""A run's parts: its data, its model, and the compiled model.

:func:`load_data` (or :func:`arrays_data` for in-memory arrays, and
:func:`split_data` for a fixed validation split of a training set,
:func:`validation_arrays`) →
:func:`build_model` → :func:`compile_model`, whose optimizer is the
:data:`keras_bnn.samplers.REGISTRY` entry of ``config.sampler`` (a sampler,
or the SGD/MAP baseline), built once.
"""

import math
import os

import keras
import numpy as np

from keras_bnn import data as data_lib
from keras_bnn import likelihoods as likelihoods_lib
from keras_bnn import models as models_lib
from keras_bnn import priors as priors_lib
from keras_bnn import samplers
from keras_bnn.datasets import npy_files
from keras_bnn.datasets.pipeline import data_epoch, endless, validation_rows
from keras_bnn.runs.config import (ARRAYS, DEFAULT_MODEL_ARGS, STUDENT_T_DF, TASK_LIKELIHOOD,
                                   chain_seed)
from keras_bnn.validation import argument_error, check_choice

#: Kernel priors of :attr:`RunConfig.prior` (the names are
#: :data:`keras_bnn.runs.PRIORS`), as functions of ``prior_scale``.
KERNEL_PRIORS = {
    "he_normal": priors_lib.HeNormal,
    "glorot_normal": priors_lib.GlorotNormal,
    "student_t": lambda scale: priors_lib.StudentT(df=STUDENT_T_DF, scale=scale),
    "he_student_t": lambda scale: priors_lib.HeStudentT(df=STUDENT_T_DF, scale=scale),
}


#: Steps in one epoch of a run whose batch holds the whole training set,
#: with a minibatch kernel (SG-MCMC or SGD): the full batch repeated. With one
#: step an epoch, Keras' per-epoch work outweighed the step on the bundled
#: sets (~80 ms against ~15 ms: 4 000 epochs of SGHMC on digits took 387 s)
#: and the equilibrium test's 10-epoch windows held 10 steps. Twenty steps
#: cost about as many gradients as one HMC transition of 20 leapfrog steps,
#: HMC's epoch (a full-batch kernel keeps one transition an epoch).
FULL_BATCH_EPOCH_STEPS = 20


def steps_per_epoch(config, num_train):
    """The run's steps in one epoch.

    ``ceil(n/b)`` minibatches, except for a minibatch kernel whose one batch
    holds all n examples: :data:`FULL_BATCH_EPOCH_STEPS` (:func:`epoch_data`
    repeats it).

    Args:
        config: the :class:`keras_bnn.runs.RunConfig`.
        num_train: n, the training examples.

    Returns:
        int ≥ 1.
    """
    batches = math.ceil(num_train / config.batch_size)
    kernel = samplers.REGISTRY[config.sampler].optimizer
    if batches == 1 and not getattr(kernel, "full_batch", False):
        return FULL_BATCH_EPOCH_STEPS
    return batches


def epoch_data(train_ds, config, num_train):
    """The training data of a run, :func:`steps_per_epoch` batches an epoch.

    A shuffled keras_bnn pipeline becomes one endless stream
    (:func:`keras_bnn.datasets.pipeline.endless`: epoch e is pass e, or
    passes e…e+19 of the full batch), which ``fit`` reads ``steps`` batches
    an epoch from with one iterator for the whole run. Any other dataset is
    passed over once an epoch (the full batch repeated
    :data:`FULL_BATCH_EPOCH_STEPS` times).

    Args:
        train_ds: the training dataset, one pass an epoch.
        config, num_train: as :func:`steps_per_epoch`.

    Returns:
        ``(dataset, steps)``: ``steps`` is ``fit``'s ``steps_per_epoch``
        for the stream, None for a dataset that ends with every epoch.
    """
    steps = steps_per_epoch(config, num_train)
    passes = steps // math.ceil(num_train / config.batch_size)
    stream = endless(train_ds, passes)
    if stream is not None:  # an epoch ends where its last pass does, as over train_ds
        return stream, passes * int(train_ds.cardinality())
    if passes == 1:
        return train_ds, None
    repeated = train_ds.repeat(steps)
    repeated.keras_bnn_data_epoch = data_epoch(train_ds)  # a resumed run sets it
    return repeated, None


def load_data(config):
    """Loads the run's dataset.

    Returns:
        ``(train_ds, test_ds, info)`` from :func:`keras_bnn.data.load`.

    Raises:
        ValueError: for a run on in-memory arrays (its data is not on disk).
    """
    if config.dataset == ARRAYS:
        raise ValueError("this run was trained on in-memory arrays: pass the same "
                         "`data=` to keras_bnn.runs.evaluate.")
    kwargs = {"seed": config.seed}
    if config.dataset == "synthetic":
        kwargs.update(zip(("num_train", "num_test"), config.synthetic_sizes()))
    elif config.dataset not in data_lib.BUNDLED:
        kwargs["data_dir"] = config.data_dir
    return data_lib.load(config.dataset, batch_size=config.batch_size, **kwargs)


def likelihood_of(config, info):
    """The run's likelihood: ``config.likelihood``, else the dataset's task's.

    Raises:
        ValueError: for ``"gaussian"`` on a classification dataset (it would
            regress the class numbers), or a classification likelihood on a
            regression dataset.
    """
    task = info.get("task", "classification")
    if config.likelihood not in (None, "gaussian") and task == "regression":
        raise argument_error("likelihood", f"be 'gaussian' (or left unset) for dataset "
                             f"{config.dataset!r}, a regression task (float targets; save "
                             "class labels as integers)", config.likelihood, "RunConfig")
    if config.likelihood == "gaussian" and task != "regression":
        raise argument_error("likelihood", f"be {TASK_LIKELIHOOD[task]!r} (or left unset) for "
                             f"dataset {config.dataset!r}, a {task} task: 'gaussian' would "
                             "regress the class numbers", config.likelihood, "RunConfig")
    return config.likelihood or TASK_LIKELIHOOD[task]


def build_model(config, info):
    """Builds the run's model for the dataset described by ``info``.

    The head has :func:`keras_bnn.likelihoods.output_units` outputs; the
    kernels get ``config.prior`` with scale ``config.prior_scale`` unless
    ``config.model_args`` names a ``kernel_prior`` (resnet_pp, whose
    weight-normalised layers have their own priors, takes neither). The
    model arguments are :data:`keras_bnn.runs.config.DEFAULT_MODEL_ARGS`
    updated with ``config.model_args``.

    Raises:
        ValueError: for bad ``model_args`` values (unknown keys are refused
            by :meth:`RunConfig.validate`), or ``prior="auto"``
            (:func:`keras_bnn.runs.train` resolves it before building).
    """
    if config.prior == "auto":
        raise ValueError("prior='auto' is resolved by keras_bnn.runs.train before a model is "
                         "built; pass a prior name to build_model.")
    builder = getattr(models_lib, config.model)
    units = likelihoods_lib.output_units(likelihood_of(config, info), info["num_classes"])
    args = {**DEFAULT_MODEL_ARGS.get(config.model, {}), **config.model_args}
    if config.model != "resnet_pp":
        args.setdefault("kernel_prior", KERNEL_PRIORS[config.prior](config.prior_scale))
    try:
        if config.model == "cnn_lstm":  # as long as the loader's reviews
            args.setdefault("sequence_length", info["sequence_length"])
            return builder(vocab_size=info["vocab_size"], num_classes=units, **args)
        return builder(info["input_shape"], units, **args)
    except (TypeError, KeyError) as error:  # a bad value deep in the builder
        raise ValueError(f"model {config.model!r} cannot be built from `model_args` "
                         f"{config.model_args!r} on dataset {config.dataset!r} "
                         f"({type(error).__name__}: {error}).") from None


def compile_model(model, config, info):
    """Compiles ``model`` with the run's optimizer, likelihood and metrics.

    The optimizer is ``REGISTRY[config.sampler].build(...)`` with h0 =
    ``config.step_size`` (default: the entry's), the noise seed
    :func:`keras_bnn.runs.chain_seed` and the temperature ``config.temperature``;
    :meth:`keras_bnn.BayesianModel.compile` takes a sampler or the baseline's
    optimizer alike.

    Args:
        model: a :class:`keras_bnn.BayesianModel` from :func:`build_model`.
        config: a validated :class:`keras_bnn.runs.RunConfig`.
        info: the dataset's ``info`` (``num_train``, ``task``).
    """
    method = samplers.REGISTRY[config.sampler]
    likelihood = likelihood_of(config, info)
    metrics = {"categorical": ["accuracy"], "bernoulli": [
        keras.metrics.BinaryAccuracy(threshold=0.0)], "gaussian": []}[likelihood]
    optimizer = method.build(config.step_size or method.step_size, seed=chain_seed(config),
                             temperature=config.temperature, **config.sampler_args)
    model.compile(optimizer, loss=likelihoods_lib.loss_for(likelihood),
                  train_size=info["num_train"], metrics=metrics)


def arrays_data(x, y, batch_size, seed=0, likelihood=None, x_test=None, y_test=None):
    """In-memory arrays as a run's ``(train_ds, test_ds, info)``.

    Args:
        x, y: training inputs [n, ...] and labels [n] (integer classes, 0/1
            for bernoulli, float targets for regression).
        batch_size: examples per batch.
        seed: seed of the per-epoch training shuffle.
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS`; None
            takes ``"gaussian"`` for non-integer ``y`` and ``"categorical"``
            otherwise.
        x_test, y_test: the evaluation set.

    Returns:
        ``(train_ds, test_ds, info)``; ``info`` has ``name`` (``"arrays"``),
        ``task``, ``num_train``, ``num_test``, ``num_classes`` and
        ``input_shape``.

    Raises:
        ValueError: for mismatched or empty arrays, an unknown likelihood, or class
            labels that are negative or number far more classes than occur
            (:func:`keras_bnn.datasets.npy_files.class_labels`).
    """
    y = np.asarray(y)
    if likelihood is None:
        integral = np.issubdtype(y.dtype, np.integer) or np.all(np.mod(y, 1) == 0)
        likelihood = "categorical" if integral else "gaussian"
    likelihood = check_choice(likelihood, "likelihood", likelihoods_lib.LIKELIHOODS)
    task = {value: key for key, value in TASK_LIKELIHOOD.items()}[likelihood]
    y_test, num_classes = np.asarray(y_test), None
    if likelihood == "categorical":
        y, y_test, num_classes = npy_files.class_labels(y, y_test, "y", "y_test")
    dtype = np.float32 if likelihood == "gaussian" else np.int64
    info = {"name": ARRAYS, "task": task, "num_train": len(y), "num_test": len(y_test),
            "input_shape": tuple(np.shape(x)[1:]), "num_classes": num_classes}
    return (data_lib.make_dataset(x, y.astype(dtype), batch_size, shuffle=True, seed=seed),
            data_lib.make_dataset(x_test, y_test.astype(dtype), batch_size),
            info)


def check_data_files(run, config, record=False):
    """Records, or checks, the files a run on the "npy" dataset reads.

    A run records only ``data_dir``; ``data_files.json`` (:attr:`RunDir.data_files`)
    holds the SHA-256 of its four files (:func:`keras_bnn.datasets.npy_files.file_digests`), so
    that a command reading the run again refuses files changed since. Other
    datasets are left alone.

    Args:
        run: the run's :class:`keras_bnn.runs.RunDir`.
        config: its :class:`RunConfig`.
        record: write the digests where the run has none yet (training);
            False: only check them where recorded (evaluation).

    Raises:
        ValueError: naming ``data_dir`` and the files that changed.
    """
    if config.dataset != "npy":
        return
    if os.path.exists(run.data_files):
        npy_files.check_unchanged(config.data_dir, run.read_json(run.data_files), run.path)
    elif record:
        run.write_json(run.data_files, npy_files.file_digests(config.data_dir))


def load_info(config):
    """The ``info`` dict of the run's dataset (bundled sets and "npy" files; else the task)."""
    if config.dataset in data_lib.BUNDLED:
        return data_lib.bundled_arrays(config.dataset)[2]
    if config.dataset == "npy":
        return data_lib.npy_arrays(config.data_dir)[2]
    return {"task": "classification"}


def validation_arrays(x, y, fraction):
    """A fixed split of training arrays: ``(x_train, y_train, x_val, y_val)``.

    The last ``round(n·fraction)`` examples of a permutation drawn with seed 0
    are held out (the same split for every run, seed and candidate).

    Args:
        x, y: the training arrays.
        fraction: held-out share in (0, 1).

    Returns:
        Tuple of four arrays.
    """
    kept, held = validation_rows(len(y), fraction)
    return x[kept], y[kept], x[held], y[held]


def _split_arrays(config, x, y, data_seed):
    """Training arrays of a sweep: ``(x, y)`` given, or the dataset's training
    split (the synthetic task's drawn with ``data_seed``)."""
    if x is not None:
        return x, y
    if config.dataset == "npy":
        return data_lib.npy_arrays(config.data_dir)[0]
    if config.dataset == "synthetic":
        return data_lib.synthetic_teacher(config.synthetic_sizes()[0], 1, seed=data_seed)[0]
    raise ValueError(
        f"sweep with a validation split needs arrays: pass x and y, or a bundled or "
        f"synthetic dataset (got dataset {config.dataset!r}); for a tensorflow-datasets "
        "dataset pass validation_split=None to evaluate on its test split.")


def split_data(config, split, x=None, y=None):
    """The data of one run on a validation split (a sweep's run, a prior candidate).

    :func:`validation_arrays` of the sweep's training arrays
    (``x, y``, or the training split of ``config.dataset``): the run trains
    on the first part, batches shuffled with ``config.seed``, and is scored
    on the held-out part. A bundled dataset's features (and diabetes' target)
    are standardised with the statistics of the first part alone
    (``bundled_arrays(name, validation_split)``): the held-out rows do not
    shape the scaling they are scored under. :func:`keras_bnn.runs.sweep` records ``split`` in
    each run's ``validation_split.json``
    (:attr:`keras_bnn.runs.RunDir.validation_split`), from which
    :func:`keras_bnn.runs.evaluate` rebuilds the same held-out rows.

    Args:
        config: the run's :class:`RunConfig`.
        split: ``{"validation_split": fraction held out, "data_seed": the
            sweep's seed, which draws the synthetic task}`` (other keys are
            ignored).
        x, y: the sweep's training arrays, or None.

    Returns:
        ``(train_ds, held_out_ds, info)``, as :func:`keras_bnn.runs.arrays_data`.

    Raises:
        ValueError: without arrays for a dataset not held in memory (a
            tensorflow-datasets dataset).
    """
    if x is None and config.dataset in data_lib.BUNDLED:
        (x_kept, y_kept), (x_held, y_held), _ = data_lib.bundled_arrays(
            config.dataset, validation_split=split["validation_split"])
        arrays = (x_kept, y_kept, x_held, y_held)
    else:
        arrays = validation_arrays(*_split_arrays(config, x, y, split["data_seed"]),
                                   split["validation_split"])
    likelihood = (config.likelihood if config.dataset == ARRAYS
                  else likelihood_of(config, load_info(config)))
    return arrays_data(arrays[0], arrays[1], config.batch_size, config.seed, likelihood,
                       arrays[2], arrays[3])
