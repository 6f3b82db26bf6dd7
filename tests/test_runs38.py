"""The synthetic task's sizes for another dataset (the Python API took them, a
chain process's command line refused them), and a sweep of the data loaders
(found 2026-11-30)."""

import dataclasses
import gzip
import json
import os
import warnings

import numpy as np
import pytest
from fashion_mnist_files import write_idx, write_set

from keras_bnn import cli, data, runs
from keras_bnn import fashion_mnist as fm
from keras_bnn.runs import checkpoints
from keras_bnn.runs.build import load_data
from keras_bnn.runs.config import (DATASETS, DataFieldRefused, RunConfig, read_config,
                                   resume_config)
from keras_bnn.runs.tables import DATA_DIR_DATASETS

SGD = {"sampler": "sgd", "epochs": 3, "prior": "he_normal", "batch_size": 64}


@pytest.mark.parametrize("dataset, field", [("wine", "num_train"), ("digits", "num_test"),
                                            ("arrays", "num_train")])
def test_the_api_refuses_the_synthetic_sizes_for_another_dataset(tmp_path, dataset, field):
    """Before: ``RunConfig(dataset="wine", num_train=100).validate()`` passed,
    so ``run_chains`` trained it with processes=1 and failed part-way with
    processes=2 (each chain's ``keras-bnn train --config`` refused it)."""
    config = RunConfig(dataset=dataset, output_dir=str(tmp_path / "run"), **{field: 100})
    with pytest.raises(DataFieldRefused, match=f"^`{field}` sizes the synthetic task "
                                               rf"\(dataset='synthetic'\); dataset "
                                               f"'{dataset}' has its own split: drop it$"):
        config.validate()
    config = RunConfig(dataset=dataset, output_dir=str(tmp_path / "run")).validate()
    assert (config.num_train, config.num_test) == (None, None)
    assert RunConfig(num_train=300).validate().synthetic_sizes() == (300, 2000)


@pytest.mark.parametrize("dataset", ["synthetic", "wine", "arrays"])
def test_the_api_refuses_a_data_dir_for_a_dataset_that_reads_no_files(tmp_path, dataset):
    """Before: ``RunConfig(dataset="wine", data_dir=...).validate()`` passed
    (the directory was ignored); the command line refused it."""
    config = RunConfig(dataset=dataset, data_dir=str(tmp_path), output_dir=str(tmp_path / "r"))
    with pytest.raises(DataFieldRefused, match="^`data_dir` is read by datasets npy, "
                                               "fashion_mnist, mnist, cifar10, imdb; dataset "
                                               f"'{dataset}' reads no files from it, and would "
                                               "ignore it: drop it$"):
        config.validate()


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("field, says", [("num_train", "sizes the synthetic task"),
                                         ("data_dir", "is read by datasets")])
def test_run_chains_refuses_a_field_wine_ignores_in_one_process_and_in_several(
        tmp_path, processes, field, says):
    """Before: processes=1 trained the two chains (ignoring num_train=100 or
    the data_dir), processes=2 raised ChildProcessError "2 chains failed; ...
    `num_train` in --config sizes the synthetic task". Now both refuse before
    anything runs."""
    value = {"num_train": 100, "data_dir": str(tmp_path / "files")}[field]
    config = RunConfig(dataset="wine", output_dir=str(tmp_path / "run"), **{field: value},
                       **SGD)
    with pytest.raises(DataFieldRefused, match=f"^`{field}` {says}"):
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
    dataset than the synthetic task reads as unset, as does a data_dir the
    API stored for a dataset that reads no files; an override is still refused."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    reads_files = dataset in DATA_DIR_DATASETS
    data_dir = str(tmp_path) if reads_files else None
    values = dataclasses.asdict(RunConfig(dataset=dataset, data_dir=data_dir,
                                          output_dir=str(run_dir), **SGD))
    (run_dir / "config.json").write_text(json.dumps(values))
    _store_as_before(run_dir, data_dir=str(tmp_path))
    config = read_config(str(run_dir))
    sizes = (2000, 2000) if dataset == "synthetic" else (None, None)
    assert (config.num_train, config.num_test) == sizes
    assert config.data_dir == (str(tmp_path) if reads_files else None)
    if dataset != "synthetic":
        with pytest.raises(DataFieldRefused, match="^`num_test` sizes"):
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


# --------------------------------------------------------------------------
# The data loaders.


@pytest.fixture
def no_default_places(tmp_path, monkeypatch):
    """Fashion-MNIST's default places moved under tmp_path (KERAS_HOME unset)."""
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    monkeypatch.delenv("KERAS_HOME", raising=False)


def test_fashion_mnist_is_found_in_the_cache_keras_uses_under_keras_home(
        tmp_path, monkeypatch, no_default_places):
    """Keras caches at $KERAS_HOME/datasets/fashion-mnist when KERAS_HOME is
    set. Before: that place was never searched (search_path: data_dir,
    .../keras-cache, .../debian). Now it is searched after data_dir, before
    ~/.keras."""
    home = tmp_path / "keras-home"
    write_set(home / "datasets" / "fashion-mnist", num_train=7)
    write_set(tmp_path / "keras-cache", num_train=5)
    monkeypatch.setenv("KERAS_HOME", str(home))
    assert fm.search_path(tmp_path / "mine") == [str(tmp_path / "mine"), str(
        home / "datasets" / "fashion-mnist"), str(tmp_path / "keras-cache"),
        str(tmp_path / "debian")]
    assert fm.fashion_mnist_arrays()[3]["num_train"] == 7
    write_set(tmp_path / "mine", num_train=6)
    assert fm.fashion_mnist_arrays(tmp_path / "mine")[3]["num_train"] == 6


def test_an_idx_header_whose_size_overflows_int64_is_reported_as_it_is(
        tmp_path, no_default_places):
    """Before: the byte count of shape (65536, 65536, 4294967295) wrapped in
    int64: "... header says shape (...) (-4294967296 bytes)"."""
    write_set(tmp_path / "mine")
    path = tmp_path / "mine" / fm.FILES["x_train"]
    with gzip.open(path, "wb") as handle:
        handle.write(bytes([0, 0, 8, 3]) + np.asarray([2**16, 2**16, 2**32 - 1], ">u4").tobytes())
    with pytest.raises(ValueError, match=rf"{path}: 0 data bytes, but its header says shape "
                                         rf"\(65536, 65536, 4294967295\) "
                                         rf"\({2**32 * (2**32 - 1)} bytes\)\.$"):
        fm.fashion_mnist_arrays(tmp_path / "mine")


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_fashion_mnist_split_without_images_is_refused_by_name(
        tmp_path, no_default_places, split):
    """Before: files of 0 images read as an empty split, and ``load`` failed in
    make_dataset with "`y` must be non-empty, with as many examples as `x`; got
    shapes (0,) (y) for 0 examples.", naming neither the files nor data_dir."""
    write_set(tmp_path / "mine")
    write_idx(tmp_path / "mine" / fm.FILES[f"x_{split}"], np.zeros((0, 28, 28)))
    write_idx(tmp_path / "mine" / fm.FILES[f"y_{split}"], np.zeros(0))
    with pytest.raises(ValueError, match=rf"^`data_dir` must hold 28x28 images with one label "
                                         rf"each, at least one \({split} split\); got images "
                                         r"\(0, 28, 28\)"):
        data.load("fashion_mnist", data_dir=tmp_path / "mine")


@pytest.mark.parametrize("split", [1, 1.5, -0.5, None, True, float("nan")])
def test_a_bad_validation_split_names_zero_among_the_allowed_values(
        tmp_path, no_default_places, split):
    """Before: "`validation_split` must be a number in (0, 1); got 1." though
    0 (no validation set) is allowed, and the default."""
    write_set(tmp_path / "mine")
    with pytest.raises(ValueError, match=r"^fashion_mnist_arrays: `validation_split` must be 0 "
                                         r"or a number in \(0, 1\); got "):
        data.load("fashion_mnist", data_dir=tmp_path / "mine", validation_split=split)


@pytest.mark.parametrize("name, taken", [
    ("wine", "seed"), ("digits", "seed"),
    ("synthetic", "num_train, num_test, input_dim, num_classes, hidden, logit_scale, seed"),
    ("npy", "data_dir, seed"), ("mnist", "data_dir, download, seed")])
def test_a_keyword_the_loader_does_not_take_is_named_with_those_it_takes(name, taken):
    """Before: TypeError "load_bundled() got an unexpected keyword argument
    'validation_split'" (a function the caller never called, and not what it takes)."""
    with pytest.raises(ValueError, match=f"^load: `validation_split` must be left out for "
                                         rf"dataset '{name}' \(it takes {taken}\); got 0.2.$"):
        data.load(name, validation_split=0.2)


def test_npy_labels_beyond_int64_are_refused_with_their_value(tmp_path):
    """Before: uint64 labels 2**63 + 5 wrapped on the int64 cast, and the
    error showed "got label -9223372036854775803", a label not in the file."""
    arrays = (np.zeros((4, 2)), np.full(4, 2**63 + 5, np.uint64), np.zeros((2, 2)),
              np.zeros(2, np.uint64))
    for name, array in zip(data.NPY_FILES, arrays):
        np.save(tmp_path / name, array)
    with pytest.raises(ValueError, match=r"y_train.npy` must hold class labels 0, 1, \.\.\., "
                                         f"K-1; got label {2**63 + 5}.$"):
        data.npy_arrays(str(tmp_path))
    np.save(tmp_path / "y_train.npy", np.array([0, 1, 2, 1], np.uint64))
    y_train, y_test = (part[1] for part in data.npy_arrays(str(tmp_path))[:2])
    assert y_train.dtype == y_test.dtype == np.int64 and list(y_train) == [0, 1, 2, 1]


@pytest.mark.parametrize("name", ["digits", "wine", "breast_cancer", "diabetes", "synthetic"])
def test_every_array_dataset_serves_float32_inputs_and_its_labels(name):
    """dtype and shape of every batch; labels int64 in 0..K-1 (float32
    targets for diabetes); the features standardised with the training split's
    statistics only (the test split's own mean is not 0)."""
    kwargs = {"num_train": 50, "num_test": 30} if name == "synthetic" else {}
    train, test, info = data.load(name, batch_size=32, seed=1, **kwargs)
    for ds, size in ((train, info["num_train"]), (test, info["num_test"])):
        x, y = (np.concatenate(part) for part in zip(*ds.as_numpy_iterator()))
        assert x.dtype == np.float32 and x.shape == (size, *info["input_shape"])
        if info["num_classes"] is None:
            assert y.dtype == np.float32 and y.shape == (size,)
        else:
            assert y.dtype == np.int64 and 0 <= y.min() and y.max() < info["num_classes"]
    if name in ("wine", "breast_cancer", "diabetes"):
        (x_train, _), (x_test, _), _ = data.bundled_arrays(name)
        np.testing.assert_allclose(x_train.mean(axis=0), 0, atol=1e-5)
        assert np.abs(x_test.mean(axis=0)).max() > 0.05
