"""A new version of another signature is not published into a served model directory.

TF Serving serves a model directory's newest version and switches to a new one
as soon as it appears, so an ensemble of another task exported into the same
directory would break the served model's clients at once. Until 2026-11-30 it
was published (the CLI exported wine's, then diabetes' ensemble as versions 1
and 2 of one model).
"""

import dataclasses
import os
import re

import keras
import pytest

import keras_bnn as kb
from ensemble_helpers import INPUT_DIM, tiny_ensemble, weight_sets
from keras_bnn import cli, export, runs


def _entries(model_dir):
    return sorted(os.listdir(model_dir))


def test_another_signature_is_refused_and_nothing_is_published(tmp_path):
    model_dir = tmp_path / "tiny"
    tiny_ensemble(count=2).export(model_dir)
    # Another task: 4 inputs, a Gaussian regression head (mean, log-variance).
    inputs = keras.Input((INPUT_DIM - 1,))
    member = kb.BayesianModel(inputs, keras.layers.Dense(2)(inputs))
    regression = kb.PosteriorEnsemble(member, weight_sets(member, 2), likelihood="gaussian")
    before = _entries(model_dir)
    with pytest.raises(ValueError) as error:
        regression.export(model_dir)
    message = str(error.value)
    assert "`model_dir`" in message and "serves version 1" in message
    assert "inputs 'inputs': ('float32', (-1, 5)) -> ('float32', (-1, 4))" in message
    assert "outputs 'class_std': ('float32', (-1, 3)) -> absent" in message
    assert re.search(r"; and \d+ more\. Export it into another model directory", message)
    assert "remove the older versions" in message
    assert _entries(model_dir) == before  # no version 2, no staging directory left

    # The same signature is published as the next version; once the old
    # versions are removed, the new signature is too.
    assert os.path.basename(tiny_ensemble(count=3, seed=1).export(model_dir)) == "2"
    for version in ("1", "2"):
        for root, dirs, files in os.walk(model_dir / version, topdown=False):
            for name in files:
                os.remove(os.path.join(root, name))
            for name in dirs:
                os.rmdir(os.path.join(root, name))
        os.rmdir(model_dir / version)
    assert os.path.basename(regression.export(model_dir)) == "1"


def test_served_signature_reads_the_saved_model_without_loading_it(tmp_path):
    version_dir = tiny_ensemble(count=2).export(tmp_path / "tiny")
    signature = export.served_signature(version_dir)
    assert signature["inputs"] == {"inputs": ("float32", (-1, INPUT_DIM))}
    assert signature["outputs"]["probabilities"] == ("float32", (-1, 3))
    assert export.served_signature(tmp_path) is None  # no saved_model.pb


def test_the_command_line_names_its_flag(tmp_path, capsys, monkeypatch):
    """`keras-bnn export` into a directory serving another signature: the
    refusal names --export-dir, the flag, not the Python API's `model_dir`."""
    model_dir = tmp_path / "model"
    tiny_ensemble(count=2).export(model_dir)
    inputs = keras.Input((INPUT_DIM - 1,))
    member = kb.BayesianModel(inputs, keras.layers.Dense(3)(inputs))
    other = kb.PosteriorEnsemble(member, weight_sets(member, 2))
    monkeypatch.setattr(runs, "export",
                        lambda run_dir, model_dir, version=None: other.export(model_dir))
    config = runs.RunConfig(sampler="sgd", output_dir=str(tmp_path / "run")).validate()
    run = runs.RunDir(config.output_dir)
    run.write_json(run.config, dataclasses.asdict(config))
    assert cli.main(["export", "--run-dir", run.path, "--export-dir", str(model_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-bnn: error: --export-dir ")
    assert "serves version 1 with another 'serving_default' signature" in err
    assert "`model_dir`" not in err and _entries(model_dir) == ["1", "models.config"]
