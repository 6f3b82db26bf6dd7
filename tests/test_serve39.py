"""Export and serving defects found by the session-39 sweep (serve39)."""

import errno
import os
import re

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import weight_sets
from keras_bnn import export, models_config
from keras_bnn.export import served_signature
from keras_bnn.serving import ServingClient
from tf_serving_standin import serving


def dotted_ensemble():
    """An ensemble of a dict member whose keys TensorFlow sanitises as arguments:
    ``a/b`` -> ``a_b``, ``x.y`` -> ``x_y``."""
    keras.utils.set_random_seed(0)
    first, second = keras.Input((2,), name="first"), keras.Input((3,), name="second")
    output = keras.layers.Dense(3)(keras.layers.Concatenate()([first, second]))
    model = keras.Model({"a/b": first, "x.y": second}, output)
    return kb.PosteriorEnsemble(model, weight_sets(model, 2))


def _tiny():
    """(member, weight sets) of a small ensemble of one float32 input [2]."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    return model, weight_sets(model, 2)


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_inputs_that_tensorflow_sanitises_are_served_under_the_signature_keys(
        tmp_path, format):
    """The SavedModel's SignatureDef names the inputs ``a/b`` and ``x.y`` (what
    ``saved_model_cli show --all`` prints, what TF Serving's metadata and predict
    take); the loaded function's arguments are ``a_b`` and ``x_y``. Until
    2026-11-30 the stand-in took the arguments' names, and answered the client's
    request under the signature's names HTTP 400 "Missing named input: a_b in
    'inputs' object." (row format: "keys must be equal to: a_b,x_y"), where TF
    Serving serves it. Now it serves the signature's keys, and the client's
    answer is the in-process ensemble's."""
    ensemble = dotted_ensemble()
    path = ensemble.export(tmp_path / "dotted")
    assert sorted(served_signature(path)["inputs"]) == ["a/b", "x.y"]
    batch = {"a/b": np.linspace(-1, 1, 8, dtype="float32").reshape(4, 2),
             "x.y": np.linspace(0, 2, 12, dtype="float32").reshape(4, 3)}
    with serving(path, "dotted") as (url, _):
        answer = ServingClient("dotted", url=url, timeout=10).predict(batch, format=format)
    np.testing.assert_allclose(answer["probabilities"], ensemble.predict(batch, verbose=0),
                               atol=1e-6)


#: A models.config as a user edits it: a comment, a version policy and labels on
#: the exported model's entry (its base_path set for Docker), and another model.
EDITED_CONFIG = """# served by tensorflow_model_server --model_config_file
model_config_list {
  config {
    name: "A"
    base_path: "/models/A"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: "stable" value: 1 }
  }
  config { name: "other" base_path: "/models/other" model_platform: "tensorflow" }
}
"""


def _entries(path):
    """(name, base_path) of each entry of a models.config, as TF Serving parses it."""
    from google.protobuf import text_format

    config = models_config._config_message()()
    text_format.Parse(path.read_text(), config, allow_unknown_field=True)
    return [(os.fsdecode(entry.name), os.fsdecode(entry.base_path))
            for entry in config.model_config_list.config]


def test_re_exporting_keeps_an_edited_models_config_and_another_model_leaves_it(tmp_path):
    """Until 2026-11-30 every export rewrote ``models.config`` with its one entry:
    the user's version policy, labels, Docker base_path, comment and the entry of
    another model were lost at the next export of the model ("assert ... == ..."
    on the file's text failed). Now a file that names the model is left as it is;
    exporting another model into a sibling directory writes that one's file."""
    ensemble = kb.PosteriorEnsemble(*_tiny())
    ensemble.export(tmp_path / "A")
    config = tmp_path / "A" / export.MODELS_CONFIG
    config.write_text(EDITED_CONFIG)
    assert ensemble.export(tmp_path / "A").endswith("2")
    ensemble.export(tmp_path / "B")
    assert config.read_text() == EDITED_CONFIG
    assert _entries(tmp_path / "B" / export.MODELS_CONFIG) == [("B", str(tmp_path / "B"))]


@pytest.mark.parametrize("old, new", [
    ('# mine\nmodel_config_list: < config { name: "other" base_path: "/m/o" } > # end\n',
     '# mine\nmodel_config_list: <\n  {entry} config { name: "other" base_path: "/m/o" } '
     '> # end\n'),
    ("# only a comment, no newline",
     "# only a comment, no newline\nmodel_config_list {\n  {entry}\n}\n")],
    ids=["another model", "only a comment"])
def test_a_models_config_without_the_model_gets_its_entry_and_keeps_the_rest(
        tmp_path, old, new):
    """A file that does not name the model (by name or base path) gets its entry
    first in the list (a list when it has none), the rest kept byte for byte;
    until 2026-11-30 it was replaced, losing ``other`` and the comments."""
    model_dir = tmp_path / "A"
    model_dir.mkdir()
    config = model_dir / export.MODELS_CONFIG
    config.write_text(old)
    export.write_models_config(str(model_dir))
    entry = (f'config {{\n    name: "A"\n    base_path: "{model_dir}"\n'
             '    model_platform: "tensorflow"\n  }')
    assert config.read_text() == new.replace("{entry}", entry)
    assert _entries(config) == [("A", str(model_dir))] + (
        [("other", "/m/o")] if "other" in old else [])


def test_a_models_config_that_does_not_parse_is_refused_by_name(tmp_path):
    """Until 2026-11-30 a broken file (here cut short) was replaced silently;
    now the export is refused naming it and where it does not parse, before any
    version is written, and the file is left as it was."""
    model_dir = tmp_path / "A"
    model_dir.mkdir()
    config = model_dir / export.MODELS_CONFIG
    config.write_text('model_config_list { config { name: "A" ')
    with pytest.raises(ValueError, match=rf"{re.escape(str(config))} is not a TensorFlow "
                                         r"Serving model config .*1:\d+ : Expected"):
        kb.PosteriorEnsemble(*_tiny()).export(model_dir)
    assert config.read_text() == 'model_config_list { config { name: "A" '
    assert sorted(os.listdir(model_dir)) == [export.MODELS_CONFIG]


def test_a_models_config_of_a_directory_name_that_is_not_utf8_is_left_as_it_is(tmp_path):
    """A Linux directory name need not be UTF-8 (``\\xff``): its file, written with
    the name's bytes octal-escaped, names the model at the next export and is
    left untouched (until 2026-11-30 rewritten at each export)."""
    model_dir = os.path.join(str(tmp_path), os.fsdecode(b"m\xff n"))
    os.mkdir(model_dir)
    config = export.write_models_config(model_dir)
    assert r'name: "m\377 n"' in open(config).read()
    os.utime(config, ns=(0, 0))
    export.write_models_config(model_dir)
    assert os.stat(config).st_mtime_ns == 0


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS], ids=["EACCES", "EROFS"])
@pytest.mark.parametrize("config", [True, False], ids=["deployed", "empty"])
def test_a_model_dir_that_cannot_be_written_is_named(tmp_path, monkeypatch, code, config):
    """A read-only model directory (a deployed one, with its models.config, or an
    empty one; the tests run as root, so creating an entry in it fails here as it
    does for a user without write permission: EACCES, or EROFS on a read-only
    mount) was refused naming a temporary path, ``.tmp-<host>-<pid>-<hex>``
    (``models.config``'s, or with the file kept the version's staging one,
    ``...-v1-<hex>``); now the error names ``model_dir`` and says nothing was
    exported, and nothing is left."""
    model, sets = _tiny()
    model_dir = tmp_path / "A"
    model_dir.mkdir()
    if config:
        export.write_models_config(str(model_dir))
    before = sorted(os.listdir(model_dir))
    real = {"mkdir": os.mkdir, "open": os.open}

    def denied(name):  # creating an entry in model_dir fails; reading works
        def call(path, *args, **kwargs):
            if os.path.dirname(os.fspath(path)) == str(model_dir) and (
                    name == "mkdir" or args[0] & os.O_CREAT):
                raise OSError(code, os.strerror(code), path)
            return real[name](path, *args, **kwargs)
        return call

    for name in real:
        monkeypatch.setattr(os, name, denied(name))
    with pytest.raises(OSError, match=rf"`model_dir` cannot be created or written .*nothing was "
                                      rf"exported: '{re.escape(str(model_dir))}'") as raised:
        kb.PosteriorEnsemble(model, sets).export(model_dir)
    monkeypatch.undo()
    assert raised.value.errno == code and raised.value.filename == str(model_dir)
    assert sorted(os.listdir(model_dir)) == before


@pytest.mark.parametrize("entry", ["directory", "file"])
def test_a_newer_entry_without_a_signature_does_not_hide_the_served_one(tmp_path, entry):
    """Version 1 serves inputs [?, 2]; a newer entry ``2`` without a SavedModel (an
    empty or partly copied directory, a file) does not load, so a model server
    keeps serving version 1. Until 2026-11-30 the signature check read only the
    newest entry, found nothing, and published an ensemble of inputs [?, 4] as
    version 3, which the server would switch every client to; now it is refused
    naming version 1, and nothing is published."""
    model, sets = _tiny()
    kb.PosteriorEnsemble(model, sets).export(tmp_path / "A")
    getattr(tmp_path / "A" / "2", {"directory": "mkdir", "file": "touch"}[entry])()
    inputs = keras.Input((4,))
    wider = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    with pytest.raises(ValueError, match=r"serves version 1 with another 'serving_default' "
                                         r"signature.*inputs 'inputs': \('float32', \(-1, 2\)\)"
                                         r" -> \('float32', \(-1, 4\)\)"):
        kb.PosteriorEnsemble(wider, weight_sets(wider, 2)).export(tmp_path / "A")
    assert sorted(os.listdir(tmp_path / "A")) == ["1", "2", export.MODELS_CONFIG]
