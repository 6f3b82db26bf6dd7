"""Four small gaps closed 2026-11-29.

1. HMC under a Keras mask (``Embedding(mask_zero=True)`` → ``LSTM`` → a
   per-timestep loss): its potential skips the padding exactly as the SG
   samplers' (checked, TensorFlow here, JAX in a worker).
2. ``validation_data=(x, y, w)``'s weights: ``kb.ValidationWeightWarning``
   (tests/test_fit_gaps.py).
3. The old-file priors warning fires for a ``.keras`` file without the priors
   record, not for a user's manual ``build_from_config``.
4. ``compile(auto_scale_loss=True)`` with a sampler under ``"mixed_float16"``
   warns that it is not honoured.
"""

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
from keras_bnn import backend
from fit_helpers import Batches, tagged_sequences
from test_per_timestep_loss import tagger


def masked_hmc_case():
    """A tagger under HMC (one leapfrog step of h = 1e-4) and tags whose padding
    positions hold the class the weights score worst: the mean over every position
    exceeds the masked mean, so a potential that counted the padding would read
    more and the trajectory's energy would rise by ``n·(unmasked - masked)``.

    Returns:
        ``(model, x, tags, by_hand)``: ``by_hand`` the masked mean NLL, the
        unmasked one and ``n``, computed with NumPy from ``model.predict``.
    """
    x, tags = tagged_sequences()
    tokens = int((x != 0).sum())
    model = tagger("categorical", tokens, recurrent=True)
    model.compile(sampler=kb.samplers.HMC(step_size=1e-4, num_leapfrog_steps=1, seed=1),
                  train_size=tokens,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.set_weights([w * 3 for w in model.get_weights()])  # confident, distinct classes
    logits = np.asarray(model.predict(x, verbose=0), "float64")
    tags = np.where(x != 0, tags, logits.argmin(-1)).astype("int32")
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, tags[..., None], -1)[..., 0]
    return model, x, tags, (float(nll[x != 0].mean()), float(nll.mean()), tokens)


def minibatch_warnings(model, *args, **kwargs):
    """The MinibatchHMCWarning messages of ``model.fit(*args, **kwargs)``, and its logs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(*args, verbose=0, shuffle=False, **kwargs).history
    return [str(w.message) for w in caught
            if issubclass(w.category, kb.MinibatchHMCWarning)], history


def masked_hmc_result(model, x, tags):
    """HMC's potential at the model's weights, and one full-batch transition's logs and
    MinibatchHMCWarning messages."""
    values = [v.value for v in model.trainable_variables]
    potential, _, (_, _, prior_term) = backend.potential_and_gradients(
        model, values, x, tags, None)
    minibatch, history = minibatch_warnings(model, x, tags, batch_size=len(x), epochs=1)
    return {"nll": float(potential) - float(prior_term), "fit_nll": history["nll"][0],
            "acceptance_rate": history["acceptance_rate"][0], "minibatch": minibatch}


def check_masked_hmc(result, by_hand):
    masked, unmasked, n = by_hand
    # the padding's terms must move the mean by far more than float32 round-off
    # (~1e-6 relative), and move the energy of a trajectory by more than 1
    assert unmasked - masked > 1e-3 and n * (unmasked - masked) > 1.0
    assert result["nll"] == pytest.approx(masked, rel=1e-5)  # the potential at θ
    assert result["fit_nll"] == pytest.approx(masked, rel=1e-5)  # a transition's start
    # h = 1e-4: H changes by ~1e-4 along the true trajectory; a trajectory whose
    # potential counted the padding would end n·(unmasked - masked) > 1 higher (α < e^-1)
    assert result["acceptance_rate"] > 0.99
    # a full batch (16 sequences of n = 66 terms) warned "a minibatch of 16 < train_size=66
    # examples" until 2026-11-29
    assert result["minibatch"] == []


def test_hmc_potential_skips_masked_padding():
    """HMC's potential (the one its leapfrog and Metropolis test evaluate) under a
    Keras mask is the masked mean NLL computed by hand, as the SG samplers', and its
    full batch is not called a minibatch."""
    model, x, tags, by_hand = masked_hmc_case()
    check_masked_hmc(masked_hmc_result(model, x, tags), by_hand)


@pytest.mark.slow  # a JAX process: ~25 s
def test_hmc_potential_skips_masked_padding_under_jax():
    """As :func:`test_hmc_potential_skips_masked_padding` under KERAS_BACKEND=jax
    (the mask carried out of ``jax.value_and_grad``, backend/jax.py)."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "workers" /
                                               "jax_masked_hmc.py")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    check_masked_hmc(result, result.pop("by_hand"))


def scaling_warnings(policy_name, policy, **kwargs):
    """The warnings naming ``auto_scale_loss`` of an SGLD compile under ``policy_name``."""
    policy(policy_name)
    model = kb.models.mlp((6,), 3, hidden=(8,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.compile(sampler="sgld", train_size=40, loss=keras.losses.
                      SparseCategoricalCrossentropy(from_logits=True), **kwargs)
    assert isinstance(model.optimizer, kb.samplers.Sampler)  # never Keras' LossScaleOptimizer
    return [w for w in caught if "auto_scale_loss" in str(w.message)]


def test_explicit_auto_scale_loss_with_a_sampler_warns(policy):
    """``compile(sampler=..., auto_scale_loss=True)`` under "mixed_float16" was set to
    False silently; it warns, at the caller's line, naming the scale used instead. Keras'
    default (not passed), False, or another policy (where Keras would not scale) do not."""
    caught = scaling_warnings("mixed_float16", policy, auto_scale_loss=True)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert "auto_scale_loss=True is not honoured with a sampler" in str(caught[0].message)
    assert "S = 2^floor(log2 train_size) = 32" in str(caught[0].message)
    assert scaling_warnings("mixed_float16", policy) == []
    assert scaling_warnings("mixed_float16", policy, auto_scale_loss=False) == []
    assert scaling_warnings("float32", policy, auto_scale_loss=True) == []


def test_the_old_file_priors_warning_is_for_a_reload_not_a_manual_build(tmp_path):
    """A subclassed model a user made (its weights flat) and built with
    ``build_from_config`` warned "reloaded from a config that records no priors (saved
    before 2026-11-29)": it was never reloaded. It warns only at the reload of a file
    without the record, also for a subclass with its own ``from_config``."""
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "workers" /
                                               "manual_build.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, KERAS_BACKEND="tensorflow"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    for cls in ("Net", "OwnFromConfig"):
        assert result[cls]["build"] == []
        [message] = result[cls]["old_file"]
        assert message.startswith(f"MissingPriorWarning: {cls}: reloaded from a config that "
                                  "records no priors")
        assert "['scale/w', 'out/kernel', 'out/bias']" in message


@pytest.mark.slow  # ~15 s, beyond the default suite's budget
def test_hmc_on_a_full_batch_of_masked_sequences_does_not_warn_of_a_minibatch():
    """``train_size`` counts a per-timestep loss's terms (66 tokens in 16 sequences): a
    full batch warned "HMC on a minibatch of 16 < train_size=66 examples"; the batch's
    terms are compared with it, for a ``PyDataset`` as for arrays
    (:func:`test_hmc_potential_skips_masked_padding`), and half the sequences (the
    terms of the first 8) still warn."""
    model, x, tags, _ = masked_hmc_case()
    assert minibatch_warnings(model, Batches(x, tags, len(x)), epochs=1)[0] == []
    [message] = minibatch_warnings(model, x, tags, batch_size=8, epochs=1)[0]
    half = int((x[:8] != 0).sum())
    assert f"HMC on a minibatch of 8 examples of {half} loss terms < train_size=66" in message
