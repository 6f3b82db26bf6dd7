"""The examples parse their arguments and use the public API that exists."""

import csv
import importlib.util
import json
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import keras_bnn as kb
from fashion_mnist_files import write_set

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


def _load(path):
    """The example at ``path`` as a module (its ``main`` not run)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_imports_and_shows_help(path, capsys):
    module = _load(path)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize("stem, argv, says", [
    ("fashion_mnist", ["compare", "--k", "0"], "--k: must be an int >= 1; got '0'"),
    ("fashion_mnist", ["compare", "--train-subset", "-5"], "--train-subset: must be an int >= 1"),
    ("fashion_mnist", ["compare", "--seeds", "-1"], "--seeds: must be an int >= 0"),
    ("fashion_mnist", ["sweep", "--temperatures", "0"], "--temperatures and --step-size must"),
    ("fashion_mnist", ["compare", "--validation-split", "1.5"], "--validation-split must lie"),
    ("fashion_mnist", ["table", "--out", "{tmp}/none"], "holds no results.jsonl"),
    ("fashion_mnist_fit", ["--out", "{tmp}/o", "--batch-size", "0"],
     "--batch-size: must be an int >= 1"),
    ("fashion_mnist_fit", ["--out", "{tmp}/o", "--epochs", "0"], "--epochs: must be an int >= 1"),
    ("fashion_mnist_fit", ["--out", "{tmp}/o", "--burn-in-epochs", "-1"],
     "--burn-in-epochs: must be an int >= 0"),
    ("fashion_mnist_fit", ["--out", "{tmp}/o", "--epochs", "50", "--max-epochs", "40"],
     "--max-epochs (40) must be at least --epochs (50)"),
    ("fashion_mnist_fit", ["--out", "{tmp}/used"], "already holds samples of these rows"),
])
def test_the_fashion_mnist_scripts_name_a_bad_flag_before_training(tmp_path, capsys, stem,
                                                                   argv, says):
    """Found by a user of the README's Fashion-MNIST section: these gave a
    traceback after loading the data, trained silently on all images
    (``--train-subset -5``), or mixed an earlier run's samples into the row."""
    (tmp_path / "used" / "chain" / "samples").mkdir(parents=True)
    module = _load(next(p for p in EXAMPLES if p.stem == stem))
    with pytest.raises(SystemExit) as exit_info:
        module.main([a.format(tmp=tmp_path) for a in argv])
    assert exit_info.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("stem, argv, says", [
    ("imdb_cnn_lstm_sweep", ["--data-dir", "{tmp}/tfds", "--epochs", "39"],
     "--epochs must be at least 40 (20 epochs of burn-in and one 20-epoch cycle); got 39"),
    ("synthetic_temperature_sweep", ["--out", "{tmp}/new", "--epochs", "119"],
     "--epochs must be at least 120 (the warm-up, the second noise measurement and the "
     "equilibrium test come before the first sample); got 119"),
    ("synthetic_temperature_sweep", ["--out", "{tmp}/used", "--temperatures", "1"],
     "error: the sweep's run"),
    ("imdb_cnn_lstm_sweep", ["--data-dir", "{tmp}/tfds", "--out", "{tmp}/used",
                             "--temperatures", "1"], "error: the sweep's run"),
])
def test_the_sweep_scripts_name_a_too_short_run_or_a_used_out_in_one_line(tmp_path, capsys,
                                                                         stem, argv, says):
    """Found by a reviewer: `--epochs 1` or `21` of the IMDB sweep ended in a
    traceback naming `burn_in_epochs` and `cycle_epochs`, which the script
    does not take; the synthetic sweep trained `--epochs 30` or `80`, then
    ended in a traceback (no run collected a sample), and a second try into
    the same --out in another; the IMDB sweep still did for a used --out
    until 2026-11-28."""
    used = kb.runs.RunDir(tmp_path / "used").sweep_run("temperature", 1.0, 0)
    used.write_json(used.config, {})  # a run that started training
    module = _load(next(p for p in EXAMPLES if p.stem == stem))
    with pytest.raises(SystemExit) as exit_info:
        module.main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and says in err and "Traceback" not in err
    assert not (tmp_path / "new").exists()


def test_a_sweep_that_could_not_load_its_data_can_be_run_again(tmp_path, capsys):
    """Found 2026-11-28: the IMDB sweep without IMDB prepared ended in a
    traceback, and its second try (the data prepared) was refused: the first
    had left its run's directory (lock, prior record), which the sweep took
    for a run stopped part-way. Both tries now say what is missing."""
    module = _load(next(p for p in EXAMPLES if p.stem == "imdb_cnn_lstm_sweep"))
    argv = ["--data-dir", str(tmp_path / "tfds"), "--out", str(tmp_path / "out"),
            "--temperatures", "1"]
    for _ in range(2):
        with pytest.raises(SystemExit) as exit_info:
            module.main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and "Traceback" not in err
        assert "error: tensorflow-datasets dataset 'imdb_reviews/plain_text' is not prepared" in err


def test_there_are_seven_examples():
    assert {p.stem for p in EXAMPLES} == {
        "bayesian_last_layer", "cifar10_resnet_pp_atmc", "fashion_mnist", "fashion_mnist_fit",
        "fashion_mnist_weight_growth",
        "imdb_cnn_lstm_sweep", "synthetic_temperature_sweep"}


@pytest.mark.slow  # for the default suite's 20 minutes on 2 cores
def test_the_bayesian_last_layer_example_samples_the_head_only(tmp_path, capsys):
    """examples/bayesian_last_layer.py at a tiny size, as a user runs it: the
    frozen trunk is written once (shared.npz), each sample file holds the head
    only, both heads beat chance on the 500 test images and the ensemble is
    exported."""
    module = _load(next(p for p in EXAMPLES if p.stem == "bayesian_last_layer"))
    out = tmp_path / "out"
    # 32 steps an epoch: the sampler's 1000-step warm-up ends in epoch 31.
    module.main(["--out", str(out), "--train-subset", "256", "--batch-size", "8",
                 "--pretrain-epochs", "5", "--map-epochs", "5", "--epochs", "36",
                 "--burn-in-epochs", "32"])
    result = json.load(open(out / "results.json"))
    map_row, bayes_row = result["rows"]
    assert (map_row["samples"], bayes_row["samples"]) == (1, 4)  # epochs 32..35
    for row in (map_row, bayes_row):
        # Chance is accuracy 0.1 (sd 0.013 on 500 images) and NLL log 10 = 2.30.
        assert row["accuracy"] > 0.3 and 0 < row["nll"] < np.log(10)
        assert 0 <= row["ece"] <= 1
    assert (result["frozen_weights"], result["head_weights"]) == (64 * 128 + 128 + 128 * 64 + 64,
                                                                  64 * 10 + 10)
    store = result["store"]
    assert (out / "samples" / "shared.npz").exists()
    assert store["shared_bytes"] > 4 * result["frozen_weights"]  # the trunk, float32
    assert store["sample_bytes_each"] < 4 * result["head_weights"] + 4096  # the head only
    assert os.path.exists(os.path.join(result["export"], "saved_model.pb"))
    assert "| Bayesian head (ATMC) | 4 |" in capsys.readouterr().out


@pytest.mark.slow
def test_the_synthetic_sweep_samples_after_its_warm_up(tmp_path, capsys):
    """The well-specified sweep at one temperature, as a user runs it: at the
    library's defaults every sample comes after the warm-up, from equilibrium
    (until 2026-11-27 it sampled 800 steps, all inside the 1000-step warm-up)."""
    module = _load(next(p for p in EXAMPLES if p.stem == "synthetic_temperature_sweep"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module.main(["--out", str(tmp_path / "sweep"), "--temperatures", "1"])
    warned = {w.category for w in caught}
    assert kb.WarmupSampleWarning not in warned and kb.NotConvergedWarning not in warned
    with open(tmp_path / "sweep" / "sweep.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    # Three classes: chance NLL is log 3 = 1.10; the teacher's labels are learnable.
    assert float(row["ensemble_nll"]) < 0.9 and float(row["ensemble_accuracy"]) > 0.5
    assert "'temperature': 1.0" in capsys.readouterr().out


@pytest.mark.slow  # a JAX process, 15 s (the default suite keeps test_jax_collect's)
def test_the_fit_example_trains_samples_and_scores_under_jax_without_tensorflow(tmp_path):
    """examples/fashion_mnist_fit.py under KERAS_BACKEND=jax with TensorFlow,
    TensorFlow Probability and ArviZ unimportable (as on a GPU machine that has
    only JAX): a chain collects, its store becomes an ensemble, and both rows
    are scored."""
    write_set(tmp_path / "data", num_train=256, num_test=50, learnable=True)
    blocked = tmp_path / "blocked"
    for name in ("tensorflow", "tensorflow_probability", "arviz"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('no {name} here')\n")
    script = next(p for p in EXAMPLES if p.stem == "fashion_mnist_fit")
    env = dict(os.environ, KERAS_BACKEND="jax",
               PYTHONPATH=os.pathsep.join([str(blocked), str(script.parent.parent)]))
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path / "out"), "--model", "mlp",
         "--data-dir", str(tmp_path / "data"), "--epochs", "3", "--max-epochs", "3",
         "--burn-in-epochs", "1", "--k", "2", "--clock", "cpu", "--verbose", "0"],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.load(open(tmp_path / "out" / "results.json"))
    assert result["backend"] == "jax"
    chain, ensemble = result["rows"]
    assert (chain["epochs"], chain["num_samples"], chain["started_epoch"]) == (3, 2, 1)
    assert len(chain["history"]["configurational_temperature"]) == 3
    assert ensemble["num_samples"] == 2 and len(ensemble["epochs"]) == 2
    for row in (chain, ensemble, ensemble["first_net"]):
        assert 0 <= row["accuracy"] <= 1 and row["nll"] > 0 and 0 <= row["ece"] <= 1
        assert 0 <= row["auroc_entropy"] <= 1
    assert "| ATMC, 1 chain (library defaults) | 3 | 2 |" in done.stdout


@pytest.mark.parametrize("epoch_seconds, epochs", [(3.0, 3), (4.0, 2), (2.5, 4)])
def test_the_fit_example_s_time_limit_stops_at_the_nearest_epoch_end(monkeypatch, epoch_seconds,
                                                                      epochs):
    # A 10 s budget: 3 s epochs stop after 3 (9 s; a 4th would end at 12),
    # 4 s epochs after 2 (8 s against 12), 2.5 s epochs after 4 (exactly 10).
    module = _load(next(p for p in EXAMPLES if p.stem == "fashion_mnist_fit"))
    now = [0.0]
    monkeypatch.setitem(module.CLOCKS, "cpu", lambda: now[0])
    limit = module.time_limit(10.0, "cpu")
    limit.set_model(types.SimpleNamespace(stop_training=False))
    limit.on_train_begin()
    trained = 0
    while not limit.model.stop_training:
        limit.on_epoch_begin(trained)
        now[0] += epoch_seconds
        limit.on_epoch_end(trained)
        trained += 1
    assert trained == epochs and limit.hit
