"""Refusals that left files behind, a killed comparison that could not be
rerun, and a RunConfig the command line refuses but the Python API took
(found 2026-11-30)."""

import importlib.util
import json
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


def test_a_run_of_chain_processes_that_a_chain_refused_leaves_nothing(tmp_path, monkeypatch):
    """A refusal inside the chain processes (here the children's Keras backend,
    which does not exist) left the run's config.json and each chain's behind, before:
    ['.lock', 'chain-0', 'chain-1', 'config.json'] in the run directory. Now a refused
    run of chain processes leaves nothing, as a refused run in one process does."""
    monkeypatch.setenv("KERAS_BACKEND", "no-such-backend")  # the chain processes' only
    run_dir = tmp_path / "out" / "run"
    config = runs.RunConfig(dataset="wine", sampler="sgd", epochs=2, prior="he_normal",
                            output_dir=str(run_dir))
    with pytest.raises(ChildProcessError, match="2 chains failed; chain 0 .* said: .*"
                                                "Unable to import backend"):
        runs.run_chains(config, 2, verbose=0, processes=2)
    assert not (tmp_path / "out").exists(), sorted(os.listdir(run_dir))
    run_dir.mkdir(parents=True)  # a directory that was there stays, empty
    with pytest.raises(ChildProcessError):
        runs.run_chains(config, 2, verbose=0, processes=2)
    assert os.listdir(run_dir) == []


def test_a_killed_compare_resumes_when_run_again_into_the_same_out(tmp_path, monkeypatch):
    """Before: the rerun of a killed ``compare`` refused at its first row,
    SystemExit "... already holds this row's runs ...; use another --out, or
    remove it". Now the finished row is skipped (its result kept, not trained
    again), the row the kill cut short is trained again from the start, and
    a results line the kill cut in half is dropped."""
    import keras_bnn as kb
    from fashion_mnist_files import write_set
    from keras_bnn import fashion_mnist as fm

    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    write_set(tmp_path / "fmnist", num_train=40, num_test=20)
    example = _load("examples/fashion_mnist.py")
    out = tmp_path / "out"
    argv = ["compare", "--out", str(out), "--data-dir", str(tmp_path / "fmnist"), "--k", "2",
            "--rows", "sgd", "sgd x K", "--sgd-epochs", "1", "--batch-size", "20",
            "--seeds", "0", "--prior", "student_t"]
    trained, train = [], kb.runs.train

    def killed_at_the_third_chain(config, **kwargs):
        trained.append(config.output_dir)
        if len(trained) == 3:  # "sgd x 2", chain 1: its chain 0 is done
            raise KeyboardInterrupt
        return train(config, **kwargs)

    monkeypatch.setattr(kb.runs, "train", killed_at_the_third_chain)
    with pytest.raises(KeyboardInterrupt):
        example.main(argv)
    results = out / "results.jsonl"
    first = results.read_text()
    assert first.count("\n") == 1 and '"row": "sgd"' in first
    with open(results, "a") as handle:
        handle.write('{"model": "mlp", "row": "sgd x 2", "samp')  # a write cut short
    monkeypatch.setattr(kb.runs, "train", lambda config, **kwargs: (
        trained.append(config.output_dir), train(config, **kwargs))[1])
    example.main(argv)
    assert [os.path.basename(os.path.dirname(p)) for p in trained[3:]] == [
        os.path.basename(os.path.dirname(trained[1]))] * 2  # only "sgd x 2" trained again
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert results.read_text().startswith(first)
    assert [(r["row"], r["num_samples"]) for r in rows] == [("sgd", 1), ("sgd x 2", 2)]
    assert {r["run"] for r in rows} == set(os.listdir(out / "runs"))
    example.main(argv)  # all done: nothing trained, nothing added
    assert len(trained) == 5 and len(results.read_text().splitlines()) == 2


def _load(relative):
    """The script at ``ROOT / relative`` as a module (its ``main`` not run)."""
    spec = importlib.util.spec_from_file_location(Path(relative).stem, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
