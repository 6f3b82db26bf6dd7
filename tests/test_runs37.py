"""Refusals that left files behind, a killed comparison that could not be
rerun, and a RunConfig the command line refuses but the Python API took
(found 2026-11-30)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from keras_bnn import runs

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("argv, says", [
    (["--help"], "usage: step_ops.py"),
    (["--models", "bogus"], "argument --models: invalid choice: 'bogus'"),
])
def test_step_ops_parses_its_flags_before_it_makes_the_dump_folder(tmp_path, argv, says):
    """Before: the XLA dump folder was made at import, so `--help` (or a bad
    flag) left ``keras_bnn_step_ops_*`` in the temp dir: ['keras_bnn_step_ops_...']
    (and imported JAX and keras_bnn first)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "step_ops.py"), *argv],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TMPDIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode in (0, 2) and says in done.stdout + done.stderr, done.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("field, value", [("burn_in_epochs", 0), ("burn_in_epochs", 2),
                                          ("collect_every", 1)])
def test_the_api_refuses_collection_fields_for_the_sgd_baseline_as_the_cli_does(
        tmp_path, field, value):
    """Before: ``RunConfig(sampler="sgd", burn_in_epochs=2).validate()`` passed
    (DID NOT RAISE), and the run ignored it (MAP collects no sample), while
    ``keras-bnn train`` refused ``--burn-in-epochs`` with sgd."""
    config = runs.RunConfig(sampler="sgd", epochs=4, output_dir=str(tmp_path / "run"),
                            **{field: value})
    with pytest.raises(ValueError, match=f"^`{field}` sets when a sampler collects samples; "
                                         "sampler 'sgd' collects none .*: drop it$"):
        config.validate()
    assert runs.RunConfig(sampler="sgd", epochs=4).validate().burn_in_epochs == "auto"


def test_a_run_of_chain_processes_that_a_chain_refused_leaves_nothing(tmp_path):
    """A refusal inside the chain processes (here the child's command line
    refuses `num_train` for a dataset with its own split, which the Python API
    takes) left the run's config.json and each chain's behind, before:
    ['.lock', 'chain-0', 'chain-1', 'config.json'] in the run directory. Now a refused
    run of chain processes leaves nothing, as a refused run in one process does."""
    run_dir = tmp_path / "out" / "run"
    config = runs.RunConfig(dataset="wine", num_train=100, sampler="sgd", epochs=2,
                            prior="he_normal", output_dir=str(run_dir))
    with pytest.raises(ChildProcessError, match="2 chains failed; chain 0 .* said: .*"
                                                "`num_train` in --config sizes the synthetic"):
        runs.run_chains(config, 2, verbose=0, processes=2)
    assert not (tmp_path / "out").exists(), sorted(os.listdir(run_dir))
    run_dir.mkdir(parents=True)  # a directory that was there stays, empty
    with pytest.raises(ChildProcessError):
        runs.run_chains(config, 2, verbose=0, processes=2)
    assert os.listdir(run_dir) == []

