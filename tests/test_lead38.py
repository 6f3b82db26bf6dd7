"""A run's backup keeps the optimizer's state as Keras' store of it (lead, session 38).

``keras_bnn.runs`` backs a run up in its own ``.npz`` (``runs/checkpoints.py``).
Until 2026-11-30 it held every weight and optimizer variable by path and
refused a backup whose paths differed: so a backup saved before a version
added a sampler variable could not resume (state38 made ``.keras`` files load
by name, not backups), and an sgd run resumed in the process that was
interrupted started over, its optimizer being ``sgd_1`` there ("no backup ...
can be read (... it holds the variables of another model or optimizer);
starting the run over from epoch 0").
"""

import json
import math
import os
import warnings

import keras
import numpy as np
import pytest

from keras_bnn import cli, runs, samplers
from keras_bnn.runs import checkpoints
from keras_bnn.runs.config import RunConfig
from keras_bnn.runs.checkpoints import RunBackup
from keras_bnn.samplers.state_layout import ADDED_SINCE_NAMES
from fit_helpers import LOSS, softmax_regression, three_class_rows

X, Y = three_class_rows(30)


class SGHMCWithExtra(samplers.SGHMC):
    """SGHMC with one state variable more."""

    def build_state(self, var_list):
        self.add_slot(var_list, "extra", value=0.5)
        super().build_state(var_list)


def _values(variables):
    return [keras.ops.convert_to_numpy(v) for v in variables]


def _model(optimizer):
    """The 4→3 softmax regression, compiled with a sampler, or with a Keras
    optimizer as ``keras_bnn.runs`` compiles its sgd baseline."""
    if isinstance(optimizer, samplers.Sampler):
        return softmax_regression(optimizer, 30)
    model = softmax_regression("sgld", 30)
    model.compile(optimizer, loss=LOSS, train_size=30)
    return model


def _backed_up(tmp_path, optimizer):
    """A model fitted 2 epochs with ``optimizer``, backed up after each."""
    keras.backend.clear_session()
    model = _model(optimizer)
    model.fit(X, Y, batch_size=10, epochs=2, verbose=0,
              callbacks=[RunBackup(str(tmp_path / "backup"), interval=0)])
    return model


def _resumed(tmp_path, optimizer, clear=True):
    """A fresh model with ``optimizer``, restored from the newest backup, strictly:
    any warning (Keras' "Skipping variable loading", "starting the run over") fails."""
    if clear:
        keras.backend.clear_session()
    fresh = _model(optimizer)
    backup = RunBackup(str(tmp_path / "backup"))
    backup.set_model(fresh)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backup.on_train_begin()
    assert fresh._initial_epoch == 2
    return fresh


def _as_before(path, model, leave_out=()):
    """Rewrites backup ``path`` as the code before 2026-11-30 wrote it: every weight,
    then every optimizer variable (less ``leave_out`` and those added since), as v0,
    v1, ..., with paths."""
    since = [v for slot in ADDED_SINCE_NAMES for v in model.optimizer.slots(slot)]
    left_out = {id(v) for v in [*leave_out, *since]}
    variables = [v for v in [*model.weights, *model.optimizer.variables]
                 if id(v) not in left_out]
    with np.load(path) as stored:
        logs = {key: stored[key] for key in stored.files if key.startswith("log")}
    arrays = {f"v{i}": value for i, value in enumerate(_values(variables))}
    arrays["paths"] = np.array([v.path for v in variables])
    with open(path, "wb") as handle:
        np.savez(handle, **arrays, **logs)


def _newest(tmp_path):
    return RunBackup(str(tmp_path / "backup")).backups()[0][1]


def test_an_sgd_run_resumes_in_the_process_that_was_interrupted(tmp_path, monkeypatch):
    """Failed before: the second SGD made in a process is ``sgd_1``, its
    variables' paths differ, and the backup was refused ("no backup ... can be
    read (... it holds the variables of another model or optimizer); starting
    the run over from epoch 0")."""
    monkeypatch.setattr(checkpoints, "BACKUP_INTERVAL", 0)
    save = RunBackup.save

    def save_then_die(self, epochs_done):
        save(self, epochs_done)
        if epochs_done == 2:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(RunBackup, "save", save_then_die)
    run_dir = str(tmp_path / "run")
    config = RunConfig(dataset="wine", output_dir=run_dir, sampler="sgd", epochs=3,
                       prior="he_normal", batch_size=64).validate()
    with pytest.raises(KeyboardInterrupt):
        runs.train(config, verbose=0)
    monkeypatch.setattr(RunBackup, "save", save)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "starting the run over"
        assert cli.main(["train", "--resume", "--output-dir", run_dir, "--verbose", "0"]) in (
            0, None)
    with open(os.path.join(run_dir, "history.json")) as handle:
        history = json.load(handle)["loss"]
    assert len(history) == 3 and all(math.isfinite(loss) for loss in history)


@pytest.mark.parametrize("cls", [samplers.SGHMC, samplers.ATMC])
def test_a_backup_written_before_loads_bit_identically(tmp_path, cls):
    """A backup in the format before 2026-11-30 restores weights and chain."""
    model = _backed_up(tmp_path, cls(seed=0))
    _as_before(_newest(tmp_path), model)
    fresh = _resumed(tmp_path, cls(seed=0))
    since = [name.split("/")[0] in ADDED_SINCE_NAMES for name in fresh.optimizer.state_names()]
    state = list(zip(since, model.optimizer.variables, fresh.optimizer.variables, strict=True))
    assert not any(np.any(v) for added, _, v in state if added)  # not in it: initial 0
    for saved, loaded in zip(_values([*model.weights, *[v for added, v, _ in state if not added]]),
                             _values([*fresh.weights, *[v for added, _, v in state if not added]]),
                             strict=True):
        np.testing.assert_array_equal(loaded, saved)


def test_a_backup_written_before_previous_ratio_loads(tmp_path):
    """Failed before: its paths lacked ``auto_step_size_previous_ratio``
    ("it holds the variables of another model or optimizer")."""
    model = _backed_up(tmp_path, samplers.SGHMC(seed=0))
    _as_before(_newest(tmp_path), model, leave_out=[model.optimizer.warmup.previous_ratio])
    fresh = _resumed(tmp_path, samplers.SGHMC(seed=0))
    assert int(fresh.optimizer.iterations) == int(model.optimizer.iterations) == 6
    assert fresh.optimizer.step_size_value == model.optimizer.step_size_value
    assert float(fresh.optimizer.warmup.previous_ratio) == 0.0


def test_a_sampler_with_a_variable_more_resumes_a_backup_saved_without_it(tmp_path):
    """Failed before: the extra slot's paths were not in the backup (the run
    started over); now the chain resumes, the new slot at its initial 0.5."""
    model = _backed_up(tmp_path, samplers.SGHMC(seed=0))
    fresh = _resumed(tmp_path, SGHMCWithExtra(seed=0))
    assert int(fresh.optimizer.iterations) == 6
    for saved, loaded in zip(_values(model.optimizer.slots("momentum")),
                             _values(fresh.optimizer.slots("momentum")), strict=True):
        np.testing.assert_array_equal(loaded, saved)
    assert all(np.all(v == 0.5) for v in _values(fresh.optimizer.slots("extra")))


def test_another_optimizer_s_backup_is_refused(tmp_path):
    """An ATMC run's backup is not restored into an SGHMC run (started over, warned)."""
    _backed_up(tmp_path, samplers.ATMC(seed=0))
    keras.backend.clear_session()
    fresh = softmax_regression(samplers.SGHMC(seed=0), 30)
    backup = RunBackup(str(tmp_path / "backup"))
    backup.set_model(fresh)
    with pytest.warns(RuntimeWarning, match="state of another optimizer .ATMC"):
        backup.on_train_begin()
    assert not fresh._initial_epoch  # not restored: fit starts at epoch 0


@pytest.mark.parametrize("cls", [samplers.SGLD, samplers.SGHMC, samplers.SGNHT, samplers.ATMC,
                                 samplers.HMC])
def test_every_sampler_s_state_names_are_unique(cls):
    """Loading by name gives each name's value to one variable only."""
    sampler = cls(train_size=30)
    sampler.build(softmax_regression(sampler, 30).trainable_variables)
    names = sampler.state_names()
    assert len(names) == len(set(names)) == len(sampler.variables) > 2
