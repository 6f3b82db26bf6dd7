"""A run's backup: the training state after an epoch, written durably.

:class:`RunBackup` replaces ``keras.callbacks.BackupAndRestore`` for
:func:`keras_bnn.runs.train`. Keras' callback writes its HDF5 weights file
in place and its epoch in a second file, so a kill or a full disk between
or during those writes leaves a backup that cannot be resumed, or one that
resumes an epoch too early (and HDF5 may crash on a full disk). Here one
file holds one epoch's whole state, what ``model.save_weights`` holds (the
model's weights by path; the optimizer's state, step counter, momenta,
thermostats, sampler state, as Keras' store of it, which a sampler loads
by name), with the logs of every epoch so far (so a
resumed run's ``history.json`` covers the whole run:
:meth:`RunBackup.run_history`), and its name holds the epoch::

    backup/epoch-000004.npz   the state after 4 epochs

Each file is written under a temporary name, fsynced and renamed into place
(:func:`keras_bnn.durable.atomic_write`), so a file of that name is
complete; the last two are kept. A resumed run restores the newest file
that loads, and starts over from epoch 0, saying so, when none does.

A backup is written at the end of the first epoch that ends
:data:`BACKUP_INTERVAL` seconds or more after the last one (or after the
start): a killed run repeats at most that long plus one epoch. Resuming
from an older epoch is exact all the same, since the data order and the
noise are pure functions of the epoch and the step, and a sample already
stored is not written again.
"""

import io
import math
import os
import re
import time
import warnings

import keras
import numpy as np

from keras_bnn import durable, nonfinite
from keras_bnn.samplers import Sampler
from keras_bnn.validation import check_int, check_positive

_NAME = "epoch-{:06d}.npz"
_NAME_RE = re.compile(r"^epoch-(\d{6,})\.npz$")
# The keys of the optimizer's store (Keras' ``save_own_variables``) and its class.
_STATE, _OPTIMIZER = "state/", "optimizer"

#: Least seconds between two backups of :class:`RunBackup` (its default). A
#: backup reads every weight and optimizer variable (88 on the command
#: line's MLP with ATMC), writes and fsyncs a file: as long as a 2-step epoch
#: of wine, so one every epoch took 40 % of such a run (92 against 55 ms an
#: epoch: ``benchmarks/epoch_overhead.py``); large data (a Fashion-MNIST
#: epoch: seconds) still gets one every epoch or two.
BACKUP_INTERVAL = 10.0


class BackupError(OSError):
    """A backup could not be written (a full disk, a file size limit, ...)."""


class RunBackup(keras.callbacks.Callback):
    """Backs the training state up after an epoch, at most every ``interval``
    seconds; restores it at the start.

    Use it first in the callback list: it sets the epoch ``fit`` starts at
    (``model._initial_epoch``, as Keras' ``BackupAndRestore`` does), which
    the other callbacks see from their ``on_epoch_begin`` on.

    Args:
        directory: the backup directory (created on the first backup).
        keep: complete backups kept (the newest and ``keep - 1`` before it),
            ≥ 1.
        interval: back up at the end of the first epoch that ends this many
            seconds or more after the last backup (or the training start);
            0: after every epoch; None: :data:`BACKUP_INTERVAL`.

    Raises:
        ValueError: for ``keep`` < 1 or a negative or non-finite ``interval``.
        BackupError: from ``fit``, when a backup cannot be written (an
            OSError; its message names the file). The backups written
            before are kept.
    """

    def __init__(self, directory, keep=2, interval=None):
        super().__init__()
        self.directory = os.fspath(directory)
        self.keep = check_int(keep, "keep", 1, owner="RunBackup")
        if interval is None:
            interval = BACKUP_INTERVAL
        self.interval = 0.0 if interval == 0 else check_positive(interval, "interval",
                                                                 "RunBackup")
        self._logs, self._restored_epochs = {}, 0

    def backups(self):
        """The complete backups, newest first.

        Returns:
            List of ``(epoch, path)``: the number of finished epochs each holds.
        """
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = [(int(match.group(1)), os.path.join(self.directory, name))
                 for name in names if (match := _NAME_RE.match(name))]
        return sorted(found, reverse=True)

    def _optimizer(self):
        """The model's optimizer, built (None without one)."""
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        return optimizer

    def run_history(self, fit_history):
        """The logs of every epoch of the run, restored and new.

        Args:
            fit_history: ``History.history`` of this ``fit`` (the epochs
                since the restored backup).

        Returns:
            ``{key: list}``: the restored backup's logs of each key (NaN
            where a backup written before 2026-11-28 holds none), then
            ``fit_history``'s (none when the backup was taken after the
            run's last epoch).
        """
        restored = self._restored_epochs
        return {key: [*self._logs.get(key, [math.nan] * restored)[:restored],
                      *fit_history.get(key, [])]
                for key in sorted({*self._logs, *fit_history})}

    def on_train_begin(self, logs=None):
        self._last_backup = time.monotonic()
        self._logs, self._restored_epochs = {}, 0
        durable.remove_stale(self.directory)
        backups = self.backups()
        if not backups:
            if os.path.isdir(self.directory):  # a run stopped before its first backup
                warnings.warn(f"keras-bnn: no complete backup in {self.directory}; starting "
                              "the run over from epoch 0.", RuntimeWarning, stacklevel=2)
            return
        optimizer = self._optimizer()
        failures = []
        for epoch, path in backups:  # newest first
            try:
                values, state, self._logs = _read(path, self.model.weights, optimizer)
            except Exception as error:  # numpy and zipfile raise many types for a bad file
                failures.append(f"{path} ({type(error).__name__}: {error})")
                continue
            for variable, value in zip(self.model.weights, values):
                variable.assign(value)
            if optimizer is not None:
                optimizer.load_own_variables(state)
            if failures:
                warnings.warn(f"keras-bnn: skipped unreadable backup(s) {'; '.join(failures)}; "
                              f"resuming from {path} (after epoch {epoch}).",
                              RuntimeWarning, stacklevel=2)
            self.model._initial_epoch = self._restored_epochs = epoch
            return
        warnings.warn(f"keras-bnn: no backup in {self.directory} can be read "
                      f"({'; '.join(failures)}); starting the run over from epoch 0 (samples "
                      "already stored are kept and not written again).",
                      RuntimeWarning, stacklevel=2)

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            self._logs.setdefault(key, [math.nan] * self._restored_epochs).append(float(value))
        if time.monotonic() - self._last_backup >= self.interval:
            self.save(epoch + 1)
            self._last_backup = time.monotonic()

    def save(self, epochs_done):
        """Writes the state after ``epochs_done`` epochs; keeps the newest :attr:`keep`.

        Raises:
            BackupError: naming the file, if it cannot be written (the
                partial file is removed; older backups are kept).
            keras_bnn.NonFiniteError: if a weight is NaN/Inf (nothing is
                written: :func:`keras_bnn.nonfinite.check_weights`).
        """
        nonfinite.check_weights(self.model, f"after epoch {epochs_done}")
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, _NAME.format(epochs_done))
        weights, optimizer = self.model.weights, self._optimizer()
        arrays = {f"v{i}": keras.ops.convert_to_numpy(v) for i, v in enumerate(weights)}
        arrays["paths"] = np.array([v.path for v in weights])
        if optimizer is not None:  # Keras' store of it: a sampler's loads by name
            state = {}
            optimizer.save_own_variables(state)
            arrays.update({_STATE + key: np.asarray(value) for key, value in state.items()})
            arrays[_OPTIMIZER] = np.array(type(optimizer).__name__)
        keys = sorted(self._logs)
        arrays["log_keys"] = np.array(keys, dtype=str)
        arrays.update({f"log{i}": np.array(self._logs[key], np.float64)
                       for i, key in enumerate(keys)})
        try:
            durable.atomic_write(path, lambda handle: np.savez(handle, **arrays))
        except OSError as error:  # its message names the file
            raise BackupError(error.errno, f"{error.strerror}; free space, then continue the "
                              "run with --resume") from error
        for _, old in self.backups()[self.keep:]:
            _remove_quietly(old)


def _read(path, weights, optimizer):
    """The values in backup ``path``, checked against the model's ``weights`` and
    ``optimizer``, and its epoch logs.

    The optimizer's state is Keras' store of it (``save_own_variables``), which a
    sampler loads by name (a variable added to it since starts at its initial
    value: :meth:`keras_bnn.samplers.Sampler.load_own_variables`). A backup
    written before 2026-11-30 holds the optimizer's variables after the
    weights, named by their paths; they load by position, as a store without
    names (a Keras optimizer's paths hold its name, ``sgd_1`` for the second
    made in a process, so a run resumed in the process that was interrupted
    started over).

    Returns:
        ``(values, state, logs)``: one array per weight, the optimizer's store
        (``{"0": array, ...}``), and ``{key: list}`` (empty for a backup
        written before the logs were).

    Raises:
        ValueError: for another model's weights, another optimizer, or a Keras
            optimizer's state of another size.
    """
    with open(path, "rb") as handle:
        content = handle.read()
    with np.load(io.BytesIO(content), allow_pickle=False) as stored:
        paths = [str(p) for p in stored["paths"]]
        if paths[:len(weights)] != [w.path for w in weights]:
            raise ValueError("it holds the variables of another model")
        values = [stored[f"v{i}"] for i in range(len(weights))]
        if _OPTIMIZER in stored.files:
            kind = str(stored[_OPTIMIZER])  # its class, or one the optimizer's derives from
            if optimizer is None or kind not in [c.__name__ for c in type(optimizer).__mro__]:
                raise ValueError(f"it holds the state of another optimizer ({kind})")
            state = {key[len(_STATE):]: stored[key] for key in stored.files
                     if key.startswith(_STATE)}
        else:  # before 2026-11-30: the optimizer's variables after the weights
            state = {str(i - len(weights)): stored[f"v{i}"]
                     for i in range(len(weights), len(paths))}
        keys = [str(k) for k in stored["log_keys"]] if "log_keys" in stored.files else []
        logs = {key: stored[f"log{i}"].tolist() for i, key in enumerate(keys)}
    for variable, value in zip(weights, values):
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"the shape of {variable.path} differs")
    if optimizer is not None and not _loads(optimizer, state):
        raise ValueError("it holds the state of another optimizer")
    return values, state, logs


def _loads(optimizer, state):
    """Whether ``optimizer.load_own_variables(state)`` restores the whole state (where
    Keras would skip it with a warning)."""
    if isinstance(optimizer, Sampler):
        return optimizer.loads_whole(state)
    saved = [state[str(i)].shape for i in range(len(state))]
    return saved == [tuple(v.shape) for v in optimizer.variables]


def _remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
