"""PosteriorEnsemble.export: a TF Serving version directory that TensorFlow's
own tools (saved_model_cli, tf.saved_model.load in a fresh process) serve with
the in-process numbers; versioning; atomicity; models.config."""

import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from ensemble_helpers import (
    INPUT_DIM, NUM_CLASSES, inputs, run_fresh, saved_model_cli, tiny_ensemble,
)
from keras_bnn.ensemble import CATEGORICAL_OUTPUTS

# Loads a version directory in a fresh Python, calls serving_default on an
# .npy input, and reports the signature, the outputs (.npz) and how it
# answers a wrong shape and a wrong dtype.
_FRESH_LOAD = """
import json, sys
import numpy as np, tensorflow as tf
version_dir, x_path, out_path = sys.argv[1:]
signature = tf.saved_model.load(version_dir).signatures["serving_default"]
outputs = signature(inputs=tf.constant(np.load(x_path)))
np.savez(out_path, **{name: value.numpy() for name, value in outputs.items()})
report = {
    "inputs": {name: [spec.shape.as_list(), spec.dtype.name]
               for name, spec in signature.structured_input_signature[1].items()},
    "outputs": {name: [spec.shape.as_list(), spec.dtype.name]
                for name, spec in signature.structured_outputs.items()},
}
for case, bad in [("shape", np.ones((2, 4), "float32")), ("dtype", np.ones((2, 5), "int32"))]:
    try:
        signature(inputs=tf.constant(bad))
        report[case] = "accepted"
    except (TypeError, ValueError, tf.errors.InvalidArgumentError) as error:
        report[case] = type(error).__name__ + ": " + str(error)
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(ensemble, model_dir, version_dir, x, in-process summary of x)."""
    ensemble = tiny_ensemble(count=3)
    x = inputs(7)
    model_dir = tmp_path_factory.mktemp("saved_models") / "tiny"
    version_dir = ensemble.export(model_dir)
    return ensemble, model_dir, version_dir, x, ensemble.predict_uncertainty(x)


def test_export_writes_a_serving_version_directory_and_models_config(exported):
    _, model_dir, version_dir, _, _ = exported
    assert version_dir == os.path.join(str(model_dir), "1")
    assert sorted(os.listdir(model_dir)) == ["1", "models.config"]
    assert os.path.isfile(os.path.join(version_dir, "saved_model.pb"))
    assert os.listdir(os.path.join(version_dir, "variables"))
    config = (model_dir / "models.config").read_text()
    assert re.search(r'model_config_list\s*{\s*config\s*{', config)
    assert re.search(r'name:\s*"tiny"', config)
    assert re.search(rf'base_path:\s*"{re.escape(str(model_dir))}"', config)


def test_signature_has_named_input_and_outputs(exported):
    ensemble, _, version_dir, _, _ = exported
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    (input_spec,) = signature.structured_input_signature[1].values()
    assert list(signature.structured_input_signature[1]) == ["inputs"]
    assert input_spec.shape.as_list() == [None, INPUT_DIM] and input_spec.dtype == tf.float32
    shapes = {name: spec.shape.as_list() for name, spec in signature.structured_outputs.items()}
    assert shapes == {
        "probabilities": [None, NUM_CLASSES],
        "log_probabilities": [None, NUM_CLASSES],
        "class_std": [None, NUM_CLASSES],
        "predictive_entropy": [None],
        "expected_entropy": [None],
        "mutual_information": [None],
    }
    # Any batch size, same numbers as in-process.
    for batch in (1, 17):
        x = inputs(batch, seed=batch)
        np.testing.assert_allclose(
            signature(inputs=tf.constant(x))["probabilities"].numpy(),
            ensemble.predict(x, verbose=0),
            atol=1e-6,
        )


def test_saved_model_cli_run_matches_predict(exported, tmp_path):
    ensemble, _, version_dir, x, summary = exported
    np.save(tmp_path / "x.npy", x)
    result = saved_model_cli(
        "run", "--dir", version_dir, "--tag_set", "serve",
        "--signature_def", "serving_default",
        "--inputs", f"inputs={tmp_path / 'x.npy'}", "--outdir", str(tmp_path / "out"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = {name[:-4] for name in os.listdir(tmp_path / "out")}
    assert written == set(CATEGORICAL_OUTPUTS)
    np.testing.assert_allclose(
        np.load(tmp_path / "out" / "probabilities.npy"), ensemble.predict(x, verbose=0), atol=1e-5
    )
    for name in CATEGORICAL_OUTPUTS:
        np.testing.assert_allclose(
            np.load(tmp_path / "out" / f"{name}.npy"), summary[name], atol=1e-5, err_msg=name
        )


def test_saved_model_cli_rejects_a_wrong_shape_with_an_error(exported, tmp_path):
    _, _, version_dir, _, _ = exported
    np.save(tmp_path / "bad.npy", np.ones((2, INPUT_DIM - 1), "float32"))
    result = saved_model_cli(
        "run", "--dir", version_dir, "--tag_set", "serve",
        "--signature_def", "serving_default",
        "--inputs", f"inputs={tmp_path / 'bad.npy'}", "--outdir", str(tmp_path / "out"),
    )
    assert result.returncode == 1  # a Python error exit, not a signal (crash)
    assert f"Cannot feed value of shape (2, {INPUT_DIM - 1})" in result.stderr
    assert f"shape (None, {INPUT_DIM})" in result.stderr
    assert not (tmp_path / "out").exists()


def test_fresh_process_load_matches_predict_and_rejects_bad_inputs(exported, tmp_path):
    _, _, version_dir, x, summary = exported
    np.save(tmp_path / "x.npy", x)
    result = run_fresh(
        [sys.executable, "-c", _FRESH_LOAD, version_dir, str(tmp_path / "x.npy"),
         str(tmp_path / "out.npz")]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["inputs"] == {"inputs": [[None, INPUT_DIM], "float32"]}
    assert set(report["outputs"]) == set(CATEGORICAL_OUTPUTS)
    # Clear errors at the serving boundary (not from deep inside the network).
    assert report["shape"].startswith("InvalidArgumentError"), report["shape"]
    assert (
        "Shape of tensor inputs [2,4] is not compatible with expected shape [?,5]"
        in report["shape"]
    )
    assert report["dtype"].startswith("InvalidArgumentError"), report["dtype"]
    assert "expected to be a float tensor but is a int32 tensor" in report["dtype"]
    with np.load(tmp_path / "out.npz") as outputs:
        assert set(outputs.files) == set(CATEGORICAL_OUTPUTS)
        for name in CATEGORICAL_OUTPUTS:
            np.testing.assert_allclose(outputs[name], summary[name], atol=1e-5, err_msg=name)


def test_export_refuses_an_existing_version_and_finds_the_next(exported, tmp_path):
    ensemble, _, _, x, _ = exported
    model_dir = tmp_path / "model"
    first = ensemble.export(model_dir, version=3)
    stamp = os.stat(os.path.join(first, "saved_model.pb")).st_mtime_ns
    with pytest.raises(FileExistsError) as caught:
        ensemble.export(model_dir, version=3)
    assert caught.value.filename == first and first in str(caught.value)
    assert "leave it unset for the next one, 4" in str(caught.value)
    assert os.stat(os.path.join(first, "saved_model.pb")).st_mtime_ns == stamp
    assert ensemble.export(model_dir) == os.path.join(str(model_dir), "4")
    assert sorted(os.listdir(model_dir)) == ["3", "4", "models.config"]


def test_export_refuses_a_version_directory_as_the_model_dir(exported):
    """``keras-bnn export --export-dir saved_models/a/1`` wrote saved_models/a/1/1 and a
    models.config naming a model "1"."""
    ensemble, model_dir, version_dir, _, _ = exported
    with pytest.raises(ValueError, match="must be a model's base directory .* not one of its "
                                         "versions"):
        ensemble.export(version_dir)
    assert not os.path.exists(os.path.join(version_dir, "1"))
    assert sorted(os.listdir(model_dir)) == ["1", "models.config"]


def test_the_serving_client_imports_no_keras():
    """keras_bnn.serving ("standard library only") imported Keras and TensorFlow
    (4.6 s) for one constant of keras_bnn.export."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", "import sys, keras_bnn.serving; print(sorted("
                           "m for m in ('keras', 'tensorflow', 'jax') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("version", [0, -1, "2", 1.0, True])
def test_export_rejects_a_bad_version(exported, tmp_path, version):
    ensemble = exported[0]
    with pytest.raises(ValueError, match="`version`"):
        ensemble.export(tmp_path / "model", version=version)
    assert not (tmp_path / "model").exists()


def test_interrupted_export_leaves_no_version_directory(exported, tmp_path, monkeypatch):
    ensemble = exported[0]
    model_dir = tmp_path / "model"
    ensemble.export(model_dir)
    before = sorted(os.listdir(model_dir))
    real_save = tf.saved_model.save
    written = []

    def save_then_fail(obj, export_dir, *args, **kwargs):
        real_save(obj, export_dir, *args, **kwargs)  # files on disk, then the crash
        written.append(sorted(os.listdir(export_dir)))
        raise KeyboardInterrupt("interrupted mid-export")

    monkeypatch.setattr(tf.saved_model, "save", save_then_fail)
    with pytest.raises(KeyboardInterrupt):
        ensemble.export(model_dir)
    assert "saved_model.pb" in written[0]  # the export really was half done
    assert sorted(os.listdir(model_dir)) == before == ["1", "models.config"]


# ------------------------------------------------------- reliability (#12)
def test_nan_input_is_rejected_by_the_signature_and_nan_in_process(exported):
    """Item 5: no finite, confident-looking answer for a non-finite input."""
    ensemble, _, version_dir, x, summary = exported
    bad = x.copy()
    bad[2, 1] = np.nan
    bad[4, 0] = np.inf
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="NaN or Inf"):
        signature(inputs=tf.constant(bad))
    probs = ensemble.predict(bad, verbose=0)
    assert np.isnan(probs[[2, 4]]).all()
    clean = [0, 1, 3, 5, 6]
    np.testing.assert_allclose(probs[clean], summary["probabilities"][clean], rtol=1e-6)
    uncertainty = ensemble.predict_uncertainty(bad)
    assert np.isnan(uncertainty["mutual_information"][[2, 4]]).all()
    assert np.isfinite(uncertainty["mutual_information"][clean]).all()


def test_models_config_failure_publishes_no_version(exported, tmp_path, monkeypatch):
    """Item 7: models.config is written before the version is published."""
    from keras_bnn import durable

    ensemble = exported[0]
    model_dir = tmp_path / "model"

    def disk_full(path, write):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(durable, "atomic_write", disk_full)
    with pytest.raises(OSError, match="No space left"):
        ensemble.export(model_dir)
    assert not [n for n in os.listdir(model_dir) if not n.startswith(".tmp-")]


def test_models_config_escapes_the_model_name(exported, tmp_path):
    from google.protobuf import text_encoding

    ensemble = exported[0]
    name = 'we"ird\\name\nwith ü'
    model_dir = tmp_path / name
    ensemble.export(model_dir)
    text = (model_dir / "models.config").read_text()
    quoted = re.findall(r'(name|base_path): "((?:[^"\\]|\\.)*)"', text)
    values = dict((key, text_encoding.CUnescape(value).decode()) for key, value in quoted)
    assert values == {"name": name, "base_path": str(model_dir)}


@pytest.mark.parametrize("model_dir", ["", "   ", None, 3])
def test_export_refuses_an_empty_or_non_path_model_dir(exported, model_dir):
    with pytest.raises(ValueError, match="`model_dir`"):
        exported[0].export(model_dir)


def test_export_refuses_versions_beyond_int64(exported, tmp_path):
    ensemble = exported[0]
    with pytest.raises(ValueError, match=r"`version` must be an int in \[1, 9223372036854775807\]"):
        ensemble.export(tmp_path / "model", version=2**63)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / str(2**63 - 1)).mkdir()
    with pytest.raises(ValueError, match="largest int64"):
        ensemble.export(tmp_path / "full")


def test_a_killed_exports_staging_directory_is_removed_by_the_next(exported, tmp_path):
    from keras_bnn import durable

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    dead = run_fresh([sys.executable, "-c", "import os; print(os.getpid())"])
    stale = os.path.basename(durable.temp_path(str(model_dir), tag="v1-")).replace(
        f"-{os.getpid()}-", f"-{int(dead.stdout)}-")
    (model_dir / stale).mkdir()
    (model_dir / stale / "saved_model.pb").write_bytes(b"half")
    exported[0].export(model_dir)
    assert sorted(os.listdir(model_dir)) == ["1", "models.config"]


_EXPORT_LOOP = """
import sys
sys.path.insert(0, sys.argv[2])
from ensemble_helpers import tiny_ensemble
ensemble = tiny_ensemble(count=2)
print("ready", flush=True)
while True:
    print("exported", ensemble.export(sys.argv[1]), flush=True)
"""


@pytest.mark.slow
def test_kill_9_during_export_never_leaves_a_partial_version(exported, tmp_path):
    """Exports in a loop, killed with SIGKILL at 4 moments (each after the
    loop's first published version): every integer version directory is a
    complete SavedModel, every acknowledged one is there, and the next
    export cleans the killed one's staging directory."""
    import signal
    import subprocess
    import time

    model_dir = tmp_path / "model"
    tests_dir = os.path.dirname(__file__)
    rng = np.random.default_rng(1)
    acknowledged = []
    for _ in range(4):
        process = subprocess.Popen([sys.executable, "-c", _EXPORT_LOOP, str(model_dir),
                                    tests_dir], stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline().strip() == "ready"
        acknowledged.append(process.stdout.readline())  # the loop is running
        time.sleep(rng.uniform(0.0, 3.0))
        process.send_signal(signal.SIGKILL)
        acknowledged += process.communicate(timeout=60)[0].splitlines()
    versions = [n for n in os.listdir(model_dir) if n.isdigit()]
    acknowledged = {os.path.basename(line.split()[1].rstrip("/"))
                    for line in acknowledged if line.startswith("exported")}
    assert len(acknowledged) >= 4 and acknowledged <= set(versions)
    for version in versions:
        signature = tf.saved_model.load(str(model_dir / version)).signatures["serving_default"]
        assert signature(inputs=tf.zeros((1, INPUT_DIM)))["probabilities"].shape == (1, NUM_CLASSES)
    exported[0].export(model_dir)
    assert not [n for n in os.listdir(model_dir) if n.startswith(".tmp-")]


def test_export_module_writes_the_same_layout_as_the_method(exported, tmp_path):
    """keras_bnn.export is the implementation behind PosteriorEnsemble.export."""
    from keras_bnn import export

    ensemble, _, _, x, summary = exported
    model_dir = tmp_path / "direct"
    assert export.next_version(str(model_dir)) == 1
    version_dir = export.export_ensemble(ensemble, model_dir)
    assert version_dir == os.path.join(str(model_dir), "1")
    assert export.next_version(str(model_dir)) == 2
    assert sorted(os.listdir(model_dir)) == ["1", export.MODELS_CONFIG]
    signature = tf.saved_model.load(version_dir).signatures[export.SERVING_SIGNATURE]
    outputs = signature(**{export.SERVING_INPUT: tf.constant(x)})
    # Same float32 graph, traced twice: equal up to float32 round-off (as above).
    np.testing.assert_allclose(outputs["probabilities"].numpy(), summary["probabilities"],
                               atol=1e-5)
