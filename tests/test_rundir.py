"""keras_bnn.runs.RunDir owns the run directory's layout; the sampler registry
holds every name a run accepts (issue 18)."""

import ast
import dataclasses
import os
from pathlib import Path

import keras
import pytest

import keras_bnn as kb
from keras_bnn import runs, samplers
from keras_bnn.runs import rundir as rundir_lib

PACKAGE = Path(kb.__file__).parent
LAYOUT = ("config", "samples", "backup", "history", "kinetic_temperatures", "gradient_noise",
          "directional_noise",
          "metrics", "reliability_plot", "samples_plot", "sweep_table", "sweep_plot",
          "prior_selection")


def test_layout_paths(tmp_path):
    run = runs.RunDir(tmp_path / "run")
    names = {attribute: os.path.relpath(getattr(run, attribute), run.path)
             for attribute in LAYOUT}
    assert names == {
        "config": "config.json", "samples": "samples", "backup": "backup",
        "history": "history.json", "kinetic_temperatures": "kinetic_temperatures.json",
        "gradient_noise": "gradient_noise.json", "directional_noise": "directional_noise.json",
        "metrics": "metrics.json",
        "reliability_plot": "reliability.png", "samples_plot": "metric_vs_samples.png",
        "sweep_table": "sweep.csv", "sweep_plot": "sweep.png",
        "prior_selection": "prior_selection.json"}
    assert run.prior_candidate("student_t", 0.4).path == os.path.join(
        run.path, "prior-selection", "student_t-0.4")
    assert run.chain(3).path == os.path.join(run.path, "chain-3")
    assert run.sweep_run("temperature", 0.1, 2).path == os.path.join(
        run.path, "temperature=0.1", "seed=2")
    assert run.chains() == [] and not run.complete
    for name in ("chain-10", "chain-2", "chain-x"):
        os.makedirs(os.path.join(run.path, name))
    Path(run.path, "chain-3").write_text("a file, not a chain")
    assert [chain.path for chain in run.chains()] == [run.chain(2).path, run.chain(10).path]
    run.write_json(run.kinetic_temperatures, [])
    assert run.complete and run.read_json(run.kinetic_temperatures) == []


def _string_constants(path):
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_only_rundir_spells_the_layout():
    run = runs.RunDir("")
    layout = {os.path.basename(getattr(run, attribute)) for attribute in LAYOUT}
    owner = Path(rundir_lib.__file__)
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == owner:
            continue
        for text in _string_constants(path):
            if text in layout or text.startswith("chain-"):
                offenders.append(f"{path.relative_to(PACKAGE)}: {text!r}")
    assert offenders == []
    assert "samples" in _string_constants(owner)  # the scan sees the owner's literals


def _store(path, model):
    store = kb.SampleStore(path)
    for step in range(2):
        store.append(model, chain=0, step=step)
    return store


def test_a_run_directory_is_resolved_once_on_the_way_to_an_ensemble(tmp_path, monkeypatch):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    top = runs.RunDir(tmp_path / "run")
    config = runs.RunConfig(output_dir=top.path).validate()
    top.write_json(top.config, dataclasses.asdict(config))
    for k in range(2):
        _store(top.chain(k).samples, model)
    listings = []
    real_chains = runs.RunDir.chains
    monkeypatch.setattr(runs.RunDir, "chains",
                        lambda self: listings.append(self.path) or real_chains(self))
    loaded, stores = runs.load_chains(top.path)
    assert loaded == config and isinstance(stores, runs.Chains) and len(stores) == 2
    assert runs.stores_of(stores) is stores  # checked stores pass through as they are
    assert kb.PosteriorEnsemble.from_store(stores).num_members == 4
    assert listings == [top.path]


def test_the_registry_holds_every_run_name_the_baseline_included():
    assert tuple(samplers.REGISTRY) == ("sgld", "sghmc", "sgnht", "atmc", "hmc", "sgd")
    assert samplers.BY_NAME == {name: method.optimizer for name, method
                                in samplers.REGISTRY.items() if name != "sgd"}
    for name, method in samplers.REGISTRY.items():
        optimizer = method.build(method.step_size, seed=5, temperature=1.0)
        assert isinstance(optimizer, keras.optimizers.Optimizer)
        assert method.collects == isinstance(optimizer, samplers.Sampler), name
    baseline = samplers.REGISTRY["sgd"].build(0.05, seed=0, temperature=1.0)
    assert type(baseline) is keras.optimizers.SGD and baseline.momentum == 0.9
    atmc = samplers.REGISTRY["atmc"].build(1e-3, seed=7, temperature=0.5)
    assert (atmc.seed, atmc.temperature) == (7, 0.5)
    with pytest.raises(ValueError, match="`temperature` applies to samplers, not to "
                                         "sampler='sgd'"):
        runs.RunConfig(sampler="sgd", temperature=0.5).validate()
    with pytest.raises(ValueError, match="'sgld', 'sghmc', 'sgnht', 'atmc', 'hmc', 'sgd'"):
        runs.RunConfig(sampler="adam").validate()


def test_experiment_is_an_alias_of_runs():
    assert kb.experiment.train is runs.train and kb.experiment.RunConfig is runs.RunConfig
    assert sorted(kb.experiment.__all__) == sorted(runs.__all__)
    for name in runs.__all__:
        assert getattr(runs, name) is not None, name
