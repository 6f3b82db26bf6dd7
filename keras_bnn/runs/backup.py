"""A run's backup: the training state after each epoch, written durably.

:class:`RunBackup` replaces ``keras.callbacks.BackupAndRestore`` for
:func:`keras_bnn.runs.train`. Keras' callback writes its weights file in
place and its epoch in a second file, so a kill or a full disk between or
during those writes leaves a backup that cannot be resumed, or one that
resumes an epoch too early. Here one file holds one epoch's whole state and
its name holds the epoch::

    backup/epoch-000004.weights.h5   the state after 4 epochs (weights,
                                     optimizer and sampler state, step)

Each file is written under a temporary name, fsynced and renamed into
place (:mod:`keras_bnn.durable`), so a file of that name is complete; the
last two are kept. A resumed run restores the newest file that loads, and
starts over from epoch 0, saying so, when none does.
"""

import os
import re
import warnings

import keras
import numpy as np

from keras_bnn import durable

_NAME = "epoch-{:06d}.weights.h5"
_NAME_RE = re.compile(r"^epoch-(\d{6,})\.weights\.h5$")


class BackupError(OSError):
    """A backup could not be written (a full disk, a file size limit, ...)."""


class RunBackup(keras.callbacks.Callback):
    """Backs the training state up after every epoch; restores it at the start.

    Use it first in the callback list: it sets the epoch ``fit`` starts at
    (``model._initial_epoch``, as Keras' ``BackupAndRestore`` does), which
    the other callbacks see from their ``on_epoch_begin`` on.

    Args:
        directory: the backup directory (created on the first backup).
        keep: complete backups kept (the newest and ``keep - 1`` before it),
            ≥ 1.

    Raises:
        BackupError: from ``fit``, when a backup cannot be written; its
            message names the file. The backups written before are kept.
    """

    def __init__(self, directory, keep=2):
        super().__init__()
        self.directory = os.fspath(directory)
        self.keep = keep
        self.restored_epoch = 0

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

    def on_train_begin(self, logs=None):
        durable.remove_stale(self.directory)
        backups = self.backups()
        if not backups:
            return
        variables = self._variables()
        initial = [np.array(keras.ops.convert_to_numpy(v)) for v in variables]
        failures = []
        for epoch, path in backups:
            try:
                self.model.load_weights(path)
            except Exception as error:  # h5py and Keras raise many types for a bad file
                failures.append(f"{path} ({type(error).__name__}: {error})")
                continue
            if failures:
                warnings.warn(f"keras-bnn: skipped unreadable backup(s) {'; '.join(failures)}; "
                              f"resuming from {path} (after epoch {epoch}).",
                              RuntimeWarning, stacklevel=2)
            self.restored_epoch = self.model._initial_epoch = epoch
            return
        for variable, value in zip(variables, initial):
            variable.assign(value)
        warnings.warn(f"keras-bnn: no backup in {self.directory} can be read "
                      f"({'; '.join(failures)}); starting the run over from epoch 0 (samples "
                      "already stored are kept and not written again).",
                      RuntimeWarning, stacklevel=2)

    def on_epoch_end(self, epoch, logs=None):
        self.save(epoch + 1)

    def save(self, epochs_done):
        """Writes the state after ``epochs_done`` epochs; keeps the newest :attr:`keep`.

        Raises:
            BackupError: naming the file, if it cannot be written (the
                partial file is removed; older backups are kept).
        """
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, _NAME.format(epochs_done))
        tmp = durable.temp_path(self.directory, "backup-") + ".weights.h5"
        try:
            self.model.save_weights(tmp)
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
            durable.fsync_directory(self.directory)
        except Exception as error:  # HDF5 reports a full disk as RuntimeError or OSError
            _remove_quietly(tmp)
            raise BackupError(f"cannot write the run's backup {path} ({type(error).__name__}: "
                              f"{error}); is the disk full? The samples and backups written "
                              "so far are kept: free space, then continue with --resume."
                              ) from error
        for _, old in self.backups()[self.keep:]:
            _remove_quietly(old)


def _remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
