"""The examples parse their arguments and use the public API that exists."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_imports_and_shows_help(path, capsys):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_there_are_five_examples():
    assert {p.stem for p in EXAMPLES} == {
        "cifar10_resnet_pp_atmc", "fashion_mnist", "fashion_mnist_weight_growth",
        "imdb_cnn_lstm_sweep", "synthetic_temperature_sweep"}
