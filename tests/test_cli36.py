"""The ``keras-bnn`` command line as a demanding user drives it: a flag the
dataset would ignore is refused, and a refused command leaves nothing behind."""

import json
import os

import numpy as np
import pytest

from keras_bnn import cli

READ_BY = "is read by datasets npy, fashion_mnist, mnist, cifar10, imdb; "


def _refused(argv, capsys):
    """The error line of a command that must fail with exit code 2."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    return err


def _tree(root):
    """Every path under ``root``, relative to it."""
    return sorted(os.path.relpath(os.path.join(path, name), root)
                  for path, dirs, files in os.walk(root) for name in dirs + files)


@pytest.mark.parametrize("dataset", ["wine", "digits", "breast_cancer", "diabetes",
                                     "synthetic"])
@pytest.mark.parametrize("command", [["train"], ["train", "--chains", "2"],
                                     ["sweep-temperature"],
                                     ["sweep", "--param", "temperature", "--values", "1"]])
def test_data_dir_with_a_dataset_that_reads_no_files_is_refused(
        dataset, command, tmp_path, monkeypatch, capsys):
    """Until 2026-11-30 `train --dataset wine --data-dir mydata` trained on
    the bundled wine data without a word: --data-dir was ignored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mydata").mkdir()
    err = _refused([*command, "--dataset", dataset, "--data-dir", "mydata", "--epochs", "2"],
                   capsys)
    assert err == (f"keras-bnn: error: --data-dir {READ_BY}dataset {dataset!r} reads no files "
                   "from it, and would ignore it: drop it\n")
    assert _tree(tmp_path) == ["mydata"]


def test_data_dir_in_the_config_file_or_with_sweep_arrays_is_refused(tmp_path, capsys):
    """`data_dir` in --config was ignored for a bundled dataset, and
    --data-dir (or --num-train) for `sweep --x --y`, which reads its arrays."""
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"dataset": "digits", "data_dir": str(tmp_path)}))
    err = _refused(["train", "--config", str(config), "--output-dir", str(tmp_path / "r")],
                   capsys)
    assert err.startswith(f"keras-bnn: error: `data_dir` in --config {READ_BY}dataset "
                          "'digits' reads no files"), err
    np.save(tmp_path / "x.npy", np.zeros((20, 3), "float32"))
    np.save(tmp_path / "y.npy", np.zeros(20, "int64"))
    sweep = ["sweep", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
             "--param", "temperature", "--values", "1", "--output-dir", str(tmp_path / "s")]
    err = _refused([*sweep, "--data-dir", str(tmp_path)], capsys)
    assert err.startswith(f"keras-bnn: error: --data-dir {READ_BY}the --x/--y arrays reads no "
                          "files from it"), err
    err = _refused([*sweep, "--num-train", "10"], capsys)
    assert err.startswith("keras-bnn: error: --num-train sizes the synthetic task; the --x/--y "
                          "arrays has its own split: drop it"), err
    assert sorted(os.listdir(tmp_path)) == ["run.json", "x.npy", "y.npy"]


# Refusals found only once Keras is imported: by the model's build, the data's load.
LATE_REFUSALS = [
    (["--dataset", "wine", "--likelihood", "gaussian"], "`likelihood` must be 'categorical'"),
    (["--dataset", "npy", "--data-dir", "no-such-dir"], "dataset 'npy': "),
    (["--dataset", "fashion_mnist", "--data-dir", "no-such-dir"], "Fashion-MNIST: `data_dir`"),
]


@pytest.mark.parametrize("flags, reason", LATE_REFUSALS)
@pytest.mark.parametrize("chains", ["1", "2"])
def test_a_refused_train_creates_nothing(flags, reason, chains, tmp_path, monkeypatch, capsys):
    """Until 2026-11-30 these refusals left runs/default/.lock and
    runs/default/samples/ (fashion_mnist: prior_selection.json too) in the
    working directory; --output-dir a/b made a/ and a/b/."""
    monkeypatch.chdir(tmp_path)
    for where in ([], ["--output-dir", "a/b"]):
        err = _refused(["train", *flags, "--epochs", "2", "--chains", chains, "--verbose", "0",
                        *where], capsys)
        assert reason in err
        assert _tree(tmp_path) == []


def test_a_refused_train_leaves_an_existing_directory_as_it_was(tmp_path, capsys):
    """An empty --output-dir stays empty, and a sample store given as
    --output-dir ("is a sample store ... not a run directory") gets no .lock."""
    empty, store = tmp_path / "empty", tmp_path / "store"
    empty.mkdir()
    store.mkdir()
    (store / "store.json").write_text("{}")
    err = _refused(["train", *LATE_REFUSALS[0][0], "--epochs", "2", "--output-dir", str(empty)],
                   capsys)
    assert LATE_REFUSALS[0][1] in err
    err = _refused(["train", "--dataset", "wine", "--epochs", "2", "--output-dir", str(store)],
                   capsys)
    assert "is a sample store" in err
    assert _tree(tmp_path) == ["empty", "store", "store/store.json"]


def _unfinished_run(path):
    """A run directory with its config and 2 samples of its model, not
    finished (no kinetic_temperatures.json): as a live or killed run's."""
    import keras_bnn as kb
    from keras_bnn import runs

    config = runs.RunConfig(output_dir=str(path), epochs=3, burn_in_epochs=1, num_train=100,
                            num_test=50, batch_size=50, prior="he_normal").validate()
    run = runs.RunDir(path)
    run.write_json(run.config, vars(config))
    model = runs.build_model(config, runs.load_data(config)[2])
    for step in (1, 2):
        kb.SampleStore(run.samples).append(model, step=step)
    return run


def test_evaluate_says_when_a_run_has_not_finished_or_is_a_sweeps(tmp_path, capsys):
    """`evaluate` of a run still training (or killed) scored its samples so far,
    and a sweep's run its validation split, without a word: the table read as
    a finished run's test metrics."""
    run = _unfinished_run(tmp_path / "run")
    assert cli.main(["evaluate", "--run-dir", run.path]) == 0
    out = capsys.readouterr().out
    assert (f"not finished (still training, or stopped: keras-bnn train --resume continues "
            f"it): {run.path}; scored on the 2 samples held now\n") in out
    assert "validation split" not in out
    run.write_json(run.kinetic_temperatures, [])  # written last: the run finished
    run.write_json(run.validation_split, {"validation_split": 0.2, "data_seed": 0,
                                          "num_validation": 20})
    assert cli.main(["evaluate", "--run-dir", run.path]) == 0
    out = capsys.readouterr().out
    assert ("scored on the sweep's validation split (20 held-out training rows, its "
            "validation_split.json), not on the test split\n") in out
    assert "not finished" not in out


TINY = ["--num-train", "100", "--num-test", "50", "--batch-size", "50", "--epochs", "3",
        "--burn-in-epochs", "1", "--prior", "he_normal", "--verbose", "0"]


def test_a_run_and_a_sweep_do_not_share_a_directory(tmp_path, capsys):
    """`train --chains 2` into a run of one chain overwrote its config.json
    (another --seed: its samples were described by the new one) and trained
    chains beside its samples; `train` into a sweep's directory and `sweep`
    into a run's trained there, mixing the two (evaluate then took the
    sweep's directory for a run)."""
    run = _unfinished_run(tmp_path / "run")
    stored = open(run.config).read()
    names = sorted(os.listdir(run.path))
    err = _refused(["train", *TINY, "--seed", "5", "--chains", "2", "--output-dir", run.path],
                   capsys)
    assert err == (f"keras-bnn: error: `output_dir` {run.path!r} already holds a run (2 "
                   "samples); choose a new directory, or continue a killed run with "
                   "--resume.\n")
    assert open(run.config).read() == stored and sorted(os.listdir(run.path)) == names
    err = _refused(["sweep-temperature", *TINY, "--temperatures", "1", "--output-dir",
                    run.path], capsys)
    assert err == (f"keras-bnn: error: `output_dir` {run.path!r} holds a run (its "
                   "config.json), not a sweep: choose a new directory.\n")
    assert sorted(os.listdir(run.path)) == names
    sweep = tmp_path / "sweep"
    (sweep / "temperature=1" / "seed=0").mkdir(parents=True)
    (sweep / "sweep.csv").write_text("temperature,seed\n1,0\n")
    for chains in ("1", "2"):
        err = _refused(["train", *TINY, "--chains", chains, "--output-dir", str(sweep)], capsys)
        assert err == (f"keras-bnn: error: `output_dir` {str(sweep)!r} holds a sweep (its "
                       "<param>=<value>/seed=<seed> runs, sweep.csv): train into a new "
                       "directory.\n")
        assert _tree(sweep) == ["sweep.csv", "temperature=1", "temperature=1/seed=0"]


@pytest.mark.slow  # three processes import TensorFlow: ~60 s on 2 cores
def test_a_chain_process_refusal_is_its_one_line(tmp_path):
    """`keras-bnn train --chains 2 --processes 2` whose chains are refused
    ended with "chain 0 (...) said: WARNING: All log messages before
    absl::InitializeLog() ... I0000 ... port.cc:153] oneDNN custom operations
    are on ..." before the reason: the chain processes inherited the
    TF_CPP_MIN_LOG_LEVEL the command set to hide that log, read it as the
    user's and showed the log."""
    import subprocess
    import sys

    run_dir = str(tmp_path / "run")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-m", "keras_bnn.cli", "train", "--dataset", "wine", "--likelihood",
         "gaussian", "--prior", "he_normal", "--epochs", "2", "--chains", "2", "--processes",
         "2", "--verbose", "0", "--output-dir", run_dir],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"keras-bnn: error: 2 chains failed; chain 0 ({run_dir}/chain-0) said: keras-bnn: "
        "error: RunConfig: `likelihood` must be 'categorical'"), done.stderr
    assert "I0000" not in done.stderr and "absl" not in done.stderr
