"""Every kind of Keras layer gets one prior per weight, samples, and keeps its priors
through save and load (``kb.bayesian``, ``BayesianModel.get_config``)."""

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb
from layer_models import (BIAS_PRIOR, CASES, KERNEL_PRIOR, N, Scale, block_with_one_conv_prior,
                          case, minus_log_prior, prior_configs)

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
WORKER = Path(__file__).parent / "workers" / "layer_priors_reload.py"


def _compile(model):
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-4, seed=0), train_size=N, loss=LOSS)
    return model


def _minus_log_density(name, w):
    """``-log p(w)`` by the rule of ``kb.bayesian``'s docs, written out: embeddings
    N(0, 1), normalisation scales N(1, 1), other weights of rank >= 2 not named
    bias N(0, 0.7) (``KERNEL_PRIOR``), the rest Laplace(0, 0.3) (``BIAS_PRIOR``)."""
    w = np.asarray(w, "float64")
    normal = {"embeddings": (0.0, 1.0), "gamma": (1.0, 1.0)}.get(name)
    if normal is None and w.ndim >= 2 and name != "bias":
        normal = (KERNEL_PRIOR.mean, KERNEL_PRIOR.stddev)
    if normal is not None:
        mean, sigma = normal
        return float(np.sum(0.5 * ((w - mean) / sigma) ** 2 + math.log(sigma)
                            + 0.5 * math.log(2 * math.pi)))
    scale = BIAS_PRIOR.get_config()["scale"]
    return float(np.sum(np.abs(w) / scale + math.log(2 * scale)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_weight_gets_one_prior_and_the_potential_counts_it_once(name):
    """Each trainable weight carries one prior, and the potential's prior term
    (what the sampler's step adds, times n) is Σ -log p(w) over the distinct
    weights: a layer used twice (``shared_layer``) counts once."""
    model, x, y = case(name)
    weights = model.trainable_variables
    assert len({id(v) for v in weights}) == len(weights) > 0
    assert all(isinstance(v.regularizer, kb.priors.Prior) for v in weights), [
        v.path for v in weights if not isinstance(v.regularizer, kb.priors.Prior)]
    _compile(model)
    assert len(model.losses) == len(weights)
    _, prior_term = model.potential_terms(y[:4], model(x[:4]), None, model.losses)  # a batch
    expected = sum(_minus_log_density(v.name, keras.ops.convert_to_numpy(v.value))
                   for v in weights)
    assert float(prior_term) * N == pytest.approx(expected, rel=1e-5)


#: The cases whose priors the store's model lost before ``weight_priors`` (no layer
#: config records them); the others guard what was right and run in the slow suite
#: (the default suite's time: two SGLD steps and a store, about 2 s each).
UNRECORDED_BEFORE = {"custom_weight", "depthwise_conv2d", "multi_head_attention",
                     "separable_conv2d", "subclassed"}


@pytest.mark.parametrize("name", [name if name in UNRECORDED_BEFORE else
                                  pytest.param(name, marks=pytest.mark.slow)
                                  for name in sorted(CASES)])
def test_a_sampler_steps_and_the_store_rebuilds_the_model_with_its_priors(name, tmp_path):
    """Two SGLD steps without a MissingPriorWarning; the store's model
    (``SampleStore.build_model``, what ``PosteriorEnsemble.from_store`` and a
    resumed run use) has the priors the chain sampled with; the ensemble of
    two samples averages to probabilities."""
    model, x, y = case(name)
    _compile(model)
    store = kb.SampleStore(str(tmp_path / "samples"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        for _ in range(2):
            history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
            store.append(model)
    assert int(model.optimizer.iterations) == 4
    assert np.isfinite(history.history["loss"][-1]) and np.isfinite(history.history["prior"][-1])
    assert prior_configs(store.build_model()) == prior_configs(model)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    probabilities = np.asarray(ensemble.predict(x, batch_size=4, verbose=0))
    assert ensemble.num_members == 2 and probabilities.shape == (N, 3)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-5)


def _reload_in_a_fresh_process(directory, backend):
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(WORKER), str(directory)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(line for line in done.stdout.splitlines()
                           if line.startswith("RESULT "))[len("RESULT "):])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``(directory, {case: (priors, -log p)})``: every case saved, and what it had."""
    directory = tmp_path_factory.mktemp("saved")
    models = {name: case(name)[0] for name in CASES}
    models["resnet_block_one_conv"] = block_with_one_conv_prior()
    for name, model in models.items():
        model.save(directory / f"{name}.keras")
    return directory, {name: (prior_configs(model), minus_log_prior(model))
                       for name, model in models.items()}


@pytest.fixture(scope="module")
def reloaded(saved):
    return _reload_in_a_fresh_process(saved[0], "tensorflow")


@pytest.mark.parametrize("name", [*sorted(CASES), "resnet_block_one_conv"])
@pytest.mark.slow
def test_a_reload_in_a_fresh_process_keeps_every_prior(name, saved, reloaded):
    """The priors no layer config records (the projections of a
    MultiHeadAttention, the layers of a subclassed model, which a fresh
    process names anew, a custom layer's ``add_weight``, a depthwise kernel's,
    one convolution of a ResNetPPBlock) used to be lost, or to come back as
    the block's: the model's config records every one."""
    priors, minus_log_p = saved[1][name]
    assert reloaded[name]["priors"] == priors
    assert reloaded[name]["minus_log_prior"] == pytest.approx(minus_log_p, rel=1e-6)


@pytest.mark.slow  # a JAX process loading every case: about 45 s
def test_a_reload_under_jax_keeps_every_prior(saved):
    pytest.importorskip("jax")
    result = _reload_in_a_fresh_process(saved[0], "jax")
    for name, (priors, minus_log_p) in saved[1].items():
        assert result[name]["backend"] == "jax"
        assert result[name]["priors"] == priors, name
        assert result[name]["minus_log_prior"] == pytest.approx(minus_log_p, rel=1e-5), name


def test_a_flat_prior_chosen_on_purpose_stays_chosen_after_a_reload(tmp_path):
    """``allow_flat=True`` used to hold in memory only: the reloaded model's
    ``fit`` warned that the weight had no prior."""
    model, x, y = case("shared_layer")
    flat = kb.bayesian(model, priors={"logits/bias": None}, allow_flat=True)
    flat.save(tmp_path / "flat.keras")
    loaded = _compile(keras.saving.load_model(tmp_path / "flat.keras"))
    assert loaded.flat_prior_weights == ["logits/bias"]
    assert loaded.get_layer("logits").bias.regularizer is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        loaded.fit(x, y, batch_size=4, epochs=1, verbose=0)


class _NoConfig(kb.priors.Prior):
    """A prior without ``get_config``: Keras cannot save it."""

    def log_prob(self, x):
        return -keras.ops.sum(keras.ops.square(x))


def test_a_prior_a_reload_could_not_rebuild_fails_at_save(tmp_path):
    """It used to be dropped silently (a custom layer's weight: no config holds it)."""
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, Scale(name="scale")(inputs)),
                        priors={"scale/w": _NoConfig()})
    with pytest.raises(ValueError, match=r"prior of weight 'scale/w' \(_NoConfig\) cannot be "
                                         r"saved.*register_keras_serializable"):
        model.save(tmp_path / "model.keras")
    assert not (tmp_path / "model.keras").exists()


def test_a_config_whose_priors_do_not_fit_the_model_is_refused():
    model = case("lstm")[0]
    config = model.get_config()
    config["weight_priors"][0][2] = [99]
    with pytest.raises(ValueError, match=r"`weight_priors` gives weight 0 .* of shape \(99,\)"):
        kb.BayesianModel.from_config(config)


@pytest.mark.parametrize("layer, weight, attribute, fan_in", [
    (keras.layers.DepthwiseConv2D(3, depth_multiplier=2), "kernel", "depthwise_regularizer", 9),
    (keras.layers.SeparableConv2D(3, 3), "depthwise_kernel", "depthwise_regularizer", 9),
    (keras.layers.Conv2DTranspose(3, 3), "kernel", "kernel_regularizer", 45),
    (keras.layers.Conv2DTranspose(3, 3, strides=2), "kernel", "kernel_regularizer", 11),
], ids=["DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Conv2DTranspose-strides2"])
def test_a_kernel_whose_shape_misreads_its_fan_in_gets_the_true_one(layer, weight, attribute,
                                                                     fan_in):
    """On 5 input channels. A depthwise kernel (3, 3, 5, 2): each output channel sums
    over 3·3 inputs of one channel; He's σ read 3·3·5 from the shape, sqrt(5) too
    tight. A transposed convolution's kernel (3, 3, 3, 5) is (k, k, out, in): each
    output sums over 3·3·5 terms (45), or 45/4 on average with strides 2 (11);
    the shape read 3·3·3. The prior is in the layer's config too."""
    inputs = keras.Input((6, 6, 5))
    model = kb.bayesian(keras.Model(inputs, layer(inputs)))
    variable = getattr(layer, weight)
    assert any(v is variable for v in model.trainable_variables)
    assert variable.regularizer.get_config() == {"scale": 1.0, "fan_in": fan_in}
    assert getattr(layer, attribute) is variable.regularizer
    w = keras.ops.convert_to_numpy(variable.value).astype("float64")
    sigma = math.sqrt(2 / fan_in)
    expected = np.sum(-0.5 * (w / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2 * math.pi))
    assert float(variable.regularizer.log_prob(variable.value)) == pytest.approx(expected,
                                                                                 rel=1e-5)


def test_a_config_written_before_the_priors_were_recorded_still_loads():
    """A config without ``weight_priors`` (a store's manifest or a file written
    before) rebuilds the model with the priors its layer configs record, as it
    did: a regression guard (it passes on the code before the record too)."""
    model = case("multi_head_attention")[0]
    config = model.get_config()
    config.pop("weight_priors", None)  # absent before it was recorded
    rebuilt = kb.BayesianModel.from_config(config)
    recorded = {v.path: v.regularizer for v in rebuilt.trainable_variables}
    assert recorded["logits/kernel"].get_config() == KERNEL_PRIOR.get_config()
    assert recorded["mha/query/kernel"] is None  # MultiHeadAttention's config holds none


def test_clone_model_and_from_config_keep_unrecorded_priors():
    """``keras.models.clone_model`` rebuilds each layer from its config: a
    MultiHeadAttention clone's projections came without priors (``fit`` named
    them) until :mod:`keras_bnn.clone_priors` carried them;
    ``BayesianModel.from_config(get_config())`` keeps every one too."""
    model, x, y = case("multi_head_attention")
    clone = keras.models.clone_model(model)
    assert prior_configs(clone) == prior_configs(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        _compile(clone).fit(x, y, batch_size=4, epochs=1, verbose=0)
    copy = kb.BayesianModel.from_config(model.get_config())
    assert prior_configs(copy) == prior_configs(model)
