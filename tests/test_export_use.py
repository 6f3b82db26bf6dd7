"""Exporting as a user meets it: two exports into one model directory at once."""

import os

import pytest

from ensemble_helpers import tiny_ensemble
from keras_bnn import durable


def test_an_automatic_version_taken_meanwhile_publishes_as_the_next(tmp_path, monkeypatch):
    ensemble, model_dir = tiny_ensemble(count=2), tmp_path / "tiny"
    publish = durable.publish_directory

    def racing(staging, target):  # another export publishes `target` first
        if os.path.basename(target) == "1" and not os.path.exists(target):
            os.mkdir(target)
            with open(os.path.join(target, "saved_model.pb"), "wb") as handle:
                handle.write(b"theirs")
        return publish(staging, target)

    monkeypatch.setattr(durable, "publish_directory", racing)
    # Until 2026-11-29: FileExistsError for version 1, though no version was asked for.
    assert ensemble.export(model_dir) == os.path.join(str(model_dir), "2")
    assert (model_dir / "1" / "saved_model.pb").read_bytes() == b"theirs"
    assert os.path.isdir(model_dir / "2" / "variables")
    assert not [name for name in os.listdir(model_dir) if name.startswith(".tmp-")]
    with pytest.raises(FileExistsError):  # an explicit version is never moved
        ensemble.export(model_dir, version=1)
    assert sorted(os.listdir(model_dir)) == ["1", "2", "models.config"]
