"""A run's backup: the training state after an epoch, written durably.

:class:`RunBackup` replaces ``keras.callbacks.BackupAndRestore`` for
:func:`keras_bnn.runs.train`. Keras' callback writes its HDF5 weights file
in place and its epoch in a second file, so a kill or a full disk between
or during those writes leaves a backup that cannot be resumed, or one that
resumes an epoch too early (and HDF5 may crash on a full disk). Here one
file holds one epoch's whole state, what ``model.save_weights`` holds (the
model's weights, then the optimizer's variables: step counter, momenta,
thermostats, sampler state), with the logs of every epoch so far (so a
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
from keras_bnn.validation import check_int, check_positive

_NAME = "epoch-{:06d}.npz"
_NAME_RE = re.compile(r"^epoch-(\d{6,})\.npz$")

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

    def _variables(self):
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        return [*self.model.weights, *(optimizer.variables if optimizer else [])]

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
        variables = self._variables()
        failures = []
        for epoch, path in backups:  # newest first
            try:
                values, self._logs = _read(path, variables)
            except Exception as error:  # numpy and zipfile raise many types for a bad file
                failures.append(f"{path} ({type(error).__name__}: {error})")
                continue
            for variable, value in zip(variables, values):
                variable.assign(value)
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
        variables = self._variables()
        arrays = {f"v{i}": keras.ops.convert_to_numpy(v) for i, v in enumerate(variables)}
        arrays["paths"] = np.array([v.path for v in variables])
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


def _read(path, variables):
    """The values in backup ``path``, checked against ``variables``, and its epoch logs.

    Returns:
        ``(values, logs)``: one array per variable, and ``{key: list}``
        (empty for a backup written before the logs were).
    """
    with open(path, "rb") as handle:
        content = handle.read()
    with np.load(io.BytesIO(content), allow_pickle=False) as stored:
        paths = [str(p) for p in stored["paths"]]
        if paths != [v.path for v in variables]:
            raise ValueError("it holds the variables of another model or optimizer")
        values = [stored[f"v{i}"] for i in range(len(variables))]
        keys = [str(k) for k in stored["log_keys"]] if "log_keys" in stored.files else []
        logs = {key: stored[f"log{i}"].tolist() for i, key in enumerate(keys)}
    for variable, value in zip(variables, values):
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"the shape of {variable.path} differs")
    return values, logs


def _remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
