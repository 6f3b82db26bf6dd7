"""The scripts' flags a user of the README mistypes: one line naming the flag
and its allowed values, before any training (found 2026-11-30 running each
script as the README shows it)."""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fashion_mnist_files import write_set
from keras_bnn.cli_parser import positive_number, positive_numbers

ROOT = Path(__file__).parent.parent


def _load(relative):
    """The script at ``ROOT / relative`` as a module (its ``main`` not run)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refused(capsys, call):
    """``call()`` exits 2 in one line, no traceback; returns that line."""
    with pytest.raises(SystemExit) as exit_info:
        call()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


TEMPERATURES = "argument --temperatures: must be comma-separated finite numbers > 0"


@pytest.mark.parametrize("script, argv, says", [
    # Before: a ValueError traceback ("could not convert string to float: 'abc'").
    ("examples/synthetic_temperature_sweep.py", ["--temperatures", "1,abc"], TEMPERATURES),
    # Before: "`values` must be positive numbers; got [0.0]." (no flag named).
    ("examples/synthetic_temperature_sweep.py", ["--temperatures", "0.1,0"], TEMPERATURES),
    ("examples/imdb_cnn_lstm_sweep.py", ["--data-dir", "{tmp}/tfds", "--temperatures", "x"],
     TEMPERATURES),
    # Before: 1000 epochs of ResNet-56 trained, then no sample to build an ensemble of.
    ("examples/cifar10_resnet_pp_atmc.py",
     ["--data-dir", "{tmp}/tfds", "--epochs", "120", "--start-epoch", "100"],
     "--start-epoch (100) must be at most the last cycle's end, epoch 99 of --epochs 120"),
    ("examples/cifar10_resnet_pp_atmc.py", ["--data-dir", "{tmp}/tfds", "--cycle-epochs", "0"],
     "argument --cycle-epochs: must be an int >= 1; got '0'"),
    # Before: a FileNotFoundError traceback.
    ("examples/cifar10_resnet_pp_atmc.py", ["--data-dir", "{tmp}/tfds"],
     "error: tensorflow-datasets dataset 'cifar10' is not prepared"),
    # Before: --train-subset 0 trained on all 60000 images, -5 on all but 5.
    ("examples/fashion_mnist_weight_growth.py",
     ["--data-dir", "{data}", "--epochs", "1", "--train-subset", "0"],
     "argument --train-subset: must be an int >= 1; got '0'"),
    ("examples/fashion_mnist_weight_growth.py", ["--data-dir", "{data}", "--epochs", "0"],
     "argument --epochs: must be an int >= 1; got '0'"),
    # Before: a ValueError traceback after the data were loaded.
    ("examples/fashion_mnist_weight_growth.py", ["--data-dir", "{data}", "--prior-scale", "0"],
     "argument --prior-scale: must be a finite number > 0; got '0'"),
    ("examples/fashion_mnist_weight_growth.py",
     ["--data-dir", "{data}", "--sampler-args", '{{"bogus": 1}}'],
     "error: RunConfig: `sampler_args` must hold only keys of sampler='atmc'"),
    ("examples/fashion_mnist_weight_growth.py", ["--data-dir", "{tmp}/none"],
     "error: Fashion-MNIST: `data_dir`"),
    # Before: the first row trained, then the repeat exited 1 saying the row's
    # directory "already holds this row's runs".
    ("examples/fashion_mnist.py", ["compare", "--out", "{tmp}/o", "--data-dir", "{data}",
                                   "--seeds", "0", "0", "--rows", "sgd", "--sgd-epochs", "1"],
     "--seeds must not repeat a value; got [0, 0]"),
    ("examples/fashion_mnist.py", ["sweep", "--out", "{tmp}/o", "--data-dir", "{tmp}/none",
                                   "--temperatures", "1", "1.0"],
     "--temperatures must not repeat a value; got [1.0, 1.0]"),
    # Before: --time-limit -5 cut the chain to 1 of --epochs 2 epochs (0 samples),
    # --ensemble-seconds -5 gave each net one epoch; --prior-scale -1 a traceback.
    ("examples/fashion_mnist_fit.py",
     ["--out", "{tmp}/o", "--data-dir", "{tmp}/none", "--time-limit", "-5"],
     "argument --time-limit: must be a finite number > 0; got '-5'"),
    ("examples/fashion_mnist_fit.py",
     ["--out", "{tmp}/o", "--data-dir", "{tmp}/none", "--rows", "ensemble",
      "--ensemble-seconds", "0"],
     "argument --ensemble-seconds: must be a finite number > 0; got '0'"),
    ("examples/fashion_mnist_fit.py",
     ["--out", "{tmp}/o", "--data-dir", "{tmp}/none", "--prior-scale", "nan"],
     "argument --prior-scale: must be a finite number > 0; got 'nan'"),
])
def test_an_example_names_a_bad_flag_before_training(tmp_path, capsys, script, argv, says):
    data = tmp_path / "data"
    write_set(data)
    module = _load(script)
    line = _refused(capsys, lambda: module.main(
        [a.format(tmp=tmp_path, data=data) for a in argv]))
    assert says in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing written


@pytest.mark.parametrize("argv, says", [
    # Before: --drift 0 was ignored without a word; --transitions 0 relaxed by
    # no transition (the means over sixths of an empty history, NaN).
    (["--drift", "0", "run"], "argument --drift: must be an int >= 1; got '0'"),
    (["--transitions", "0", "run"], "argument --transitions: must be an int >= 1; got '0'"),
])
def test_hmc_reference_names_a_bad_count(monkeypatch, capsys, argv, says):
    module = _load("benchmarks/hmc_reference.py")
    monkeypatch.setattr(sys, "argv", ["hmc_reference.py", *argv])
    assert says in _refused(capsys, module.main)


def test_the_number_types_take_what_the_readme_passes():
    assert positive_numbers("0.001,0.01,0.1,0.3,1") == [0.001, 0.01, 0.1, 0.3, 1.0]
    assert positive_number("3300") == 3300.0
    for text in ("inf", "-1", "1e400", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=f"got {text!r}"):
            positive_number(text)


def test_epoch_overhead_leaves_no_run_directory_behind(tmp_path, monkeypatch):
    """Before: every timed run's directory (168 KiB at 550 epochs of wine)
    stayed in the temp dir, 12 of them a default invocation."""
    module = _load("benchmarks/epoch_overhead.py")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert module.run_seconds("wine", 1, 1e9) > 0
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []


def test_ensemble_latency_under_jax_says_what_it_needs_in_one_line(tmp_path):
    """Before: under KERAS_BACKEND=jax it built the ResNet, printed the table's
    header, then ended in a NotImplementedError traceback from ``export``."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ensemble_latency.py"), "--quick"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
                 PYTHONPATH=str(ROOT)))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "need KERAS_BACKEND=tensorflow (the backend is 'jax'); under any backend use " \
           "--compile" in done.stderr.strip().splitlines()[-1]
    assert "| S |" not in done.stdout and list(tmp_path.iterdir()) == []
