"""The examples parse their arguments and use the public API that exists."""

import csv
import importlib.util
import warnings
from pathlib import Path

import pytest

import keras_bnn as kb

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


def test_there_are_five_examples():
    assert {p.stem for p in EXAMPLES} == {
        "cifar10_resnet_pp_atmc", "fashion_mnist", "fashion_mnist_weight_growth",
        "imdb_cnn_lstm_sweep", "synthetic_temperature_sweep"}


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
