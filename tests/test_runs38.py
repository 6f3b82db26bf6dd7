"""The synthetic task's sizes for another dataset (the Python API took them, a
chain process's command line refused them), and a sweep of the data loaders
(found 2026-11-30)."""

import dataclasses
import json
import os
import warnings

import pytest

from keras_bnn import cli, runs
from keras_bnn.runs import checkpoints
from keras_bnn.runs.build import load_data
from keras_bnn.runs.config import DATASETS, RunConfig, SizeRefused, read_config, resume_config

SGD = {"sampler": "sgd", "epochs": 3, "prior": "he_normal", "batch_size": 64}


@pytest.mark.parametrize("dataset, field", [("wine", "num_train"), ("digits", "num_test"),
                                            ("arrays", "num_train")])
def test_the_api_refuses_the_synthetic_sizes_for_another_dataset(tmp_path, dataset, field):
    """Before: ``RunConfig(dataset="wine", num_train=100).validate()`` passed,
    so ``run_chains`` trained it with processes=1 and failed part-way with
    processes=2 (each chain's ``keras-bnn train --config`` refused it)."""
    config = RunConfig(dataset=dataset, output_dir=str(tmp_path / "run"), **{field: 100})
    with pytest.raises(SizeRefused, match=f"^`{field}` sizes the synthetic task "
                                          rf"\(dataset='synthetic'\); dataset '{dataset}' has "
                                          "its own split: drop it$"):
        config.validate()
    config = RunConfig(dataset=dataset, output_dir=str(tmp_path / "run")).validate()
    assert (config.num_train, config.num_test) == (None, None)
    assert RunConfig(num_train=300).validate().synthetic_sizes() == (300, 2000)


@pytest.mark.parametrize("processes", [1, 2])
def test_run_chains_refuses_a_size_of_wine_in_one_process_and_in_several(tmp_path, processes):
    """Before: processes=1 trained the two chains (ignoring num_train=100),
    processes=2 raised ChildProcessError "2 chains failed; ... `num_train` in
    --config sizes the synthetic task". Now both refuse before anything runs."""
    config = RunConfig(dataset="wine", num_train=100, output_dir=str(tmp_path / "run"), **SGD)
    with pytest.raises(SizeRefused, match="^`num_train` sizes the synthetic task"):
        runs.run_chains(config, 2, verbose=0, processes=processes)
    assert os.listdir(tmp_path) == []


def _store_as_before(run_dir, **fields):
    """Rewrites the run's config.json as the code before 2026-11-30 wrote it:
    every run held num_train and num_test 2000, whatever its dataset."""
    path = os.path.join(run_dir, "config.json")
    with open(path) as handle:
        stored = dict(json.load(handle), num_train=2000, num_test=2000, **fields)
    with open(path, "w") as handle:
        json.dump(stored, handle)


@pytest.mark.parametrize("dataset", DATASETS)
def test_a_stored_config_of_every_dataset_still_reads(tmp_path, dataset):
    """Every stored run holds num_train 2000 (the old default): one of another
    dataset than the synthetic task reads as unset; an override is still refused."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    data_dir = str(tmp_path) if dataset in ("npy", "fashion_mnist", "mnist") else None
    values = dataclasses.asdict(RunConfig(dataset=dataset, data_dir=data_dir,
                                          output_dir=str(run_dir), **SGD))
    (run_dir / "config.json").write_text(json.dumps(values))
    _store_as_before(run_dir)
    config = read_config(str(run_dir))
    sizes = (2000, 2000) if dataset == "synthetic" else (None, None)
    assert (config.num_train, config.num_test) == sizes
    if dataset != "synthetic":
        with pytest.raises(SizeRefused, match="^`num_test` sizes"):
            read_config(str(run_dir), num_test=10)


@pytest.mark.slow  # ~25 s: two trainings
def test_a_killed_wine_run_stored_before_resumes(tmp_path, monkeypatch, capsys):
    """A run killed after its 2nd epoch's backup, its config.json as the code
    before wrote it (num_train 2000 on wine): ``--resume`` continues it to its
    3 epochs, and ``evaluate`` reads it."""
    monkeypatch.setattr(checkpoints, "BACKUP_INTERVAL", 0)
    save = checkpoints.RunBackup.save

    def save_then_die(self, epochs_done):
        save(self, epochs_done)
        if epochs_done == 2:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(checkpoints.RunBackup, "save", save_then_die)
    run_dir = str(tmp_path / "run")
    config = RunConfig(dataset="wine", output_dir=run_dir, **dict(
        SGD, sampler="sghmc", step_size=0.01, burn_in_epochs=1)).validate()
    with pytest.raises(KeyboardInterrupt):
        runs.train(config, verbose=0)
    monkeypatch.setattr(checkpoints.RunBackup, "save", save)
    _store_as_before(run_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli.main(["train", "--resume", "--output-dir", run_dir, "--verbose", "0"]) in (
            0, None)
    assert not [w for w in caught if "starting the run over" in str(w.message)]
    with open(os.path.join(run_dir, "history.json")) as handle:
        assert len(json.load(handle)["loss"]) == 3
    assert runs.evaluate(run_dir)["ensemble"]["nll"] > 0


def test_the_default_synthetic_sizes_load_and_resume_compares_them(tmp_path):
    """A synthetic run that leaves its sizes unset loads 2000 and 2000
    examples, and ``--resume --num-train 2000`` equals its stored size."""
    config = RunConfig(output_dir=str(tmp_path / "run"), **SGD).validate()
    info = load_data(config)[2]
    assert (info["num_train"], info["num_test"]) == (2000, 2000)
    os.makedirs(config.output_dir)
    with open(os.path.join(config.output_dir, "config.json"), "w") as handle:
        json.dump(dataclasses.asdict(config), handle)
    assert resume_config(config.output_dir, {"num_train": 2000}).num_train is None
    with pytest.raises(ValueError, match="`num_test` is 2000 there, 10 given"):
        resume_config(config.output_dir, {"num_test": 10})
