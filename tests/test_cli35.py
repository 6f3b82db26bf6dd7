"""The ``keras-bnn`` command line as a demanding user drives it: flags that
would be ignored are refused, and what it prints reads right."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from keras_bnn import cli, console, diagnostics, runs


def _refused(argv, capsys):
    """The error line of a command that must fail with exit code 2."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    return err


@pytest.mark.parametrize("flags, named", [
    (["--burn-in-epochs", "1"], "--burn-in-epochs"),
    (["--burn-in-epochs", "auto"], "--burn-in-epochs"),
    (["--collect-every", "2"], "--collect-every"),
    (["--config", "{config}"], "`collect_every` in --config"),
])
def test_collection_flags_with_sgd_are_refused_not_ignored(flags, named, tmp_path, capsys):
    """Until 2026-11-30 `train --sampler sgd --burn-in-epochs 1` (or
    --collect-every 2) trained and kept the final weights as it does without
    them: the flags were ignored without a word."""
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"collect_every": 2}))
    flags = [flag.format(config=config) for flag in flags]
    for command in (["train"], ["train", "--chains", "2"]):
        err = _refused([*command, "--sampler", "sgd", "--dataset", "wine", "--epochs", "4",
                        *flags, "--output-dir", str(tmp_path / "run")], capsys)
        assert err.startswith(f"keras-bnn: error: {named} sets when a sampler collects "
                              "samples; --sampler sgd collects none"), err
        assert "a deep ensemble is --sampler sgd --chains K" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("num_chains, draws, words", [
    (1, 8, "across 1 chain x 8 draws "), (2, 40, "across 2 chains x 40 draws ")])
def test_rhat_header_counts_chains_and_draws_with_the_right_noun(
        num_chains, draws, words, capsys):
    """It said "across 1 chain(s) x 51 draws"."""
    rng = np.random.default_rng(0)
    summary = diagnostics.convergence_summary(rng.standard_normal((num_chains, draws, 3)))
    console.print_rhat({"num_chains": num_chains, "likelihood": "categorical",
                        "rhat": {"function": summary, "weight": summary}})
    out = capsys.readouterr().out
    assert f"rank-normalised split R-hat and ESS {words}(Vehtari et al. 2021):" in out
    assert "(s)" not in out


SMALL = ["--num-train", "200", "--num-test", "60", "--batch-size", "50", "--epochs", "4",
         "--burn-in-epochs", "1", "--prior", "he_normal", "--verbose", "0"]


def _weights(run_dir):
    return [np.concatenate([w.ravel() for w in sample.weights]) for sample in
            runs.RunDir(run_dir).store()]


@pytest.mark.slow  # 3 chains of 4 epochs, then 2 again: ~50 s on 2 cores
@pytest.mark.parametrize("processes", [1, 2])
def test_a_killed_run_of_chains_continues_with_the_same_command_and_resume(processes, tmp_path,
                                                                           capsys):
    """Ctrl-C during `train --chains K` says "continue the run with the same
    command and --resume"; until 2026-11-30 that command was refused
    ("--resume continues one chain"), and a chain that had not started could
    not be trained at all (`train --output-dir run/chain-1` trains chain 0's
    seed again). Now the complete chains are kept, the killed one continues
    and the missing one trains, to the samples of the uninterrupted run."""
    run_dir = str(tmp_path / "run")
    argv = ["train", *SMALL, "--sampler", "sghmc", "--chains", "3", "--processes",
            str(processes), "--output-dir", run_dir]
    assert cli.main(argv) == 0, capsys.readouterr().err
    whole = {k: _weights(os.path.join(run_dir, f"chain-{k}")) for k in range(3)}
    kept = os.path.getmtime(os.path.join(run_dir, "chain-0", "history.json"))
    # Chain 1 killed before its last file (tests/test_resume.py kills runs at
    # each point of a run); chain 2 never started.
    os.remove(runs.RunDir(os.path.join(run_dir, "chain-1")).kinetic_temperatures)
    shutil.rmtree(os.path.join(run_dir, "chain-2"))
    capsys.readouterr()
    assert cli.main([*argv, "--resume"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert os.path.getmtime(os.path.join(run_dir, "chain-0", "history.json")) == kept
    for k in range(3):
        resumed = _weights(os.path.join(run_dir, f"chain-{k}"))
        assert len(resumed) == len(whole[k]) == 3, (k, len(resumed))
        for a, b in zip(resumed, whole[k]):
            np.testing.assert_array_equal(a, b)
    assert out.count("\n") >= 5  # the table of 3 chains
    assert not np.array_equal(whole[0][-1], whole[2][-1])  # chain 2's own seed
    code = cli.main([*argv, "--resume"])
    assert code == 2 and "is complete (3 chains); nothing to resume" in capsys.readouterr().err


def test_resume_of_chains_refuses_a_run_of_another_number_of_chains(tmp_path, capsys):
    """`train --chains K --resume` continues a run of K chains: a run of one
    chain, or of more chains than K, is refused before Keras is imported."""
    config = json.dumps(dataclasses.asdict(runs.RunConfig().validate()))
    single, three = tmp_path / "single", tmp_path / "three"
    for run_dir, subdirs in ((single, ["samples"]), (three, ["chain-0", "chain-1", "chain-2"])):
        for sub in subdirs:
            os.makedirs(run_dir / sub)
        (run_dir / "config.json").write_text(config)
    for run_dir, words in ((single, "holds a run of one chain, not of --chains 2: drop --chains"),
                           (three, "holds a run of 3 chains: pass --chains 3")):
        err = _refused(["train", "--chains", "2", "--resume", "--output-dir", str(run_dir)],
                       capsys)
        assert err == f"keras-bnn: error: --resume: {str(run_dir)!r} {words}.\n"


def test_demo_help_shows_demo_s_own_defaults(capsys):
    """`keras-bnn demo --help` said "--dataset ... (default: synthetic)", train's
    default, while demo trains on digits; a default of 0 (--seed) and those
    without a help text (--output-dir, --export-dir) were not shown."""
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for shown in ("a bundled or synthetic dataset (default: digits)", "(default: runs/demo)",
                  "(default: saved_models/demo)", "seed of both runs (default: 0)"):
        assert shown in out, shown
    assert "synthetic)" not in out.replace("synthetic dataset", "")


def test_a_table_shows_a_small_step_size_not_zero():
    """The train table printed a step size of 2.56e-06 (wine, in the warm-up)
    as 0.0000."""
    table = console.format_table([{"step_size": 2.56e-06, "nll": 0.5, "ratio": 0.0}],
                                 ["step_size", "nll", "ratio"])
    assert table.splitlines()[-1].split() == ["2.560e-06", "0.5000", "0.0000"]


def test_an_output_dir_inside_a_file_is_refused_before_keras(tmp_path, capsys):
    """`train --output-dir afile/run` imported Keras and built the run (24 s on
    2 cores) before it failed with "[Errno 20] Not a directory: 'afile/run'",
    which named no flag; `--output-dir afile` itself was refused at once."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    for output_dir in (blocker / "run", blocker / "a" / "run"):
        err = _refused(["train", "--dataset", "wine", "--epochs", "3", "--output-dir",
                        str(output_dir)], capsys)
        assert err == ("keras-bnn: error: RunConfig: `output_dir` must be a directory (or a path "
                       f"to create one); got a path inside the file {str(blocker)!r}.\n")


@pytest.mark.parametrize("argv, error", [
    # Said "`data_dir` must name the directory ... (--data-dir)": demo has no --data-dir.
    (["demo", "--dataset", "npy"], "--dataset must be one of synthetic, digits, breast_cancer, "
                                   "wine, diabetes for demo"),
    # Said "`validation_split` must lie in (0, 1) or be None": the flag takes 0.
    (["sweep", "--param", "temperature", "--values", "1", "--validation-split", "1"],
     "--validation-split must lie in [0, 1) (0: score on the test split); got 1.0"),
])
def test_demo_and_sweep_name_their_own_flags(argv, error, capsys):
    assert _refused(argv, capsys).startswith(f"keras-bnn: error: {error}")


def test_verbose_takes_only_keras_levels(tmp_path, capsys):
    """Until 2026-11-30 `--verbose 5` was taken and passed to Keras."""
    err = _refused(["train", "--verbose", "5", "--dataset", "wine", "--epochs", "2",
                    "--output-dir", str(tmp_path / "run")], capsys)
    assert "--verbose" in err and "(choose from 0, 1, 2)" in err, err


@pytest.mark.parametrize("failing, said", [(1, "1 chain failed"), (2, "2 chains failed")])
def test_failed_chain_processes_are_counted_with_the_right_noun(
        failing, said, tmp_path, monkeypatch):
    """The error of failed chain processes counts them: until 2026-11-30 "1 chain
    process(es) failed"."""
    from keras_bnn.runs import training

    class Failing:
        """A chain process that failed (the first ``failing`` of them)."""
        started = 0

        def __init__(self, *args, **kwargs):
            Failing.started += 1
            self.returncode = int(Failing.started <= failing)

        def communicate(self):
            return "", "Traceback ...\nValueError: boom"

    monkeypatch.setattr(training.subprocess, "Popen", Failing)
    chains = [dataclasses.replace(runs.RunConfig(dataset="wine"), chain=k,
                                  output_dir=str(tmp_path / f"chain-{k}")) for k in range(2)]
    with pytest.raises(ChildProcessError) as raised:
        training._train_in_processes(chains)
    assert str(raised.value).startswith(f"{said}; chain 0 ("), raised.value
    assert str(raised.value).endswith("said: Traceback ...\nValueError: boom")


@pytest.mark.parametrize("sampler", ["hmc", "sgd"])
def test_an_auto_step_is_refused_where_no_warm_up_chooses_it(sampler, capsys):
    """`--step-size auto` with hmc or sgd: until 2026-11-30 the run loaded its data and
    then failed building the optimizer (HMC: its own error; SGD: Keras')."""
    err = _refused(["train", "--sampler", sampler, "--step-size", "auto", "--dataset", "wine"],
                   capsys)
    assert err.startswith(f"keras-bnn: error: RunConfig: `step_size` must be a number > 0 for "
                          f"sampler '{sampler}'"), err
    with pytest.raises(ValueError, match="`step_size` must be a number > 0"):
        runs.RunConfig(sampler=sampler, step_size="auto").validate()
