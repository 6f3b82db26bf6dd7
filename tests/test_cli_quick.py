"""The CLI answers argument errors at once: checked before Keras/TensorFlow are imported.

The requirement is under a second per error; on a loaded CI machine the
tests bound the time loosely and assert the real property: at the error,
neither ``keras`` nor ``tensorflow`` is in ``sys.modules``.
"""

import inspect
import json
import os
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from keras_bnn import cli, cli_parser
from keras_bnn import data as data_lib
from keras_bnn import likelihoods, models, runs, samplers
from keras_bnn.runs import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Each command line, and what its one error line must name.
BAD = [
    (["train", "--dataset", "iris"], "`dataset` must be one of 'synthetic', 'digits', "
                                     "'breast_cancer', 'wine', 'diabetes', 'npy', 'fashion_mnist', "
                                     "'mnist', 'cifar10', 'imdb'; got 'iris'."),
    (["train", "--epochs", "-1"], "`epochs` must be an int >= 1"),
    (["train", "--sampler", "adam"], "`sampler` must be one of"),
    (["train", "--model", "cnn_lstm"], "`dataset` must be one of 'imdb' for model='cnn_lstm'"),
    (["train", "--dataset", "digits", "--model", "resnet_pp"],
     "for model='resnet_pp' (it convolves images); got 'digits'"),
    (["train", "--chains", "0"], "`--chains` must be an int >= 1"),
    (["train", "--processes", "0"], "`--processes` must be an int >= 1"),
    (["train", "--resume", "--output-dir", "{tmp}/none"], "holds no run"),
    (["train", "--config", "{tmp}/bad.json"], "is not valid JSON"),
    (["evaluate", "--run-dir", "{tmp}/none"], "--run-dir '{tmp}/none' holds no run"),
    (["export", "--run-dir", "{tmp}/none", "--export-dir", "{tmp}/e"], "holds no run"),
    (["sweep", "--param", "depth", "--values", "1"], "`--param` must be one of"),
    (["sweep", "--param", "temperature", "--values", "1,-2"], "`--values` must be positive"),
    (["sweep", "--param", "temperature", "--values", "1", "--x", "{tmp}/x.npz", "--y",
      "{tmp}/y50.npy"], "--x must be a .npy file holding one array"),
    (["sweep", "--param", "temperature", "--values", "1", "--x", "{tmp}/x60.npy", "--y",
      "{tmp}/y50.npy"], "got 60 rows in `--x` and 50 in `--y`"),
    (["sweep", "--param", "temperature", "--values", "1", "--x", "{tmp}/x60.npy", "--y",
      "{tmp}/y70.npy"], "got 60 rows in `--x` and 70 in `--y`"),
    (["sweep-temperature", "--temperatures", "0"], "`--temperatures` must be positive"),
    (["sweep", "--param", "temperature", "--values", "0.4,0.40000001"],
     "`--values` must be distinct to 6 significant digits"),
    (["sweep", "--param", "temperature", "--values", "1", "--seeds", "0,1,0"],
     "`--seeds` must be distinct seeds (each seed's run goes to `seed=<seed>`); got [0, 1, 0]"),
    # Found by trying the CLI as a user (these named no flag, or an internal name):
    (["train", "--step-size", "abc"], "argument --step-size: must be a number > 0 or 'auto'"),
    (["train", "--burn-in-epochs", "nan"], "argument --burn-in-epochs: must be an int >= 0"),
    (["train", "--config", "{tmp}/none.json"], "--config '{tmp}/none.json' cannot be read"),
    (["train", "--output-dir", "{tmp}/bad.json"], "`output_dir` must be a directory"),
    (["sweep", "--param", "temperature", "--values", "1", "--x", "{tmp}/x60.npy", "--y",
      "{tmp}/none.npy"], "--y '{tmp}/none.npy' cannot be read"),
    (["sweep", "--param", "temperature", "--values", "1", "--x", "{tmp}/x60.npy", "--y",
      "{tmp}/y60x1x1.npy"], "`--y` must be 1-D: one label or target per example"),
    (["sweep", "--param", "temperature", "--values", "1", "--x", "{tmp}/x60.npy", "--y",
      "{tmp}/y60x1x1.npy", "--dataset", "digits"], "--dataset and --x/--y name two datasets"),
    (["sweep", "--param", "prior_scale", "--values", "1", "--prior", "he_normal",
      "--prior-scale", "2"], "--prior-scale is set by the sweep"),
    (["sweep", "--param", "temperature", "--values", "1", "--seed", "3"],
     "--seed is set by the sweep"),
    (["sweep-temperature", "--temperatures", "1", "--temperature", "0.5"],
     "--temperature is set by the sweep"),
    (["sweep-temperature", "--temperatures", "1", "--sampler", "sgd"],
     "sweep-temperature needs a sampler: --sampler sgd has no temperature"),
    (["train", "--config", "{tmp}/sampler_args.json"],
     "`sampler_args` must hold only keys of sampler='atmc': mass, momentum, name, noise, "
     "noise_estimate_decay, speed_limit, target_noise_ratio, thermostat_mass, warmup_steps; "
     "got unknown ['frction']."),
    (["train", "--dataset", "arrays"], "--dataset must be one of synthetic, digits"),
    (["train", "--processes", "2"], "--processes runs chains at once: it needs --chains K"),
    (["train", "--dataset", "digits", "--num-train", "100"],
     "--num-train sizes the synthetic task; dataset 'digits' has its own split: drop it"),
    (["train", "--config", "{tmp}/model_args.json"],
     "`model_args` must hold only keys of model='mlp': activation, bias_prior, hidden, "
     "kernel_prior, name; got unknown ['width']."),
]
_PROBE = """
import json, sys, time
from keras_bnn import cli
results = []
for argv in json.loads(sys.argv[1]):
    start = time.perf_counter()
    code = cli.main(argv)
    results.append([code, time.perf_counter() - start,
                    sorted(m for m in ("keras", "tensorflow", "jax") if m in sys.modules)])
print(json.dumps(results))
"""


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "x.npz", x=rng.normal(size=(60, 3)))
    np.save(tmp_path / "x60.npy", rng.normal(size=(60, 3)))
    np.save(tmp_path / "y50.npy", np.zeros(50, dtype=int))
    np.save(tmp_path / "y70.npy", np.zeros(70, dtype=int))
    np.save(tmp_path / "y60x1x1.npy", np.zeros((60, 1, 1), dtype=int))
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "sampler_args.json").write_text(
        '{"sampler": "atmc", "sampler_args": {"frction": 1}}')
    (tmp_path / "model_args.json").write_text('{"model_args": {"width": 3}}')
    return str(tmp_path)


def test_every_argument_error_answers_before_keras_is_imported(files):
    argvs = [[a.format(tmp=files) for a in argv] for argv, _ in BAD]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)],
                          capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    errors = done.stderr.strip().splitlines()
    assert len(errors) == len(BAD)
    for (code, seconds, modules), line, (_, says) in zip(json.loads(done.stdout), errors, BAD):
        assert code == 2 and modules == [], (line, modules)
        assert line.startswith("keras-bnn: error: ") and says.format(tmp=files) in line, line
        assert seconds < 5, line  # < 1 s on an idle machine
    assert elapsed < 30  # the whole process, 33 errors, on a loaded machine


def test_one_error_in_a_fresh_process_is_quick():
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "keras_bnn.cli", "train", "--dataset", "iris"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "`dataset` must be one of" in done.stderr
    assert time.perf_counter() - start < 5  # 0.2-0.5 s here; TensorFlow alone takes 10+ s


def test_train_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("--sampler SAMPLER atmc, sghmc", "(default: atmc)",
                  "(default: enough for 4000 steps, at least 30)",
                  "(default: auto: collect from the first epoch at equilibrium)",
                  "(default: 100)", "(default: runs/default)",
                  "(default: auto: he_normal(1) or student_t(0.4), chosen on a validation "
                  "split of the training set)",
                  "in the run dir (default: 1)", "(default: auto: a warm-up chooses it",
                  "Keras progress verbosity (default: 2)"):
        assert shown in text, shown


@pytest.mark.parametrize("config, says", [
    ({"model_args": {"hidden": None}}, "mlp: `hidden` must be a list of layer widths, "
                                       "e.g. [100, 100]; got None"),
    ({"model_args": {"hidden": [8, "wide"]}}, "mlp: `hidden[1]` must be an int >= 1"),
])
def test_bad_model_args_are_named(tmp_path, capsys, config, says):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(config, output_dir=str(tmp_path / "run"), epochs=2,
                                    burn_in_epochs=1, num_train=50, num_test=10)))
    assert cli.main(["train", "--config", str(path), "--verbose", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("keras-bnn: error: ") and says in err and "\n" not in err


def test_sweep_refuses_arrays_of_different_lengths_before_training(tmp_path):
    x = np.zeros((60, 3), "float32")
    config = runs.RunConfig(output_dir=str(tmp_path / "sweep"), epochs=2, burn_in_epochs=1)
    for y in (np.zeros(50, int), np.zeros(70, int)):
        with pytest.raises(ValueError, match=f"got 60 rows in `x` and {len(y)} in `y`"):
            runs.sweep("temperature", [1.0], x=x, y=y, config=config)
    assert not os.path.exists(tmp_path / "sweep")


def test_the_light_name_tables_match_the_registries():
    assert runs.DATASETS == data_lib.DATASETS
    assert runs.SAMPLERS == {name: m.collects for name, m in samplers.REGISTRY.items()}
    assert runs.PRIORS == tuple(runs.KERNEL_PRIORS)
    prior_help = dict((flag, text) for flag, _, _, text in cli_parser.CONFIG_FLAGS)["--prior"]
    assert all(name in prior_help for name in runs.PRIORS)  # he_student_t was left out
    assert runs.LIKELIHOODS == likelihoods.LIKELIHOODS


def _named_parameters(callables, leave_out):
    """The named (not ``*args``/``**kwargs``) parameters of ``callables``, less ``leave_out``."""
    names = set()
    for function in callables:
        names |= {name for name, p in inspect.signature(function).parameters.items()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return names - {"self", *leave_out}


@pytest.mark.parametrize("name", runs.SAMPLERS)
def test_the_sampler_args_table_is_the_constructors_parameters(name):
    """What a run sets itself (step, seed, temperature, n) is not a sampler_args key;
    a sampler's keys are those of its keras_bnn classes (the rest of its
    ``**kwargs`` go to Keras' Optimizer), the baseline's those of Keras' SGD."""
    cls = samplers.REGISTRY[name].optimizer
    own = [c.__init__ for c in cls.__mro__ if c.__module__.startswith("keras_bnn")]
    expected = _named_parameters(own or [cls.__init__], (
        "step_size", "learning_rate", "seed", "temperature", "train_size"))
    assert set(config_lib.SAMPLER_ARGS[name]) == expected


@pytest.mark.parametrize("name", runs.MODELS)
def test_the_model_args_table_is_the_builders_parameters(name):
    expected = _named_parameters([getattr(models, name)],
                                 ("input_shape", "num_classes", "vocab_size"))
    assert set(config_lib.MODEL_ARGS[name]) == expected


@pytest.mark.parametrize("dataset, info", [("fashion_mnist", {"task": "classification"}),
                                           ("breast_cancer", {"task": "binary"})])
def test_a_gaussian_likelihood_on_classes_is_refused(dataset, info):
    """`--likelihood gaussian` on Fashion-MNIST regressed the class numbers silently."""
    config = runs.RunConfig(dataset=dataset, likelihood="gaussian").validate()
    with pytest.raises(ValueError, match=f"`likelihood` must be .* for dataset '{dataset}', a "
                                         f"{info['task']} task"):
        runs.build.likelihood_of(config, info)
    assert runs.build.likelihood_of(runs.RunConfig(dataset="diabetes", likelihood="gaussian"),
                                    {"task": "regression"}) == "gaussian"


def test_a_baseline_without_samples_is_named_by_its_flag(tmp_path, monkeypatch, capsys):
    """The baseline's refusal said "`run_dir` '…' holds no samples", the run's own flag."""
    for name in ("run", "base"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"sampler": "sgd"}))

    def evaluate(run_dir, **kwargs):
        raise FileNotFoundError(f"`run_dir` {run_dir!r} holds no samples")
    monkeypatch.setattr(cli, "_runs", lambda: types.SimpleNamespace(evaluate=evaluate))
    code = cli.main(["evaluate", "--run-dir", str(tmp_path / "run"),
                     "--baseline-run-dir", str(tmp_path / "base")])
    assert code == 2 and capsys.readouterr().err.startswith(
        f"keras-bnn: error: --baseline-run-dir: `run_dir` '{tmp_path / 'base'}' holds no samples")


def test_a_broken_tensorflow_is_named_in_one_line(tmp_path):
    """An ImportError raised inside TensorFlow (a broken install) has no
    ``name``: it went through as a 31-line traceback."""
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(
        "raise ImportError('libtensorflow_framework.so.2: cannot open shared object file')\n")
    done = subprocess.run([sys.executable, "-m", "keras_bnn.cli", "train", "--dataset", "digits",
                           "--epochs", "2", "--output-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, KERAS_BACKEND="jax",
                                   PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT])))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("keras-bnn: error: tensorflow is installed but failed to "
                                  "import (libtensorflow_framework.so.2: cannot open shared")


@pytest.mark.parametrize("command, resume", [("train", True), ("evaluate", False)])
def test_ctrl_c_is_one_line_that_says_how_to_continue(monkeypatch, capsys, command, resume):
    """Ctrl-C in `keras-bnn train` printed a 40-line KeyboardInterrupt traceback."""
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, f"_cmd_{command}", interrupted)
    argv = [command] if command == "train" else [command, "--run-dir", "r"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert err.startswith("keras-bnn: interrupted.") and err.count("\n") == 1
    assert ("--resume" in err) is resume


def test_a_command_without_tensorflow_says_what_to_install(tmp_path):
    # KERAS_BACKEND=jax where TensorFlow is not installed (a JAX-only GPU
    # machine): a run's data are tf.data pipelines, so `train` needs it. One
    # error line that names it and the TensorFlow-free route, no traceback.
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tensorflow'\", name='tensorflow')\n")
    env = dict(os.environ, KERAS_BACKEND="jax",
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    done = subprocess.run([sys.executable, "-m", "keras_bnn.cli", "train", "--dataset", "digits",
                           "--epochs", "2", "--output-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("keras-bnn: error: this command needs tensorflow, which is "
                                  "not installed")
    assert "examples/fashion_mnist_fit.py" in done.stderr
