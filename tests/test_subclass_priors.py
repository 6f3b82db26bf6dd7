"""Priors that no layer config records survive a subclassed BayesianModel's save and load,
and any BayesianModel's ``keras.models.clone_model`` (:mod:`keras_bnn.prior_attachment`,
:mod:`keras_bnn.clone_priors`)."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb
from layer_models import block_with_one_conv_prior, case, minus_log_prior, prior_configs

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
WORKER = Path(__file__).parent / "workers" / "subclass_priors.py"
#: The priors the worker's model samples with: its Scale's weight (a constructor
#: argument), the Dense's kernel and bias (``kb.bayesian``'s default and a key).
SAMPLED = [["Laplace", {"scale": 0.05, "loc": 0.0}], ["HeNormal", {"scale": 1.0}],
           ["Normal", {"mean": 0.0, "stddev": 0.5}]]


@pytest.fixture(scope="module")
def subclassed(tmp_path_factory):
    """The worker's result (a subclass of ``kb.BayesianModel`` needs a process of its own)."""
    tmp = tmp_path_factory.mktemp("subclass_priors")
    done = subprocess.run([sys.executable, str(WORKER), str(tmp)], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, KERAS_BACKEND="tensorflow"))
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("cls", ["Net", "OwnFromConfig"])
@pytest.mark.slow
def test_a_subclassed_model_reloads_with_the_priors_it_sampled_with(subclassed, cls):
    """A subclass's priors set by ``kb.bayesian`` or by a constructor argument that
    Keras' config leaves out came back flat from ``load_model`` (-log p(θ) 58.29
    before the save, 0.0 after; no warning at the load), and its own store refused
    the reloaded model, as another architecture. Also for a subclass with its own
    ``from_config``, which Keras builds after it (``build_from_config``)."""
    result = subclassed[cls]
    assert result["priors"] == SAMPLED
    assert result["loaded_priors"] == SAMPLED
    assert result["loaded_minus_log_prior"] == pytest.approx(result["minus_log_prior"],
                                                             rel=1e-6)
    assert result["minus_log_prior"] > 1.0  # a prior term that a flat prior would lose
    assert result["warnings"] == []
    assert result["store"] == "appended"  # the same priors: its samples pair with the store's
    assert result["rebuilt_priors"] == SAMPLED  # SampleStore.build_model


@pytest.mark.parametrize("cls", ["Net", "OwnFromConfig"])
def test_a_subclassed_model_saved_without_the_priors_record_warns_at_the_reload(
        subclassed, cls):
    """A ``.keras`` file saved before 2026-11-29 (its config without ``weight_priors``)
    reloads with every weight flat (none of the three priors is in the class's code): a
    MissingPriorWarning names the three weights and how to give the priors back, where
    until 2026-11-29 the reload said nothing."""
    old = subclassed[cls]["old_file"]
    assert old["priors"] == [[None, None]] * 3
    [message] = old["warnings"]
    assert message.startswith(f"MissingPriorWarning: {cls}: reloaded from a config that "
                              "records no priors")
    assert ("3 trainable weight(s) carry none (flat): ['scale/w', 'out/kernel', 'out/bias']"
            in message)
    assert "model = kb.bayesian(model, ...)" in message and "save it again" in message


def test_a_subclassed_models_copy_and_clone_keep_its_priors(subclassed):
    """``Net.from_config(net.get_config())`` (the README's copy) gave an unbuilt
    model, and ``keras.models.clone_model`` one without a prior; both are built on
    the recorded input shape with every prior."""
    assert subclassed["copy_priors"] == SAMPLED
    assert subclassed["clone_priors"] == SAMPLED


def test_a_subclassed_models_record_that_does_not_fit_is_refused_and_one_it_cannot_set_warns(
        subclassed):
    """A record whose weight shapes differ from those the class makes is refused
    naming the weight; one that cannot be set (no input shape to build on) warns,
    naming the weights, instead of leaving them silently to the code's priors."""
    assert subclassed["recorded"] is True
    assert "`weight_priors` gives weight 0 (" in subclassed["altered"]
    assert "of shape (99,) a prior, but the rebuilt model has (3,)" in subclassed["altered"]
    assert "the class Net makes other weights" in subclassed["altered"]
    [message] = subclassed["unbuilt_warnings"]
    assert "scale/w" in message and "out/kernel" in message and "out/bias" in message
    assert "could not be set: the model is not built" in message


def _fit_without_missing_prior_warning(model, x, y):
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-4, seed=0), train_size=len(x),
                  loss=LOSS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)


@pytest.mark.parametrize("name", ["custom_weight", "subclassed"])
def test_clone_model_keeps_the_priors_no_layer_config_records(name):
    """Keras clones a functional model layer by layer from their configs: a custom
    layer's ``add_weight`` came without a prior, a ``keras.Model`` subclass given
    priors by ``kb.bayesian`` with none of its 4 (``fit`` warned; a
    MultiHeadAttention's projections: ``tests/test_layer_priors.py``). The clone's
    -log p(θ) at the original's weights is the original's."""
    model, x, y = case(name)
    clone = keras.models.clone_model(model)
    assert type(clone) is kb.BayesianModel
    assert prior_configs(clone) == prior_configs(model)
    clone.set_weights(model.get_weights())
    assert minus_log_prior(clone) == pytest.approx(minus_log_prior(model), rel=1e-6)
    _fit_without_missing_prior_warning(clone, x, y)


def test_clone_model_keeps_a_composite_layers_own_priors():
    """A ResNetPPBlock whose one convolution has a prior of its own (the block's
    config records one for all): the clone's convolution had the block's."""
    model = block_with_one_conv_prior()
    clone = keras.models.clone_model(model)
    assert prior_configs(clone) == prior_configs(model)


def test_clone_model_with_a_clone_function_that_changes_a_layer_warns_naming_its_weights():
    """A ``clone_function`` of one's own that gives a layer other weights: the
    original's priors do not fit them and are not carried; a warning names them."""
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3, name="hidden")(inputs)
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="logits")(hidden)))

    def wider(layer):
        config = layer.get_config()
        if layer.name == "hidden":
            config.update(units=5, kernel_regularizer=None, bias_regularizer=None)
        return layer.__class__.from_config(config)

    with pytest.warns(UserWarning, match=r"clone of layer 'hidden' has other weights.*"
                                         r"\['hidden/kernel', 'hidden/bias'\] have no prior"):
        clone = keras.models.clone_model(model, clone_function=wider)
    assert [v.regularizer is None for v in clone.trainable_variables] == [True, True, False,
                                                                          False]
    rng = np.random.default_rng(0)
    assert clone(rng.normal(size=(2, 4)).astype("float32")).shape == (2, 2)


def test_a_subclassed_models_constructor_arguments_survive_a_reload(subclassed):
    """``BayesianModel.get_config`` (it records the priors) turned off Keras' config of a
    subclass's ``__init__`` arguments: ``Sized(units=8, activation="tanh")`` had
    neither in its config, and ``load_model`` made ``Sized()`` (4 relu units), which
    the record of its (3, 8) kernel's prior refused."""
    assert subclassed["sized"] == {"config": [8, "tanh"], "loaded": [8, "tanh"],
                                   "shapes": [[3, 8], [8], [8, 2], [2]],
                                   "same_outputs": True}


@pytest.mark.parametrize("sampler", ["sgld", "sghmc"])
def test_a_subclassed_model_built_before_compile_compiles_and_samples(subclassed, sampler):
    """``net(x)`` (or ``summary()``) before ``compile``: ``compile`` raised Keras' "You
    cannot add new elements of state" (its diagnostics' metrics, on a built model).
    Compiled (SGHMC twice, then one ``fit`` step), each metric is listed once, and
    ``fit`` logs the sampler's diagnostics."""
    got = subclassed["built_compile"][sampler]
    assert isinstance(got, dict), got
    names = got["metrics"]
    assert len(names) == len(set(names))
    wanted = {"loss", "nll", "prior", "step_size", "configurational_temperature",
              "gradient_noise_ratio"}
    assert wanted <= set(names)
    assert ("kinetic_temperature" in names) == (sampler == "sghmc")
    if sampler == "sghmc":
        assert wanted | {"kinetic_temperature"} <= set(got["logs"])


def _functional(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3, name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden))


@pytest.mark.parametrize("sampler", ["sgld", "sghmc"])
def test_a_functional_model_compiled_twice_logs_each_diagnostic_once(sampler):
    """The trackers ``compile`` makes on a built subclassed model are made once per
    model, as on a functional one (which Keras does not lock): a second ``compile``
    adds none, and ``fit`` logs the sampler's diagnostics."""
    model = kb.bayesian(_functional())
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    y = np.arange(16, dtype="int32") % 3
    trackers = []
    for _ in range(2):
        model.compile(sampler=sampler, train_size=len(x), loss=LOSS)
        trackers.append(dict(model._sampling_trackers))
    assert trackers[0] == trackers[1]
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    names = [metric.name for metric in model.metrics]
    assert len(names) == len(set(names))
    assert {"nll", "prior", "step_size"} <= set(history.history)


def test_clone_model_keeps_the_weights_made_flat_on_purpose():
    """``kb.bayesian(..., allow_flat=True)``'s flat weights came back from
    ``clone_model`` as weights without a prior, not listed in ``flat_prior_weights``:
    the clone's ``fit`` warned of them (``from_config`` kept them)."""
    model = kb.bayesian(_functional(), priors={"logits/bias": None}, allow_flat=True)
    clone = keras.models.clone_model(model)
    assert clone.flat_prior_weights == model.flat_prior_weights == ["logits/bias"]
    assert prior_configs(clone) == prior_configs(model)
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    _fit_without_missing_prior_warning(clone, x, np.arange(16, dtype="int32") % 3)
