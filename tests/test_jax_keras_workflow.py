"""Keras' workflow around ``fit`` under KERAS_BACKEND=jax, as a Keras user writes it.

Keras' stock callbacks, fit's arguments and input pipelines (``tf.data``,
``PyDataset``, generators), dtype policies, ``kb.bayesian`` on Sequential,
functional and subclassed models, and the ensemble on those inputs: the
same behaviour as under TensorFlow (tests/test_keras_callbacks.py,
tests/test_fit_arguments.py, tests/test_dtype_policies.py). The JAX half
runs once, in a subprocess (tests/workers/jax_keras_workflow_check.py: the
Keras backend is fixed at import), and records each check's value, error
and warnings.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest


pytest.importorskip("jax")
WORKER = Path(__file__).parent / "workers" / "jax_keras_workflow_check.py"
pytestmark = pytest.mark.slow  # one JAX process, about 2.5 minutes on 2 CPU cores


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jax_keras_workflow")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run([sys.executable, str(WORKER), str(folder)], capture_output=True,
                          text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(line for line in done.stdout.splitlines()
                           if line.startswith("RESULT "))[len("RESULT "):])


def _value(jax_run, name):
    result = jax_run[name]
    assert "error" not in result, result.get("trace", result)
    return result["value"]


def _error(jax_run, name):
    result = jax_run[name]
    assert "error" in result, f"{name}: no error, {result}"
    return result["error"], result["message"]


# Stock callbacks ------------------------------------------------------------

def test_early_stopping_on_val_nll_is_lower_better_under_jax(jax_run):
    stopping = _value(jax_run, "early_stopping")
    assert stopping["mode"] == "min" and stopping["best"] == stopping["min"]
    # mode="max" with patience 0: val_nll falls from epoch 0 to 1, so it stops after 2 epochs.
    assert _value(jax_run, "early_stopping_stops") == 2


@pytest.mark.parametrize("sampler", ["atmc", "sghmc", "sgld", "sgnht", "hmc"])
def test_a_weights_checkpoint_reloaded_goes_on_with_the_same_chain_under_jax(jax_run, sampler):
    checkpoint = _value(jax_run, f"checkpoint_{sampler}")
    assert checkpoint == {"same_state": True, "max_difference": 0.0}


def test_backup_and_restore_resumes_the_same_chain_under_jax(jax_run):
    # 4 epochs straight = 2 epochs, a crash at the end of epoch 1, 2 restored epochs.
    resumed = _value(jax_run, "backup_and_restore")
    assert resumed == {"epochs_run": 2, "iterations": [8, 8], "max_difference": 0.0}


def test_samples_are_the_chain_at_their_epoch_ends_under_jax(jax_run):
    # 32 rows in batches of 16: 2 steps an epoch; samples at the ends of epochs 2, 3, 4.
    samples = _value(jax_run, "collected_at_epoch_ends")
    assert [(s["epoch"], s["step"], s["end_step"]) for s in samples] == [
        (2, 6, 6), (3, 8, 8), (4, 10, 10)]
    assert all(s["max_difference"] == 0.0 for s in samples)


def test_a_checkpoint_after_every_step_leaves_the_chain_unchanged_under_jax(jax_run):
    result = _value(jax_run, "mid_epoch_checkpoint")
    assert result == {"chain": 0.0, "file": 0.0, "file_step": 4}


def test_reduce_lr_on_plateau_is_refused_before_the_first_step_under_jax(jax_run):
    error, message = _error(jax_run, "reduce_lr_refused")
    assert error == "ValueError" and "`callbacks`" in message and "ReduceLROnPlateau" in message
    assert jax_run["reduce_lr_built"] is False


def test_csv_logger_writes_the_sampling_logs_under_jax(jax_run):
    assert _value(jax_run, "csv_logger") == [
        "epoch", "configurational_temperature", "gradient_noise_ratio", "kinetic_temperature",
        "loss", "nll", "nonfinite_steps", "prior", "step_size", "val_loss", "val_nll"]


# fit's arguments and input pipelines ----------------------------------------

@pytest.mark.parametrize("name", ["class_weight", "sample_weight"])
def test_weights_whose_mean_is_not_one_warn_under_jax(jax_run, name):
    result = jax_run[name]
    assert "error" not in result and "TrainSizeWarning" in result["warnings"]
    assert any(f"fit's {name} has mean 2.406" in m for m in result["messages"])


@pytest.mark.parametrize("name, named", [
    ("dataset_sample_weight", "the sample_weight in fit's data"),
    ("dataset_class_weight", "fit's class_weight")])
def test_weights_in_a_dataset_whose_mean_is_not_one_warn_under_jax(jax_run, name, named):
    """The step's totals are metric state, passed in and out of JAX's compiled
    step; they outlive validation's reset. The same weights as validation_data are
    checked by evaluate's step (since 2026-11-29: a ValidationWeightWarning)."""
    result = jax_run[name]
    assert "error" not in result, result.get("trace", result)
    means = [m for m in result["messages"] if "has mean" in m and "validation_data" not in m]
    assert len(means) == 1 and means[0].startswith(
        f"keras_bnn: {named} has mean 2.406 over the first epoch's 32 weights"), means
    validation = [m for m in result["messages"] if "fit(validation_data)'s" in m]
    assert validation == [] if name == "dataset_class_weight" else validation[0].startswith(
        "keras_bnn: fit(validation_data)'s sample_weight has mean 2.406 over the first "
        "validation's 32 weights"), validation


def test_validation_split_warns_and_validates_under_jax(jax_run):
    result = jax_run["validation_split"]
    assert "TrainSizeWarning" in result["warnings"]
    assert any("validation_split=0.25 holds out 8 of 32" in m for m in result["messages"])


def test_validation_data_of_every_kind_gives_the_same_val_nll_under_jax(jax_run):
    # The same 32 rows as arrays, tf.data, a PyDataset and a generator, at the same weights.
    values = [_value(jax_run, f"validation_{name}")
              for name in ("arrays", "tf_data", "pydataset", "generator")]
    assert values == pytest.approx([values[0]] * 4, rel=1e-6)


@pytest.mark.parametrize("name", ["tf_data", "pydataset", "generator", "repeat_with_steps"])
def test_every_input_pipeline_trains_under_jax(jax_run, name):
    assert _value(jax_run, f"train_{name}") == {"iterations": 8, "finite": True}


@pytest.mark.parametrize("name, message", [
    ("repeat_without_steps", "fit: `steps_per_epoch` must be given for an endless dataset"),
    ("unbatched", "fit: `x` must yield batches of examples of shape (3,)"),
    ("unbatched_validation", "fit(validation_data): `x` must yield batches of examples"),
    ("loss_reduction", "`loss` must average over the batch"),
])
def test_bad_input_is_refused_by_name_under_jax(jax_run, name, message):
    error, text = _error(jax_run, name)
    assert error == "ValueError" and message in text


@pytest.mark.parametrize("name", ["train_size_tf_data", "train_size_pydataset"])
def test_a_dataset_of_another_size_than_train_size_warns_under_jax(jax_run, name):
    result = jax_run[name]
    assert "TrainSizeWarning" in result["warnings"]
    assert any("fit trains on 4 batches of 8 examples an epoch (about 32 examples) but "
               "compile(train_size=64)" in m for m in result["messages"])


@pytest.mark.parametrize("name", ["tf_data", "pydataset", "generator", "arrays"])
def test_hmc_warns_once_a_fit_on_minibatches_under_jax(jax_run, name):
    """Found 2026-11-28: under JAX each traced batch shape warned again (fit's
    check, then the trace of the first batch and of a smaller last one): 2–3
    identical MinibatchHMCWarnings a fit."""
    result = jax_run[f"hmc_minibatches_{name}"]
    assert "error" not in result, result
    assert sum(m.startswith("HMC on a minibatch of") for m in result["messages"]) == 1
    assert "MinibatchHMCWarning" not in jax_run["hmc_full_batch"]["warnings"]


# kb.bayesian and the ensemble -----------------------------------------------

@pytest.mark.parametrize("kind", ["sequential", "functional", "subclassed"])
def test_bayesian_samples_every_kind_of_keras_model_under_jax(jax_run, kind):
    result = _value(jax_run, f"bayesian_{kind}")
    assert result["iterations"] == 8 and result["finite"]
    # The logged prior is the mean of -log p(θ) over the last epoch's 4 steps; the warm-up's
    # 4 steps leave h ≈ 1e-8, so θ moves by ~sqrt(2h) ≈ 1.5e-4 a step and -log p(θ) ≈ 24
    # by ≲ |θ|·1e-4 ≈ 1e-3 in all: 1e-4 relative (measured 1e-7) is that bound.
    assert result["log_prior"] < 0 and result["prior_logged"] == pytest.approx(
        -result["log_prior"], rel=1e-4)


def test_the_ensemble_predicts_and_scores_every_input_pipeline_alike_under_jax(jax_run):
    ensemble = _value(jax_run, "ensemble")
    for name in ("arrays", "tf_data", "pydataset"):
        assert ensemble[f"predict_{name}"] == 0.0, name
    scores = [ensemble[f"evaluate_{name}"] for name in ("arrays", "tf_data", "pydataset")]
    assert all(isinstance(s, float) for s in scores), scores
    assert scores == pytest.approx([scores[0]] * 3, rel=1e-6)


def test_tensorboard_writes_its_logs_under_jax(jax_run):
    # The test extra installs the tensorboard package, which Keras' callback needs under JAX.
    assert _value(jax_run, "tensorboard") == ["train"]


def test_steps_per_execution_runs_the_same_chain_under_jax(jax_run):
    # Four steps per compiled call are the same four steps: same noise keys, same batches.
    assert _value(jax_run, "steps_per_execution") == 0.0


# Dtype policies ------------------------------------------------------------

def test_float64_enabled_after_import_sums_hmc_energies_in_float64(jax_run):
    """Found 2026-11-28: compile's refusal of float64 under JAX says to enable
    64-bit arrays with ``jax.config.update("jax_enable_x64", True)``; done
    after ``import keras_bnn``, HMC still summed its energies (and drew its
    accept uniform) in float32, the dtype read once at import. With
    energies in [2^19, 2^20) (n = 2^20) float32 resolves ΔH only to
    multiples of 1/16, so each step's acceptance exp(min(ΔH, 0)) was
    exp(-k/16) (measured: 0.8825 = exp(-2/16)); in float64 it is not
    (0.983, 0.864). One step per epoch: the logged rate is that step's."""
    result = _value(jax_run, "float64_enabled_after_import")
    assert result["weights"] == ["float64"]
    rejected = [rate for rate in result["acceptance_rate"] if rate < 1.0]
    assert rejected, result  # a step whose ΔH > 0, to judge
    for rate in rejected:
        sixteenths = -16.0 * math.log(rate)  # float32 logging: ≲ 1e-6 of rounding
        assert abs(sixteenths - round(sixteenths)) > 1e-3, (rate, sixteenths)
