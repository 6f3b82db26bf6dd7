"""Shared helpers of the ensemble, export and serving tests: tiny members,
weight sets, and running TensorFlow's SavedModel tools in a fresh process."""

import os
import subprocess
import sys

import keras
import numpy as np

import keras_bnn as kb

INPUT_DIM = 5
NUM_CLASSES = 3


def tiny_member(seed=0, hidden=(8,)):
    """A small ``keras_bnn.models.mlp`` (logits for NUM_CLASSES classes)."""
    keras.utils.set_random_seed(seed)
    return kb.models.mlp((INPUT_DIM,), NUM_CLASSES, hidden=hidden)


def weight_sets(model, count, scale=0.5, seed=0):
    """``count`` distinct weight sets: the model's weights plus N(0, scale²) noise."""
    rng = np.random.default_rng(seed)
    return [
        [w + scale * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()]
        for _ in range(count)
    ]


def inputs(count, seed=1):
    return np.random.default_rng(seed).standard_normal((count, INPUT_DIM)).astype("float32")


def tiny_ensemble(count=3, seed=0):
    model = tiny_member(seed)
    return kb.PosteriorEnsemble(model, weight_sets(model, count, seed=seed))


def run_fresh(args, timeout=120):
    """Runs ``args`` (argv list) with the test environment, without raising on failure.

    Returns:
        ``subprocess.CompletedProcess`` with text stdout/stderr.
    """
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def saved_model_cli(*args, timeout=120):
    """Runs TensorFlow's ``saved_model_cli`` (the one installed beside this Python)."""
    script = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    command = [script] if os.path.exists(script) else [
        sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"
    ]
    return run_fresh(command + list(args), timeout=timeout)


def categorical_summary(p):
    """numpy's ``predictive_summary`` of member probabilities ``p`` [S, N, ..., K]."""
    mean = p.mean(0)
    entropy = -(mean * np.log(mean)).sum(-1)
    expected = -(p * np.log(p)).sum(-1).mean(0)
    return {"probabilities": mean, "log_probabilities": np.log(mean),
            "predictive_entropy": entropy, "expected_entropy": expected,
            "mutual_information": entropy - expected, "class_std": p.std(0)}
