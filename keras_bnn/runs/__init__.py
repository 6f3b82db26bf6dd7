"""Runs behind the ``keras-bnn`` command: train, evaluate, export, sweeps.

One module per job:

* :mod:`~keras_bnn.runs.config`: :class:`RunConfig`, its defaults, the
  chains' seeds, the checks of a resumed run's and a sweep's arguments
  (no Keras or TensorFlow import: the CLI answers bad input at once), and
  :mod:`~keras_bnn.runs.tables`, the names a run accepts and the defaults'
  tables;
* :mod:`~keras_bnn.runs.rundir`: :class:`RunDir`, the one owner of the
  on-disk layout (samples, config, chains, backup, metrics, plots), and
  :func:`stores_of`, the stores of a run;
* :mod:`~keras_bnn.runs.build`: data, model and compiled model (the
  optimizer from :data:`keras_bnn.samplers.REGISTRY`);
* :mod:`~keras_bnn.runs.checkpoints`: :class:`RunBackup`, the durable
  backup (after an epoch, at most every 10 s) a killed run resumes from;
* :mod:`~keras_bnn.runs.fitting`: one run's ``fit``, its prior named: the
  run directory claimed, the callbacks, the run's length and reports;
* :mod:`~keras_bnn.runs.training`: train, resume, several chains
  (``prior="auto"`` resolved first);
* :mod:`~keras_bnn.runs.evaluation`: metrics, plots, R-hat across chains,
  export;
* :mod:`~keras_bnn.runs.selection`: ``prior="auto"``, the prior chosen
  on a validation split;
* :mod:`~keras_bnn.runs.sweeps`: temperature and prior-scale sweeps.

The names below are imported on first use, so that
:mod:`keras_bnn.ensemble` and :mod:`keras_bnn.stored_chains` can use
:func:`stores_of` without importing the training side.
"""

import importlib

_EXPORTS = {
    "config": ("RunConfig", "chain_seed", "check_sweep", "read_config", "resume_config"),
    "tables": ("ARRAYS", "DATASETS", "DEFAULTS", "FALLBACK_PRIOR", "LIKELIHOODS", "MAX_LENGTH",
               "MIN_SAMPLED_SHARE", "MODELS", "PRIOR_CANDIDATES", "PRIORS", "SAMPLERS",
               "STUDENT_T_DF", "SWEEP_PARAMS", "TASK_LIKELIHOOD"),
    "keras_bnn.datasets.npy_files": ("check_arrays",),
    "rundir": ("Chains", "RunDir", "stores_of"),
    "build": ("FULL_BATCH_EPOCH_STEPS", "KERNEL_PRIORS", "arrays_data", "build_model",
              "compile_model", "epoch_data", "likelihood_of", "load_data", "load_info",
              "split_data", "steps_per_epoch", "validation_arrays"),
    "checkpoints": ("BackupError", "RunBackup"),
    "fitting": ("TrainResult", "gradient_noise_rows", "kinetic_temperature_rows"),
    "training": ("run_chains", "train"),
    "evaluation": ("chain_rhat", "evaluate", "evaluate_sampled", "export", "load_chains",
                   "load_run", "read_metrics"),
    "selection": ("resolve_prior", "select_prior"),
    "sweeps": ("sweep", "sweep_temperature"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'keras_bnn.runs' has no attribute {name!r}")
    module = _MODULE_OF[name]
    value = getattr(importlib.import_module(
        module if "." in module else f"keras_bnn.runs.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])
