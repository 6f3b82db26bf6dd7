"""The ``keras-bnn`` command's rough edges: its counts, a sweep passed as a
run, and an unsampled chain's advice (run directories built by hand, as in
tests/test_cli_user34.py, or one short run)."""

import dataclasses

import pytest

import keras_bnn as kb
from keras_bnn import cli, runs


def _write_run(path, **fields):
    """A run directory holding only its ``config.json``."""
    config = runs.RunConfig(output_dir=str(path), **fields).validate()
    run = runs.RunDir(path)
    run.write_json(run.config, dataclasses.asdict(config))
    return run


def test_one_sample_taken_in_the_warm_up_is_one_sample(tmp_path, capsys):
    """`train --burn-in-epochs 1 --epochs 2` on 4 steps an epoch takes 1
    sample, at step 8 of the 1000-step warm-up; until 2026-11-30 the report
    said "fixed burn-in of 1 epochs; 1 samples taken during the warm-up"."""
    with pytest.warns(kb.WarmupSampleWarning):
        code = cli.main(["train", "--num-train", "200", "--num-test", "40", "--batch-size", "50",
                         "--epochs", "2", "--burn-in-epochs", "1", "--verbose", "0",
                         "--output-dir", str(tmp_path / "run")])
    assert code == 0
    line = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("step size"))
    assert line.endswith("collection from epoch 1: fixed burn-in of 1 epoch; 1 sample taken "
                         "during the warm-up (steps up to 1000)")
    assert len(runs.RunDir(tmp_path / "run").store()) == 1


def test_evaluate_on_a_sweep_names_its_runs(tmp_path, capsys):
    """`evaluate --run-dir <a sweep's root>` said "holds no run (no
    config.json)" until 2026-11-30, as of an empty directory."""
    root = runs.RunDir(tmp_path / "sweep")
    made = [_write_run(root.sweep_run("temperature", value, 0).path, temperature=value)
            for value in (0.1, 1.0)]
    (tmp_path / "sweep" / "temperature=3" / "seed=0").mkdir(parents=True)  # not started
    assert cli.main(["evaluate", "--run-dir", root.path]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"keras-bnn: error: --run-dir {root.path!r} is a sweep's directory, not a "
                   f"run: pass one of its 2 runs: {made[0].path}, {made[1].path}.")
    assert cli.main(["evaluate", "--run-dir", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.strip().endswith("holds no run (no config.json).")


def test_an_unsampled_chain_names_the_flags_of_train(tmp_path, capsys):
    """Chain 1 of `train --chains 2` ended without reaching equilibrium:
    evaluate's error advised `CollectSamples(start_epoch='auto')`, the Python
    API's, until 2026-11-30; it names the chain and train's flags."""
    root = _write_run(tmp_path / "run", epochs=3)
    model = kb.models.mlp((4,), 2, hidden=[3])
    kb.SampleStore(root.chain(0).samples).append(model, step=0)
    chain = root.chain(1)
    chain.store()  # empty
    chain.write_json(chain.collection, {"epochs": 3, "reason": "still trending"})
    chain.write_json(chain.kinetic_temperatures, [])  # the run is complete
    assert cli.main(["evaluate", "--run-dir", root.path]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"keras-bnn: error: the chain {chain.path!r} of `run_dir` {root.path!r} "
                   "holds no samples: its chain did not reach equilibrium in its 3 epochs "
                   "(still trending); train a run with more --epochs or --max-epochs, or "
                   "collect from a given epoch with --burn-in-epochs.")
