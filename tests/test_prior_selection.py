"""#20: `prior="auto"`, the run default: the kernel prior chosen on a
validation split of the training set, the same rule for every dataset."""

import dataclasses
import json
import os

import numpy as np
import pytest
import sklearn.model_selection

from keras_bnn import data, runs
from keras_bnn.runs import config as config_lib
from keras_bnn.runs import selection

# Short runs at an explicit step: the rule, not the quality of its choice
# (README, "Right by default", measures that at the defaults).
SHORT = dict(epochs=4, burn_in_epochs=1, collect_every=1, batch_size=64, step_size=0.01,
             model_args={"hidden": [8]}, sampler="sghmc")


def test_validation_split_is_fixed_and_disjoint():
    x = np.arange(50, dtype=np.float32)[:, None]
    y = np.arange(50)
    x_train, y_train, x_val, y_val = runs.validation_arrays(x, y, 0.2)
    assert len(y_val) == 10 and len(y_train) == 40
    assert sorted(np.concatenate([y_train, y_val]).tolist()) == list(range(50))
    assert np.array_equal(x_val[:, 0], y_val)  # rows stay paired
    assert np.array_equal(runs.validation_arrays(x, y, 0.2)[3], y_val)  # fixed


@pytest.mark.slow
def test_auto_prior_is_chosen_on_held_out_training_rows(tmp_path, monkeypatch):
    """Both candidates train on 80 % of wine's training split and are scored
    on the rest; the test split is never read (here it is NaN: reading it
    would make a validation NLL non-finite); the run trains on the whole
    training split under the candidate of lowest validation NLL."""
    real = data.bundled_arrays
    split = sklearn.model_selection.train_test_split

    def poisoned(x, y, **kwargs):  # the bundled sets' test split is NaN
        x_train, x_test, y_train, y_test = split(x, y, **kwargs)
        return x_train, np.full_like(x_test, np.nan), y_train, y_test

    monkeypatch.setattr(sklearn.model_selection, "train_test_split", poisoned)
    config = runs.RunConfig(dataset="wine", output_dir=str(tmp_path / "run"), **SHORT)
    config.validate()
    resolved = selection.resolve_prior(config)
    report = json.load(open(runs.RunDir(config.output_dir).prior_selection))
    assert [(row["prior"], row["prior_scale"]) for row in report["candidates"]] == list(
        config_lib.PRIOR_CANDIDATES)
    nlls = [row["validation_nll"] for row in report["candidates"]]
    assert all(np.isfinite(nlls)) and nlls[0] != nlls[1]
    best = report["candidates"][int(np.argmin(nlls))]
    assert (resolved.prior, resolved.prior_scale) == (best["prior"], best["prior_scale"])
    assert (report["prior"], report["prior_scale"]) == (best["prior"], best["prior_scale"])
    num_train = len(real("wine")[0][1])
    assert report["num_validation"] == round(0.2 * num_train)
    for prior, scale in config_lib.PRIOR_CANDIDATES:
        candidate = runs.RunDir(config.output_dir).prior_candidate(prior, scale)
        stored = runs.read_config(candidate.path)
        assert (stored.prior, stored.prior_scale, stored.epochs) == (prior, scale, 4)
        assert candidate.complete
    # A restarted selection scores the finished candidates again, not retrains them.
    candidate = runs.RunDir(config.output_dir).prior_candidate(*config_lib.PRIOR_CANDIDATES[0])
    samples = candidate.samples

    def mtimes():
        return {name: os.path.getmtime(os.path.join(samples, name))
                for name in os.listdir(samples)}

    before = mtimes()
    again = selection.resolve_prior(config)
    assert (again.prior, again.prior_scale) == (resolved.prior, resolved.prior_scale)
    assert mtimes() == before
    # A selection of another seed in the directory (a run stopped before it
    # wrote config.json) trains its own candidates; it used to score these.
    selection.resolve_prior(dataclasses.replace(config, seed=1))
    assert mtimes().keys() == before.keys() and mtimes() != before
    for prior, scale in config_lib.PRIOR_CANDIDATES:
        assert runs.read_config(runs.RunDir(config.output_dir).prior_candidate(
            prior, scale).path).seed == 1


@pytest.mark.slow
def test_train_stores_the_chosen_prior_and_resumes_with_it(tmp_path):
    config = runs.RunConfig(dataset="wine", output_dir=str(tmp_path / "run"), **SHORT)
    runs.train(config.validate(), verbose=0)
    stored = runs.read_config(config.output_dir)
    report = json.load(open(runs.RunDir(config.output_dir).prior_selection))
    assert (stored.prior, stored.prior_scale) == (report["prior"], report["prior_scale"])
    assert stored.prior != "auto"
    # evaluate and export read the stored config, which names the prior.
    assert runs.evaluate(config.output_dir)["ensemble"]["nll"] > 0


@pytest.mark.parametrize("dataset, data_given", [("synthetic", False), ("wine", True)])
def test_auto_prior_without_a_bundled_training_set_takes_the_default(tmp_path, dataset,
                                                                     data_given):
    sizes = {"num_train": 64, "num_test": 64} if dataset == "synthetic" else {}
    config = runs.RunConfig(dataset=dataset, output_dir=str(tmp_path / "run"), **sizes,
                            **SHORT).validate()
    given = None
    if data_given:
        (x, y), (x_test, y_test), _ = data.bundled_arrays("wine")
        given = runs.arrays_data(x, y, 64, 0, "categorical", x_test, y_test)
    resolved = selection.resolve_prior(config, data=given)
    assert (resolved.prior, resolved.prior_scale) == config_lib.FALLBACK_PRIOR
    report = json.load(open(runs.RunDir(config.output_dir).prior_selection))
    assert report["candidates"] == [] and report["reason"].startswith("no selection")
    assert not os.path.exists(os.path.join(config.output_dir, "prior-selection"))


@pytest.mark.slow
def test_chains_share_one_selection(tmp_path):
    config = runs.RunConfig(dataset="wine", output_dir=str(tmp_path / "run"), **SHORT)
    runs.run_chains(config, 2, verbose=0)
    priors = {(c.prior, c.prior_scale) for c in
              (runs.read_config(os.path.join(config.output_dir, f"chain-{k}")) for k in (0, 1))}
    report = json.load(open(runs.RunDir(config.output_dir).prior_selection))
    assert priors == {(report["prior"], report["prior_scale"])}
    assert not os.path.exists(os.path.join(config.output_dir, "chain-0", "prior_selection.json"))


def test_build_model_refuses_an_unresolved_prior():
    config = runs.RunConfig(dataset="wine").validate()
    with pytest.raises(ValueError, match="resolved by keras_bnn.runs.train"):
        runs.build_model(config, {"input_shape": (13,), "num_classes": 3})


@pytest.mark.slow
def test_candidates_that_collect_nothing_are_not_scored(tmp_path):
    """`keras-bnn train --dataset wine --epochs 3` (2 steps an epoch: all in the
    warm-up) used to stop with "`run_dir` '…/prior-selection/he_normal-1' holds
    no samples yet". A candidate without samples is not scored; with none
    scored the run takes the default prior and says why."""
    config = runs.RunConfig(dataset="wine", output_dir=str(tmp_path / "run"), epochs=3,
                            model_args={"hidden": [8]}).validate()
    resolved = selection.resolve_prior(config)
    assert (resolved.prior, resolved.prior_scale) == config_lib.FALLBACK_PRIOR
    report = json.load(open(runs.RunDir(config.output_dir).prior_selection))
    assert report["reason"].startswith("no candidate collected a sample in 3 epochs")
    assert [row["validation_nll"] for row in report["candidates"]] == [None, None]
    assert all("warm-up" in row["not_scored"] for row in report["candidates"])


def test_a_candidate_that_collects_nothing_loses_to_one_that_does(tmp_path, monkeypatch):
    # Student-t's run waits for equilibrium (burn-in auto: 4 epochs are all warm-up).
    fit_run = selection.fitting.fit_run

    def student_t_waits(run, candidate, *args, **kwargs):
        if candidate.prior == "student_t":
            candidate = dataclasses.replace(candidate, burn_in_epochs="auto")
        return fit_run(run, candidate, *args, **kwargs)

    monkeypatch.setattr(selection.fitting, "fit_run", student_t_waits)
    config = runs.RunConfig(dataset="wine", output_dir=str(tmp_path / "run"), **SHORT).validate()
    resolved = selection.resolve_prior(config)
    report = json.load(open(runs.RunDir(config.output_dir).prior_selection))
    he_normal, student_t = report["candidates"]
    assert he_normal["validation_nll"] > 0 and student_t["validation_nll"] is None
    assert (resolved.prior, report["prior"]) == ("he_normal", "he_normal")
    assert report["reason"].endswith("held-out training rows (1 collected no sample in 4 epochs)")


def test_candidates_of_default_length_go_on_like_the_run(tmp_path, monkeypatch):
    """A candidate of default length may train on to ``MAX_LENGTH`` times it
    until its chain has sampled from equilibrium, as the run itself does:
    candidates trained for exactly the default length were skipped where the
    run would have gone on."""
    monkeypatch.setattr(config_lib, "DEFAULT_STEPS", 1)  # the floor: MIN_EPOCHS
    config = runs.RunConfig(dataset="wine", output_dir=str(tmp_path / "run"),
                            **dict(SHORT, epochs=None, burn_in_epochs="auto")).validate()
    selection.select_prior(config)
    for prior, scale in config_lib.PRIOR_CANDIDATES:
        stored = runs.read_config(runs.RunDir(config.output_dir).prior_candidate(prior, scale).path)
        assert (stored.epochs, stored.max_epochs) == (
            config_lib.MIN_EPOCHS, config_lib.MAX_LENGTH * config_lib.MIN_EPOCHS)
