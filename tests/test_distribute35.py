"""Distributed sampling as a user drives it: ``train_on_batch`` under MirroredStrategy
(2 logical CPUs, tests/conftest.py), and two MultiWorkerMirroredStrategy workers on
127.0.0.1 that collect into one store (tests/workers/multi_worker_collect.py)."""

import itertools

import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import softmax_regression, three_class_rows

_KEY_BASES = itertools.count(40000, 1000)


def _mirrored(monkeypatch):
    """A MirroredStrategy over the 2 logical CPUs with collective keys of its own
    (tests/test_distribute_fit.py's ``new_strategy``)."""
    monkeypatch.setattr(tf.distribute.MirroredStrategy, "_collective_key_base",
                        next(_KEY_BASES))
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def test_train_on_batch_refuses_jit_compile_under_a_strategy_as_fit_does(monkeypatch):
    """``fit`` refuses ``jit_compile=True`` under a strategy by name; ``train_on_batch``,
    which runs the same step, failed at its first call with TensorFlow's "`merge_call`
    called while defining a new graph" RuntimeError."""
    x, y = three_class_rows(10)
    strategy = _mirrored(monkeypatch)
    model = softmax_regression("sgld", 10, strategy)
    with strategy.scope():
        model.compile(sampler=kb.samplers.SGLD(step_size=1e-2, seed=1), train_size=10,
                      loss=model.loss, jit_compile=True)
    with pytest.raises(ValueError, match=r"train_on_batch: `jit_compile` must be False or "
                                         r"'auto' under MirroredStrategy.*got jit_compile=True"):
        model.train_on_batch(x, y)
    assert int(model.optimizer.iterations.numpy()) == 0
