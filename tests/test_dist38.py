"""XLA refused by name where ``tf.distribute`` cannot run it (MirroredStrategy over the 2
logical CPUs, tests/conftest.py)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from ensemble_helpers import inputs, tiny_member, weight_sets
from fit_helpers import softmax_regression, three_class_rows

_KEY_BASES = itertools.count(380000, 1000)


@pytest.fixture
def new_strategy(monkeypatch):
    """MirroredStrategies over ``devices`` with collective keys of their own
    (see tests/test_distribute_fit.py)."""
    def make(devices=("/cpu:0", "/cpu:1")):
        monkeypatch.setattr(tf.distribute.MirroredStrategy, "_collective_key_base",
                            next(_KEY_BASES))
        return tf.distribute.MirroredStrategy(list(devices))
    return make


def _refused(owner, replicas=2):
    return (rf"{owner}: `jit_compile` must be False or 'auto' under MirroredStrategy: Keras "
            rf"compiles its {replicas} replicas' steps into one XLA function.*"
            r"got jit_compile=True")


def _compiled(model, strategy, jit_compile):
    with strategy.scope():
        model.compile(sampler=kb.samplers.SGLD(step_size=1e-2, seed=1), train_size=10,
                      loss=model.loss, jit_compile=jit_compile)
    return model


def test_evaluate_and_test_on_batch_refuse_jit_compile_on_several_replicas(new_strategy):
    """Keras compiles the 2 replicas' test steps into one XLA function: ``evaluate`` and
    ``test_on_batch`` failed with TensorFlow's InvalidArgumentError "Trying to access
    resource dense/kernel/replica_1 ... located in device CPU:1 from device CPU:0".
    ``predict`` compiles each replica's step apart: it runs under XLA and gives the
    predictions without it."""
    x, y = three_class_rows(10)
    strategy = new_strategy()
    model = _compiled(softmax_regression("sgld", 10, strategy), strategy, True)
    with pytest.raises(ValueError, match=_refused("evaluate")):
        model.evaluate(x, y, verbose=0)
    with pytest.raises(ValueError, match=_refused("test_on_batch")):
        model.test_on_batch(x, y)
    compiled = model.predict(x, verbose=0)
    _compiled(model, strategy, False)
    np.testing.assert_allclose(compiled, model.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    assert np.isfinite(model.evaluate(x, y, verbose=0)[0])  # the model is not left broken


def test_one_replica_evaluates_under_xla(new_strategy):
    """On one replica XLA has one device: ``evaluate`` under ``jit_compile=True`` runs and
    gives the value it gives without XLA (refused only where it fails)."""
    x, y = three_class_rows(10)
    strategy = new_strategy(["/cpu:0"])
    model = _compiled(softmax_regression("sgld", 10, strategy), strategy, True)
    got = model.evaluate(x, y, verbose=0)
    _compiled(model, strategy, False)
    np.testing.assert_allclose(got, model.evaluate(x, y, verbose=0), rtol=1e-6)


def test_an_ensembles_evaluate_refuses_jit_compile_on_several_replicas(new_strategy):
    """A PosteriorEnsemble made and compiled in the strategy's scope with
    ``jit_compile=True``: its ``evaluate`` and ``test_on_batch`` failed with TensorFlow's
    "Trying to access resource posterior_ensemble/members_0_kernel/replica_1 ...";
    its ``predict`` (its own XLA-compiled graph, run per replica) works."""
    x = inputs(12)
    y = np.arange(12) % 3
    member = tiny_member()
    sets = weight_sets(member, 2)
    strategy = new_strategy()
    with strategy.scope():
        ensemble = kb.PosteriorEnsemble(member, sets)
        ensemble.compile(loss=kb.likelihoods.PredictiveNLL(), jit_compile=True)
    owner = "PosteriorEnsemble.evaluate/test_on_batch"
    with pytest.raises(ValueError, match=_refused(owner)):
        ensemble.evaluate(x, y, verbose=0)
    with pytest.raises(ValueError, match=_refused(owner)):
        ensemble.test_on_batch(x, y)
    want = kb.PosteriorEnsemble(member, sets).predict(x, verbose=0)
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), want, rtol=1e-6, atol=1e-7)

