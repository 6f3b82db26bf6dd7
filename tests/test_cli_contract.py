"""The keras-bnn contract: exit 2 and one line for every bad input, fast
--help without TensorFlow, quiet TensorFlow start-up, resumable runs
(issue item 8), and hypothesis fuzzing of argv and --config."""

import json
import os
import subprocess
import sys
import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import keras_bnn as kb
from keras_bnn import cli, console, runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kb.__file__)))


def _one_line_error(code, err):
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("keras-bnn: error:"), err
    return lines[0]


def _fresh(args, env=None, timeout=120):
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env or {})
    start = time.monotonic()
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                            timeout=timeout, env=environment)
    return result, time.monotonic() - start


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["train", "--epochs", "x"],
                                  ["frobnicate"]])
def test_help_and_argument_errors_do_not_import_tensorflow(argv):
    """`-X importtime` lists every module imported: neither TensorFlow nor
    Keras may be among them (they take ~10 s to import here); nor numpy,
    except for ``train --help``, which shows RunConfig's defaults."""
    result, seconds = _fresh(["-X", "importtime", "-m", "keras_bnn.cli", *argv])
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert not {"tensorflow", "keras"} & imported
    assert "numpy" not in imported or argv == ["train", "--help"]
    messages = [line for line in result.stderr.splitlines()
                if not line.startswith("import time:")]
    if argv[-1] == "--help":
        assert result.returncode == 0 and "usage: keras-bnn" in result.stdout
        assert messages == []
    else:
        _one_line_error(result.returncode, "\n".join(messages))
    # Bound on a loaded 2-core machine; it is ~0.1 s when idle.
    assert seconds < 5.0


def test_the_start_up_log_is_silenced_under_jax_too():
    """Under KERAS_BACKEND=jax Keras does not import TensorFlow, so the run's
    tf.data pipeline did later, and its six start-up lines ("oneDNN custom
    operations are on", "Could not find cuda drivers", ...) showed."""
    result, _ = _fresh(["-c", "from keras_bnn import console; console.import_keras_quietly(); "
                              "import keras, tensorflow; print(keras.backend.backend())"],
                       env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0 and result.stdout.strip() == "jax"
    assert result.stderr.strip() == "", result.stderr


def test_tensorflow_start_up_log_is_silenced_unless_the_user_asks():
    """A command that imports TensorFlow prints only its one error line: no
    oneDNN / CUDA / CPU-feature messages."""
    result, _ = _fresh(["-m", "keras_bnn.cli", "evaluate", "--run-dir", "/nonexistent/run"])
    assert _one_line_error(result.returncode, result.stderr).endswith(
        "holds no run (no config.json).")


def _write_config(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("content, reason", [
    ("[1, 2]", "must hold a JSON object of RunConfig fields; it holds a list"),
    ("null", "it holds a NoneType"),
    ('"epochs"', "it holds a str"),
    ("[" * 100_000 + "]" * 100_000, "is not valid JSON (RecursionError"),
    ('{"output_dir": 5}', "`output_dir` must be a non-empty string"),
    ('{"data_dir": ["x"]}', "`data_dir` must be a non-empty string"),
    ('{"model": ["mlp"]}', "`model` must be one of 'mlp', 'resnet_pp'"),
    ('{"epochs": 2.5}', "`epochs` must be an int"),
    ('{"seed": 1.9}', "`seed` must be an int"),
    ('{"step_size": 1e-300}', "`step_size` must lie in float32's normal range"),
    ('{"temperature": 1e-320}', "`temperature` must lie in float32's normal range"),
    ('{"epochs": 30, "collect_every": 40}', "`collect_every` (40) must be at most"),
    ('{"epochs": 30, "burn_in_epochs": 10, "cycle_epochs": 30}',
     "`cycle_epochs` (30) must be at most"),
    ("\xff\xfe", "is not valid JSON"),
])
def test_bad_configs_exit_2_with_one_line(tmp_path, capsys, content, reason):
    config = _write_config(tmp_path, content)
    flags = [] if "output_dir" in content else ["--output-dir", str(tmp_path / "run")]
    code = cli.main(["train", "--config", config, *flags, "--verbose", "0"])
    line = _one_line_error(code, capsys.readouterr().err)
    assert reason in line


@pytest.mark.parametrize("flags, reason", [
    (["--step-size", "1e-300"], "`step_size` must lie in float32's normal range"),
    (["--epochs", "3", "--burn-in-epochs", "1", "--collect-every", "5"], "`collect_every` (5)"),
    (["--epochs", "3", "--burn-in-epochs", "0", "--cycle-epochs", "4"], "`cycle_epochs` (4)"),
    (["--seed", "-1"], "`seed` must be an int"),
])
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, flags, reason):
    code = cli.main(["train", *flags, "--output-dir", str(tmp_path / "run"), "--verbose", "0"])
    assert reason in _one_line_error(code, capsys.readouterr().err)


def _fake_run(tmp_path):
    """A run directory with a config and 2 samples of its model (no training)."""
    config = runs.RunConfig(output_dir=str(tmp_path / "run"), epochs=3,
                            burn_in_epochs=1, num_train=100, num_test=50,
                            batch_size=50, prior="he_normal").validate()
    os.makedirs(config.output_dir)
    with open(os.path.join(config.output_dir, "config.json"), "w") as handle:
        json.dump(vars(config), handle)
    _, _, info = runs.load_data(config)
    model = runs.build_model(config, info)
    store = kb.SampleStore(os.path.join(config.output_dir, "samples"))
    store.append(model, step=1)
    store.append(model, step=2)
    return config.output_dir, store


@pytest.mark.parametrize("command", ["export", "evaluate"])
def test_a_corrupt_sample_is_one_line_naming_the_file(tmp_path, capsys, command):
    run_dir, store = _fake_run(tmp_path)
    sample = os.path.join(store.path, "sample-000001.npz")
    with open(sample, "r+b") as handle:
        handle.truncate(100)
    argv = [command, "--run-dir", run_dir]
    if command == "export":
        argv += ["--export-dir", str(tmp_path / "saved_models" / "m")]
    line = _one_line_error(cli.main(argv), capsys.readouterr().err)
    assert "sample-000001.npz is corrupt" in line


def test_a_full_disk_during_export_is_one_line(tmp_path, capsys, monkeypatch):
    from keras_bnn import durable

    run_dir, _ = _fake_run(tmp_path)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(durable, "publish_directory", disk_full)
    export_dir = tmp_path / "saved_models" / "m"
    line = _one_line_error(cli.main(["export", "--run-dir", run_dir, "--export-dir",
                                     str(export_dir)]), capsys.readouterr().err)
    assert "No space left on device" in line
    assert sorted(os.listdir(export_dir)) == ["models.config"]


def test_resume_refuses_what_it_cannot_continue(tmp_path, capsys):
    run_dir, _ = _fake_run(tmp_path)
    cases = [
        (["train", "--resume"], "--resume needs --output-dir"),
        (["train", "--resume", "--output-dir", str(tmp_path / "none")], "holds no run"),
        (["train", "--resume", "--output-dir", run_dir, "--epochs", "9"],
         "`epochs` is 3 there, 9 given"),
        (["train", "--resume", "--output-dir", run_dir, "--config", "x.json"],
         "do not pass --config"),
        (["train", "--output-dir", run_dir], "continue a killed run with --resume"),
    ]
    for argv, reason in cases:
        assert reason in _one_line_error(cli.main(argv + ["--verbose", "0"]),
                                         capsys.readouterr().err)
    open(os.path.join(run_dir, "kinetic_temperatures.json"), "w").write("[]")
    assert "is complete" in _one_line_error(
        cli.main(["train", "--resume", "--output-dir", run_dir]), capsys.readouterr().err)


# --------------------------------------------------------------- fuzzing
_FLAGS = ["--dataset", "--model", "--sampler", "--step-size", "--temperature", "--epochs",
          "--batch-size", "--cycle-epochs", "--burn-in-epochs", "--collect-every",
          "--num-train", "--seed", "--output-dir", "--resume", "--config", "--version",
          "--run-dir", "--num-bins", "--temperatures"]
_VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e-300", "1e300", "0", "-1", "1.9", "", "x",
                     "99999999999999999999", "atmc", "mlp", "synthetic", "/dev/null"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=6),
)


@pytest.fixture
def stubbed_runs(monkeypatch):
    """Replaces the long-running commands by stubs that only validate."""
    calls = []
    monkeypatch.setattr(runs, "train",
                        lambda config, verbose=1, resume=False: calls.append(config) or
                        (_ for _ in ()).throw(ValueError("stub: validated")))
    monkeypatch.setattr(runs, "sweep_temperature",
                        lambda config, temperatures, verbose=0: calls.append(config) or [])
    return calls


def test_the_fuzzed_commands_reach_the_stubs(stubbed_runs, capsys):
    """The fuzz below is not vacuous: a valid argv reaches the stubbed run."""
    code = cli.main(["train", "--epochs", "3", "--burn-in-epochs", "1", "--seed", "4"])
    assert "stub: validated" in _one_line_error(code, capsys.readouterr().err)
    assert len(stubbed_runs) == 1 and stubbed_runs[0].seed == 4


def test_a_child_command_hides_the_start_up_log_itself(monkeypatch):
    """``keras-bnn export`` under JAX runs itself again under TensorFlow; the
    child inherited the level the parent had set to hide the log, took it
    for the user's and printed TensorFlow's start-up lines."""
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.setattr(console, "_QUIET_SET", True)  # set by import_keras_quietly
    child = console.child_environment(KERAS_BACKEND="tensorflow")
    assert "TF_CPP_MIN_LOG_LEVEL" not in child and child["KERAS_BACKEND"] == "tensorflow"
    monkeypatch.setattr(console, "_QUIET_SET", False)  # the user's own level is kept
    assert console.child_environment()["TF_CPP_MIN_LOG_LEVEL"] == "3"


def test_the_commands_print_the_library_s_warnings_without_keras_location(monkeypatch,
                                                                          capsys):
    """NotConvergedWarning is issued in a callback, so Python printed it after
    a line of Keras' callback_list.py; a command prints it as one line."""
    from keras_bnn.callbacks import NotConvergedWarning

    def train(config, verbose=1, resume=False):
        for category in (NotConvergedWarning, UserWarning):
            print(warnings.formatwarning(category("ended before equilibrium"), category,
                                         "/keras/src/callbacks/callback_list.py", 245),
                  end="")
        return None

    monkeypatch.setattr(runs, "train", train)
    monkeypatch.setattr(console, "print_train_result", lambda result, output_dir: None)
    cli.main(["train", "--epochs", "3", "--burn-in-epochs", "1"])
    mine, other = capsys.readouterr().out.splitlines()[:2]
    assert mine == "keras-bnn: NotConvergedWarning: ended before equilibrium"
    assert other.startswith("/keras/src/callbacks/callback_list.py:245: UserWarning")
    assert warnings.formatwarning is warnings._formatwarning_orig  # restored


# The stubs and capsys hold no per-example state (capsys is read every example).
_CLI_FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_CLI_FUZZ
@given(command=st.sampled_from(["train", "sweep-temperature", "evaluate", "export", "demo",
                                "bogus"]),
       pairs=st.lists(st.tuples(st.sampled_from(_FLAGS), _VALUES), max_size=4))
def test_fuzz_argv_never_escapes_the_contract(stubbed_runs, capsys, command, pairs):
    argv = [command] + [item for flag, value in pairs for item in (flag, value)]
    argv += ["--run-dir", "/nonexistent/run", "--export-dir", "/nonexistent/x"] \
        if command in ("evaluate", "export") else ["--epochs", "0"] if command == "demo" else []
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse --help-like exits only
        code = exit_.code
    err = capsys.readouterr().err
    if code != 0:
        _one_line_error(code, err)


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=4)),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["epochs", "model_args", "seed", "sampler", "step_size",
                         "output_dir", "batch_size", "x"]), children, max_size=3),
    max_leaves=8,
)


@_CLI_FUZZ
@given(value=_JSON)
def test_fuzz_config_json_never_escapes_the_contract(stubbed_runs, capsys, tmp_path_factory,
                                                     value):
    path = tmp_path_factory.mktemp("config") / "c.json"
    path.write_text(json.dumps(value))
    code = cli.main(["train", "--config", str(path)])
    _one_line_error(code, capsys.readouterr().err)  # stub or validation: always 2
