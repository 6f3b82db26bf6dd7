"""Small defects found by session 39 and left (misc40): a zombie writer's temp file, a
models.config that pins old versions, a NUL byte in a plot path, and the fingerprint of
a mixed-precision model."""

import dataclasses
import os
import signal
import subprocess
import sys
import time
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import inputs, saved_model_cli, weight_sets
from keras_bnn import cli, durable, export, plots, runs
from keras_bnn.models_config import UnservedVersionWarning
from keras_bnn.store_fingerprint import architecture_of


# ------------------------------------------------------------------ a zombie writer

def _state(pid):
    """The state letter of ``pid`` in ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0].decode()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads Linux /proc")
def test_a_killed_writer_not_yet_reaped_leaves_no_temp_file(tmp_path):
    """A writer killed (SIGKILL) whose parent has not reaped it is a zombie:
    ``kill(pid, 0)`` still succeeds, so until 2026-12-01 ``remove_stale`` took it for a
    live writer and kept its temp file ("assert [] == ['.tmp-...']"). Now ``/proc``'s
    state ``Z`` makes it dead; a live writer's file is still kept."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = os.path.basename(durable.temp_path(str(tmp_path))).replace(
            f"-{os.getpid()}-", f"-{child.pid}-")
        (tmp_path / live).write_bytes(b"half a sample")
        assert durable.remove_stale(str(tmp_path)) == []
        os.kill(child.pid, signal.SIGKILL)  # not waited for: a zombie until reaped
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z":
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        assert durable.remove_stale(str(tmp_path)) == [live]
        assert os.listdir(tmp_path) == []
    finally:
        child.kill()
        child.wait()


# ------------------------------------------------------- a version the config does not serve

def _ensemble():
    keras.utils.set_random_seed(0)
    x = keras.Input((2,))
    model = keras.Model(x, keras.layers.Dense(3)(x))
    return kb.PosteriorEnsemble(model, weight_sets(model, 2))


#: A user's models.config: comments, the model's entry with a version policy and labels,
#: and two other models.
PINNED_CONFIG = """# served by tensorflow_model_server --model_config_file
model_config_list {
  config {
    name: "other"  # another model
    base_path: "/models/other"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 7 } }
  }
  config {
    name: "A"
    base_path: "/models/A"   # Docker's path
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 3 } }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 3 }
  }
  config { name: "third" base_path: "/models/third" model_platform: "tensorflow" }
}
"""


def _exported(ensemble, model_dir):
    """(version directory, the UnservedVersionWarnings) of one export."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = ensemble.export(model_dir)
    return path, [w for w in caught if issubclass(w.category, UnservedVersionWarning)]


def test_an_export_the_models_config_does_not_serve_is_warned_about(tmp_path):
    """The file pins the model to versions 1 and 3 (``specific``): a model server using
    it keeps serving those. Until 2026-12-01 exporting version 2 said nothing
    ("assert (True and 0 == 1)", no warning); now an ``UnservedVersionWarning`` names the file
    and the pinned versions. Version 3, which the policy serves, gets none; another
    model's pin (7) is not this model's; the file is left as the user wrote it."""
    ensemble = _ensemble()
    model_dir = tmp_path / "A"
    assert _exported(ensemble, model_dir)[1] == []  # no file yet: latest, the default
    config = model_dir / export.MODELS_CONFIG
    config.write_text(PINNED_CONFIG)
    path, caught = _exported(ensemble, model_dir)
    assert path.endswith("2") and len(caught) == 1
    message = str(caught[0].message)
    assert f"{config} pins this model to version(s) 1, 3" in message
    assert "new version 2" in message
    assert _exported(ensemble, model_dir)[1] == []  # version 3 is served
    assert config.read_text() == PINNED_CONFIG


@pytest.mark.slow  # about 25 s: an export, then saved_model_cli in a fresh TensorFlow
def test_the_command_line_prints_the_warning_and_serves_the_new_version(
        tmp_path, capsys, monkeypatch):
    """``keras-bnn export`` into a directory whose models.config pins version 1 prints
    the warning as one line, ``keras-bnn: UnservedVersionWarning: <file> pins ...``,
    exits 0, leaves the file as it was, and ``saved_model_cli run`` serves version 2
    with the in-process numbers."""
    ensemble = _ensemble()
    model_dir = tmp_path / "A"
    ensemble.export(model_dir)
    config = model_dir / export.MODELS_CONFIG
    pinned = PINNED_CONFIG.replace("versions: 1 versions: 3", "versions: 1")
    config.write_text(pinned)
    monkeypatch.setattr(runs, "export",
                        lambda run_dir, model_dir, version=None: ensemble.export(model_dir))
    run_config = runs.RunConfig(sampler="sgd", output_dir=str(tmp_path / "run")).validate()
    run = runs.RunDir(run_config.output_dir)
    run.write_json(run.config, dataclasses.asdict(run_config))

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    monkeypatch.setattr(warnings, "showwarning", show)  # as Python does outside pytest
    assert cli.main(["export", "--run-dir", run.path, "--export-dir", str(model_dir)]) == 0
    out, err = capsys.readouterr()
    assert out == f"exported: {model_dir / '2'}\n"
    assert f"keras-bnn: UnservedVersionWarning: {config} pins this model to version(s) 1 " \
           in err
    assert config.read_text() == pinned
    x = inputs(4, seed=3)[:, :2]
    np.save(tmp_path / "x.npy", x)
    result = saved_model_cli("run", "--dir", str(model_dir / "2"), "--tag_set", "serve",
                             "--signature_def", "serving_default", "--inputs",
                             f"inputs={tmp_path / 'x.npy'}", "--outdir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "probabilities.npy"),
                               ensemble.predict(x, verbose=0), atol=1e-6)


@pytest.mark.parametrize("policy", ["latest { num_versions: 2 }", "all {}"])
def test_a_policy_that_serves_new_versions_gets_no_warning(tmp_path, policy):
    """``latest`` and ``all`` serve every new version: no warning."""
    model_dir = tmp_path / "A"
    model_dir.mkdir()
    (model_dir / export.MODELS_CONFIG).write_text(
        PINNED_CONFIG.replace("specific { versions: 1 versions: 3 }", policy))
    assert _exported(_ensemble(), model_dir)[1] == []


# ------------------------------------------------------------------ a NUL byte in a plot path

@pytest.mark.parametrize("path", ["a\0b.png", b"a\0b.png"], ids=["str", "bytes"])
def test_a_plot_path_with_a_nul_byte_is_refused_by_name(tmp_path, monkeypatch, path):
    """Until 2026-12-01 ``ValueError: embedded null byte`` (from ``os.makedirs``), naming
    no argument; now the refusal names ``path``, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    probs = np.full((4, 2), 0.5, "float32")
    with pytest.raises(ValueError, match="`path` must be a filesystem path without NUL"):
        plots.reliability_diagram(probs, np.array([0, 1, 0, 1]), path)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ mixed precision's fingerprint

def _member(policy):
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                 keras.layers.Dense(2, dtype="float32")])
    finally:
        keras.config.set_dtype_policy("float32")


def test_a_mixed_precision_model_shares_its_float32_twins_store_but_not_float64s(tmp_path):
    """Decided (misc40): the fingerprint identifies the parameter space, the weights'
    shapes and dtypes, and the function; a mixed policy's compute dtype is left out,
    as are the other run settings (temperature, sampler). ``mixed_bfloat16`` keeps
    float32 variables, so its samples load into the float32 model (evaluating or
    serving a mixed-precision run in float32) and one store takes both; a ``float64``
    model, whose variables differ, is another architecture."""
    plain, mixed, wide = (_member(policy) for policy in
                          ("float32", "mixed_bfloat16", "float64"))
    assert architecture_of(plain)["fingerprint"] == architecture_of(mixed)["fingerprint"]
    assert architecture_of(plain)["fingerprint"] != architecture_of(wide)["fingerprint"]
    store = kb.SampleStore(tmp_path / "store")
    store.append(plain, step=1)
    store.append(mixed, step=2)
    assert len(store) == 2
    with pytest.raises(ValueError, match="architecture"):
        store.append(wide, step=3)
