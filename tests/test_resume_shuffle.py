"""``BayesianModel.fit`` on shuffled arrays: each pass's order is keyed on (seed, step).

Keras shuffles arrays from the global random state: a run killed and
resumed from a ``keras.callbacks.BackupAndRestore`` backup trained on other
batches than the run never stopped, another chain (until 2026-11-29 only
``shuffle=False`` resumed the same chain). A resumed chain is compared with
the unbroken one bit for bit, under
``tf.config.experimental.enable_op_determinism()`` as ``tests/test_resume.py``'s
workers run (under MirroredStrategy, and across backends, to float round-off).
"""

import contextlib
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config

import keras_bnn as kb
from keras_bnn import priors
from test_exactly_once import _Kill

N, BATCH, EPOCHS, KILLED_AT = 64, 16, 4, 1  # 4 steps an epoch
SEED = 3
PACKAGE_ROOT = os.path.dirname(os.path.dirname(kb.__file__))  # the keras_bnn tested


@pytest.fixture(autouse=True)
def op_determinism():
    tf.config.experimental.enable_op_determinism()
    yield
    tf_config.disable_op_determinism()


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32"), rng.uniform(0.5, 1.5, N).astype("float32")


def _model(init=1, strategy=None, sampler=True):
    keras.utils.set_random_seed(init)  # Keras' own shuffle, on the code before: reproducible
    with strategy.scope() if strategy else contextlib.nullcontext():
        inputs = keras.Input((3,))
        outputs = keras.layers.Dense(2, kernel_regularizer=priors.Normal(0, 1.0))(inputs)
        model = kb.BayesianModel(inputs, outputs)
        chosen = (dict(sampler=kb.samplers.SGHMC(step_size=1e-2, seed=SEED)) if sampler
                  else dict(optimizer="sgd"))
        model.compile(train_size=N, loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True), **chosen)
    rng = np.random.default_rng(init)  # the same on both backends
    model.set_weights([rng.normal(size=w.shape).astype("float32") for w in model.weights])
    return model


def _fit(model, callbacks=(), epochs=EPOCHS, killed_at=None, **kwargs):
    del killed_at  # a variant's epoch of the kill: _resumed's
    x, y, _ = _data()
    arguments = {"batch_size": BATCH, "shuffle": True, **kwargs}
    model.fit(x, y, epochs=epochs, verbose=0, callbacks=list(callbacks), **arguments)
    return model.get_weights()


def _resumed(tmp_path, strategy=None, killed_at=KILLED_AT, **kwargs):
    """Killed after epoch ``killed_at``'s backup, then resumed by a model of another init."""
    backup = str(tmp_path / "backup")
    with pytest.raises(KeyboardInterrupt):
        _fit(_model(strategy=strategy), [keras.callbacks.BackupAndRestore(backup),
                                         _Kill(killed_at)], **kwargs)
    return _fit(_model(init=7, strategy=strategy), [keras.callbacks.BackupAndRestore(backup)],
                **kwargs)


def _assert_equal(got, expected):
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


_, _, WEIGHTS = _data()
VARIANTS = {
    "shuffle": {},
    # validation_split's rows (the arrays' last) kept out of the shuffle
    "split_class_weight": {"validation_split": 0.25, "class_weight": {0: 0.8, 1: 1.25}},
    # 2 of a pass's 4 batches an epoch: the passes begin at epochs 0 and 2 (the
    # kill, after epoch 1, is at the end of a pass: Keras resumes with a new one)
    "sample_weight_short_epochs": {"sample_weight": WEIGHTS, "steps_per_epoch": 2},
    # killed mid-pass, after epoch 0: the resumed fit begins at the pass's third
    # batch, its first iterator runs on into the next pass (Keras resets it 4
    # batches later, at the end of epoch 2) and epoch 3's begins mid-pass too
    "mid_pass": {"steps_per_epoch": 2, "killed_at": 0},
    # epochs of 3, 1 (cut short by Keras at the pass's end), 3, 1: killed
    # after epoch 0, the resumed fit begins at the pass's last batch and Keras
    # cuts epoch 1 short where that pass ends, as in the fit never stopped
    "mid_pass_cut_epochs": {"steps_per_epoch": 3, "killed_at": 0},
}


@pytest.mark.parametrize("variant", [  # the default suite's 20 minutes: 10 s one, slow
    pytest.param(name, marks=[pytest.mark.slow] if name == "split_class_weight" else [])
    for name in sorted(VARIANTS)])
def test_a_killed_and_resumed_shuffled_fit_is_the_unbroken_chain(tmp_path, variant):
    """On the code before, the resumed weights differed from the unbroken
    run's (Keras' shuffle from the global random state) by 2.2e-3, 2.9e-3 and
    1.4e-3 at most (shuffle, split_class_weight, sample_weight_short_epochs);
    before a resumed fit continued mid-pass (a new pass at the resumed epoch,
    and Keras' epochs of a whole pass each until its end) by 4.7e-3 and 5.0e-2
    (mid_pass, mid_pass_cut_epochs)."""
    kwargs = VARIANTS[variant]
    unbroken = _fit(_model(), **kwargs)
    _assert_equal(_resumed(tmp_path, **kwargs), unbroken)


@pytest.mark.parametrize("variant", ["shuffle", "mid_pass", "mid_pass_cut_epochs"])
def test_a_fit_continued_at_initial_epoch_is_the_unbroken_chain(variant):
    """The same model fit again from ``initial_epoch`` (no backup: the model keeps its
    step counter) trains the chain of one fit, mid-pass too (stop 50 left this
    unchecked)."""
    kwargs = {key: value for key, value in VARIANTS[variant].items() if key != "killed_at"}
    stop = VARIANTS[variant].get("killed_at", KILLED_AT) + 1
    model = _model()
    _fit(model, epochs=stop, **kwargs)
    _assert_equal(_fit(model, initial_epoch=stop, **kwargs), _fit(_model(), **kwargs))


@pytest.mark.parametrize("shuffle", [True, "batch"])
def test_each_pass_is_the_keyed_order_of_the_arrays(shuffle):
    """Epoch e trains on the arrays in ``pass_order(seed, 3e)``: the chain of
    one shuffled fit equals that of epoch-long fits on the arrays put in that
    order (shuffle=False); validation_split's rows are the arrays' last.
    (Keras' in-batch shuffle, ``"batch"``, only reorders each batch's sum: a
    resume on the code before differed from the unbroken chain in round-off
    at most, 0 or 1.5e-8 measured, so this test is the one that checks it.)"""
    from keras_bnn import array_order  # here: the resume tests run on the code before it
    x, y, _ = _data()
    kept = 48  # validation_split=0.25 of 64, from the end
    shuffled = _model()
    history = shuffled.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, shuffle=shuffle,
                           validation_split=0.25).history
    ordered = _model()
    val_nll = []
    for epoch in range(EPOCHS):
        order = array_order.pass_order(SEED, 3 * epoch, kept, BATCH, shuffle)  # 3 steps an epoch
        logs = ordered.fit(x[:kept][order], y[:kept][order], batch_size=BATCH, epochs=1,
                           verbose=0, shuffle=False, validation_data=(x[kept:], y[kept:]))
        val_nll += logs.history["val_nll"]
    _assert_equal(shuffled.get_weights(), ordered.get_weights())
    assert history["val_nll"] == val_nll


def test_pass_order_is_a_pure_function_of_seed_and_step():
    """A permutation, the same for the same key, another for another seed or
    step; ``"batch"`` keeps every example in its batch."""
    from keras_bnn import array_order  # here: the resume tests run on the code before it
    order = array_order.pass_order(3, 8, 50, 16, True)
    np.testing.assert_array_equal(np.sort(order), np.arange(50))
    np.testing.assert_array_equal(order, array_order.pass_order(3, 8, 50, 16, True))
    assert not np.array_equal(order, array_order.pass_order(3, 12, 50, 16, True))
    assert not np.array_equal(order, array_order.pass_order(4, 8, 50, 16, True))
    batch = array_order.pass_order(3, 8, 50, 16, "batch")
    np.testing.assert_array_equal(batch // 16, np.arange(50) // 16)
    assert not np.array_equal(batch, np.arange(50))


@pytest.mark.parametrize("steps_per_epoch", [2, 3, 4, 5])
@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_pass_position_is_where_keras_begins_each_epoch_in_its_pass(
        steps_per_epoch, steps_per_execution):
    """Keras' epoch iterator over a 4-batch pass: each epoch begins at the
    batch ``pass_position`` says, and ``spans`` is whether no epoch is cut
    short at a pass's end."""
    from keras.src.trainers.epoch_iterator import EpochIterator

    from keras_bnn import array_order  # here: the resume tests run on the code before it
    x, _, _ = _data()
    iterator = EpochIterator(x, batch_size=BATCH, steps_per_epoch=steps_per_epoch,
                             steps_per_execution=steps_per_execution)
    executions = []
    for epoch in range(8):
        position = iterator._steps_seen if iterator._current_iterator is not None else 0
        assert array_order.pass_position(epoch, N // BATCH, steps_per_epoch,
                                         steps_per_execution)[0] == position
        executions.append(sum(1 for _ in iterator))
    full = -(-steps_per_epoch // steps_per_execution)  # an epoch's executions, uncut
    spans = array_order.pass_position(0, N // BATCH, steps_per_epoch, steps_per_execution)[1]
    assert spans == (all(count == full for count in executions) and full * steps_per_execution
                     < N // BATCH)


def test_unshuffled_and_optimizer_fits_keep_keras_arrays():
    """shuffle=False, and the SGD baseline (no sampler, no seed), are Keras' own."""
    from keras_bnn import array_order  # here: the resume tests run on the code before it
    x, y, _ = _data()
    arguments = {"x": x, "y": y, "shuffle": False}
    assert array_order.keyed_arrays(_model(), arguments) is arguments
    arguments = {"x": x, "y": y, "shuffle": True}
    assert array_order.keyed_arrays(_model(sampler=False), arguments) is arguments
    keyed = array_order.keyed_arrays(_model(), arguments)
    assert isinstance(keyed["x"], array_order.KeyedArrays) and keyed["y"] is None


@pytest.mark.slow  # 6-18 s each
@pytest.mark.parametrize("variant", ["shuffle", "sample_weight_short_epochs", "mid_pass"])
def test_under_mirrored_strategy_the_resumed_chain_is_the_single_device_one(
        tmp_path, new_strategy, variant):
    """Two replicas read the same keyed order: the resumed chain under the
    strategy is the single-device chain (to float round-off: the replicas'
    gradients are summed)."""
    unbroken = _fit(_model(), **VARIANTS[variant])
    resumed = _resumed(tmp_path, strategy=new_strategy(), **VARIANTS[variant])
    for a, b in zip(resumed, unbroken, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


JAX_RUN = """
import pathlib, sys
import numpy as np
import test_resume_shuffle as t
out = pathlib.Path(sys.argv[1])
unbroken = t._fit(t._model(), **t.VARIANTS[sys.argv[2]])
resumed = t._resumed(out, **t.VARIANTS[sys.argv[2]])
np.savez(out / "chains.npz", *unbroken, *resumed)
"""


@pytest.mark.slow  # a JAX process: about 20 s each
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_under_jax_the_resumed_chain_is_the_unbroken_one_and_tensorflows(tmp_path, variant):
    """JAX draws the same keyed orders (NumPy's) and the same noise: its
    resumed chain is its unbroken one bit for bit, and TensorFlow's to
    float round-off."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([PACKAGE_ROOT, os.path.dirname(__file__)]))
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run([sys.executable, "-c", JAX_RUN, str(tmp_path), variant], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(tmp_path / "chains.npz") as saved:
        chains = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    unbroken, resumed = chains[:len(chains) // 2], chains[len(chains) // 2:]
    _assert_equal(resumed, unbroken)
    for a, b in zip(unbroken, _fit(_model(), **VARIANTS[variant]), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
