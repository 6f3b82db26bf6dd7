"""Exporting as a user meets it: two exports into one model directory at once, and
the serving names of a model of several outputs."""

import os

import keras
import numpy as np
import pytest

import keras_bnn as kb
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


def test_outputs_that_would_share_a_serving_name_are_refused_before_writing(tmp_path):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4)(inputs)
    model = keras.Model(inputs, {"age": keras.layers.Dense(2, name="age")(hidden),
                                 "age_mean": keras.layers.Dense(2, name="age_mean")(hidden)})
    rng = np.random.default_rng(0)
    sets = [[w + 0.3 * rng.standard_normal(w.shape).astype("float32")
             for w in model.get_weights()] for _ in range(2)]
    ensemble = kb.PosteriorEnsemble(model, sets, likelihood="gaussian")
    # Until 2026-11-29 the export served `age_mean` once, the output age_mean's
    # predictive, and the output age's mean not at all.
    with pytest.raises(ValueError, match=r"outputs 'age' and 'age_mean' would both be "
                                         r"served as 'age_mean'"):
        ensemble.export(tmp_path / "model")
    assert not os.path.exists(tmp_path / "model")


@pytest.mark.parametrize("name", ["my input", "_ids"])
def test_an_input_name_a_signature_cannot_take_is_refused_before_writing(tmp_path, name):
    first, second = keras.Input((3,)), keras.Input((2,))
    model = keras.Model({name: first, "b": second},
                        keras.layers.Dense(3)(keras.layers.Concatenate()([first, second])))
    ensemble = kb.PosteriorEnsemble(model, [model.get_weights()] * 2)
    assert ensemble.predict({name: np.ones((1, 3)), "b": np.ones((1, 2))}).shape == (1, 3)
    # Until 2026-11-29 TensorFlow's "more than one argument ... was named 'my input'".
    with pytest.raises(ValueError, match=f"input '{name}' cannot name a serving input"):
        ensemble.export(tmp_path / "model")
    assert not os.path.exists(tmp_path / "model")
