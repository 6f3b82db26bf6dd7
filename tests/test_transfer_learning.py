"""Transfer learning as users write it: a pretrained backbone (a Functional or
Sequential keras.Model, frozen) used as one layer under a sampled head, through
kb.bayesian, fit, the store's shared file, the ensemble's trunk, .keras files
and the SavedModel export; frozen layers that are not a prefix; unfreezing
into the same store; the shared file under concurrent and killed processes."""

import json
import os
import subprocess
import sys
import time
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from fit_helpers import (assert_samples_are, fit_collecting, head_sampled,
                         members_one_by_one, weight_sets_one_by_one)

N = 32
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
WORKER = os.path.join(os.path.dirname(__file__), "workers", "frozen_appender.py")
# Both sides run the same float32 ops on the same weights; only the order of a
# sum (at most 16 terms) may differ: a few float32 ulps (1.2e-7) relative.
RTOL, ATOL = 1e-6, 1e-7


def _backbone(kind, batch_norm):
    """A 'pretrained' 6 → Dense(8) [→ BatchNormalization of non-default
    statistics] backbone, a Functional or Sequential model, frozen."""
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(8, activation="relu", name="bb_dense")]
    if batch_norm:
        layers.append(keras.layers.BatchNormalization(name="bb_bn"))
    if kind == "sequential":
        backbone = keras.Sequential([keras.Input((6,)), *layers], name="backbone")
    else:
        inputs = hidden = keras.Input((6,))
        for layer in layers:
            hidden = layer(hidden)
        backbone = keras.Model(inputs, hidden, name="backbone")
    if batch_norm:
        rng = np.random.default_rng(0)
        backbone.get_layer("bb_bn").moving_mean.assign(rng.normal(size=8).astype("float32"))
        backbone.get_layer("bb_bn").moving_variance.assign(
            rng.uniform(0.5, 2.0, size=8).astype("float32"))
    backbone.trainable = False
    return backbone


def _compile(model, seed=0):
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=seed), train_size=N, loss=LOSS)
    return model


def _transfer_model(kind, batch_norm=False, backbone=None):
    """``backbone(inputs)`` → Dense(3) head, under kb.bayesian (which gives the
    weights trainable then their priors), compiled with SGLD."""
    backbone = backbone or _backbone(kind, batch_norm)
    inputs = keras.Input((6,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3, name="head")(
        backbone(inputs))))
    return _compile(model)


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, 6)).astype("float32"), np.arange(N, dtype="int32") % 3


def _fit(model, store, epochs=3):
    return fit_collecting(model, store, *_data(), epochs=epochs)


@pytest.mark.parametrize("kind, batch_norm", [  # two in the default suite (its 20 minutes)
    ("functional", False), pytest.param("functional", True, marks=pytest.mark.slow),
    pytest.param("sequential", False, marks=pytest.mark.slow), ("sequential", True)])
def test_a_frozen_backbone_model_as_one_layer_end_to_end(tmp_path, kind, batch_norm):
    # Keras' Sequential.from_config drops the Sequential's own trainable=False:
    # the store could not rebuild its model ("does not match its fingerprint").
    model = _transfer_model(kind, batch_norm)
    store = kb.SampleStore(tmp_path / "samples")
    assert_samples_are(store, _fit(model, store))
    backbone = {id(w) for w in model.get_layer("backbone").weights}
    frozen = [f"w{i}" for i, w in enumerate(model.weights) if id(w) in backbone]
    assert len(frozen) == (6 if batch_norm else 2)
    with np.load(os.path.join(store.path, "shared.npz")) as data:
        assert set(data.files) == {"fingerprint", *frozen}
    rebuilt = store.build_model()
    assert not rebuilt.get_layer("backbone").trainable
    ensemble = kb.PosteriorEnsemble.from_store(store)
    assert [layer.name for layer in ensemble._trunk.value.layers[1:]] == ["backbone"]
    x, _ = _data()
    expected = ensemble.predict(x, verbose=0)
    np.testing.assert_allclose(ensemble.predict_members(x), members_one_by_one(store, x),
                               rtol=RTOL, atol=ATOL)
    ensemble.save(tmp_path / "e.keras")
    loaded = keras.saving.load_model(tmp_path / "e.keras")
    assert not loaded._member.value.get_layer("backbone").trainable
    assert loaded._trunk.value is not None
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), expected)
    if kind != "sequential" or not batch_norm or keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf

    served = tf.saved_model.load(ensemble.export(tmp_path / "served")).signatures[
        "serving_default"](inputs=tf.constant(x))["probabilities"].numpy()
    np.testing.assert_allclose(served, expected, rtol=RTOL, atol=ATOL)


def _trainable_priors(model):
    return [(tuple(v.shape), keras.saving.serialize_keras_object(v.regularizer))
            for v in model.trainable_variables]


@pytest.mark.parametrize("unfreeze_inner", [False, True])
def test_a_reloaded_model_keeps_its_frozen_sequential_and_appends_to_its_store(
        tmp_path, unfreeze_inner):
    # Reloaded, the backbone was trainable again: the run's own store refused
    # it ("holds samples of another architecture ... trainable=False in the
    # store, True in the model").
    backbone = _backbone("sequential", batch_norm=False)
    backbone.get_layer("bb_dense").trainable = unfreeze_inner  # fine-tuned in a frozen one
    model = _transfer_model("sequential", backbone=backbone)
    store = kb.SampleStore(tmp_path / "samples")
    snapshots = _fit(model, store, epochs=2)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    backbone = loaded.get_layer("backbone")
    assert not backbone.trainable
    assert backbone.get_layer("bb_dense").trainable == unfreeze_inner
    assert _trainable_priors(loaded) == _trainable_priors(model)
    assert len(loaded.trainable_variables) == (4 if unfreeze_inner else 2)
    np.testing.assert_allclose([float(v) for v in loaded.losses],
                               [float(v) for v in model.losses], rtol=1e-6)
    snapshots += _fit(loaded, store, epochs=1)  # the same store, one more sample
    assert_samples_are(store, snapshots)


def _frozen_used_in_and_after_the_trunk():
    """One frozen Dense called on the input and again after the sampled layer."""
    inputs = keras.Input((4,))
    frozen = keras.layers.Dense(4, name="frozen", trainable=False)
    hidden = keras.layers.Dense(4, name="sampled")(frozen(inputs))
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(frozen(hidden))), None


def _frozen_model_used_in_and_after_the_trunk():
    """A frozen sub-model called on the input and again on sampled features."""
    backbone_inputs = keras.Input((4,))
    backbone = keras.Model(backbone_inputs, keras.layers.Dense(4)(backbone_inputs),
                           name="backbone")
    backbone.trainable = False
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(4, name="sampled")(backbone(inputs))
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(backbone(hidden))), None


def _shared_layer_after_a_frozen_prefix():
    """A frozen prefix, then the shared frozen layer of the case above: the
    prefix is the trunk, the shared layer runs per member."""
    inputs = keras.Input((4,))
    prefix = keras.layers.Dense(4, name="prefix", trainable=False)(inputs)
    frozen = keras.layers.Dense(4, name="frozen", trainable=False)
    hidden = keras.layers.Dense(4, name="sampled")(frozen(prefix))
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(frozen(hidden))), ["prefix"]


def _frozen_feeding_two_heads_and_a_skip():
    """A frozen layer whose output feeds two sampled heads and, as a skip, their sum."""
    inputs = keras.Input((4,))
    frozen = keras.layers.Dense(3, name="frozen", trainable=False)(inputs)
    heads = [keras.layers.Dense(3, name=f"head{i}")(frozen) for i in range(2)]
    return keras.Model(inputs, keras.layers.Add()([*heads, frozen])), ["frozen"]


def _frozen_after_a_sampled_layer():
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(4, name="sampled")(inputs)
    hidden = keras.layers.Dense(4, name="frozen", trainable=False)(hidden)
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(hidden)), None


@pytest.mark.parametrize("build", [
    _frozen_used_in_and_after_the_trunk, _frozen_model_used_in_and_after_the_trunk,
    _shared_layer_after_a_frozen_prefix, _frozen_feeding_two_heads_and_a_skip,
    _frozen_after_a_sampled_layer])
def test_frozen_layers_that_are_not_a_prefix_keep_the_ensemble_exact(build):
    # A frozen layer called both in the trunk and after a sampled layer made
    # the constructor fail ("Output with path `0` is not connected to `inputs`").
    keras.utils.set_random_seed(0)
    model, trunk = build()
    sets = head_sampled(model)
    ensemble = kb.PosteriorEnsemble(model, sets, member_loop="vectorized_map")
    split = ensemble._trunk.value  # None: the whole member runs per member
    assert (split and [layer.name for layer in split.layers[1:]]) == trunk
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    np.testing.assert_allclose(ensemble.predict_members(x),
                               weight_sets_one_by_one(model, sets, x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("start_frozen", [True, False])
def test_unfreezing_or_freezing_into_the_same_store_is_refused_and_the_store_kept(
        tmp_path, start_frozen):
    # The trainable flags are part of the store's architecture: samples whose
    # backbone moves and samples whose backbone is the shared file's are not
    # one posterior. The refusal names the flag; the store keeps its samples.
    backbone = _backbone("functional", batch_norm=True)
    backbone.trainable = True  # for kb.bayesian to give every weight its prior
    model = _transfer_model("functional", backbone=backbone)
    backbone.trainable = not start_frozen
    _compile(model)
    store = kb.SampleStore(tmp_path / "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.StochasticLayerWarning)  # a trainable BN
        snapshots = _fit(model, store, epochs=2)
        backbone.trainable = start_frozen
        _compile(model, seed=1)
        with pytest.raises(ValueError) as refused:
            _fit(model, store, epochs=1)
    # The first nested layer that differs, not the backbone's whole config (4 kB).
    assert f"another architecture (layer 1 (Functional): its layer 1 (Dense): trainable=" \
           f"{not start_frozen} in the store, {start_frozen} in the model)" in str(refused.value)
    assert len(str(refused.value)) < 300
    assert_samples_are(store, snapshots)
    x, _ = _data()
    np.testing.assert_allclose(kb.PosteriorEnsemble.from_store(store).predict_members(x),
                               members_one_by_one(store, x), rtol=RTOL, atol=ATOL)


@pytest.mark.slow  # ~17 s on 2 cores: MobileNetV2's 262 weights, its export
def test_a_keras_applications_backbone_without_weights(tmp_path):
    keras.utils.set_random_seed(0)
    backbone = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3),
                                              include_top=False, alpha=0.35)
    backbone.trainable = False
    inputs = keras.Input((32, 32, 3))
    pooled = keras.layers.GlobalAveragePooling2D(name="pool")(backbone(inputs))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(4, name="head")(pooled)))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=16, loss=LOSS)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 32, 32, 3)).astype("float32"), np.arange(16) % 4
    store = kb.SampleStore(tmp_path / "samples")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    head_bytes = sum(w.numpy().nbytes for w in model.trainable_weights)  # 20,496
    shared = len(model.non_trainable_weights)
    for _, path in store._files():  # the head, the shared indices (int64), and < 4 kB of
        # zip and .npy headers, metadata and digests (six entries): never the backbone
        assert os.path.getsize(path) < head_bytes + 8 * shared + 4096
    ensemble = kb.PosteriorEnsemble.from_store(store)
    assert len(ensemble._shared) == shared == 260
    assert [layer.name for layer in ensemble._trunk.value.layers[1:]] == [backbone.name, "pool"]
    expected = ensemble.predict(x, verbose=0)
    np.testing.assert_allclose(ensemble.predict_members(x), members_one_by_one(store, x),
                               rtol=1e-5, atol=1e-6)
    if keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf

    served = tf.saved_model.load(ensemble.export(tmp_path / "served")).signatures[
        "serving_default"](inputs=tf.constant(x))["probabilities"].numpy()
    np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------- processes and kills
def _worker_env(**variables):
    """The environment of a worker process (PYTHONPATH from tests/conftest.py)."""
    return dict(os.environ, **variables)


def _appenders(path, tags, count, die=False):
    env = _worker_env()
    go = os.path.join(os.path.dirname(path), "go")
    processes = [subprocess.Popen(
        [sys.executable, WORKER, str(path), str(tag), str(count), go,
         *(["die-after-shared"] if die else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for tag in tags]
    time.sleep(0.5)
    open(go, "w").close()
    return [(p.wait(timeout=240), p.stderr.read()) for p in processes]


def _expected(directory, tag, step):
    with np.load(os.path.join(directory, f"expected-{tag}-{step}.npz")) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def _assert_each_sample_is_its_writers(store, directory):
    for sample in store:
        want = _expected(directory, sample.metadata["chain"], sample.metadata["step"])
        assert [w.tobytes() for w in sample.weights] == [w.tobytes() for w in want]


@pytest.mark.slow  # three processes importing TensorFlow
def test_concurrent_processes_of_different_frozen_values_share_one_file(tmp_path):
    path = tmp_path / "samples"
    results = _appenders(path, tags=(1, 2, 3), count=2)
    assert all(code == 0 for code, _ in results), results
    store = kb.SampleStore(path)
    assert len(store) == 6
    assert sorted(os.listdir(path)) == sorted(
        ["store.json", "shared.npz", *(f"sample-{i:06d}.npz" for i in range(6))])
    _assert_each_sample_is_its_writers(store, tmp_path)
    # One writer's frozen values are in the shared file. The others hold the head
    # and the frozen weights whose bytes differ from it (the trunk's kernel and
    # moving mean), and take the rest (zero bias, gamma, beta, moving variance).
    held = [len([e for e in np.load(p).files if e.startswith("w")]) for _, p in store._files()]
    assert sorted(held) == [2, 2, 4, 4, 4, 4]
    snapshot = store.snapshot()
    assert [s.metadata for s in snapshot] == [s.metadata for s in store]
    assert store.find(chain=2, step=1) is not None and store.find(chain=4, step=0) is None


@pytest.mark.slow  # two processes importing TensorFlow
def test_a_kill_between_the_shared_file_and_the_first_sample(tmp_path):
    path = tmp_path / "samples"
    [(code, error)] = _appenders(path, tags=(1,), count=1, die=True)
    assert code == 17, error
    assert sorted(os.listdir(path)) == ["shared.npz", "store.json"]
    store = kb.SampleStore(path)
    assert len(store) == 0
    # Another run, of other frozen values, appends: its samples hold their own.
    [(code, error)] = _appenders(path, tags=(2,), count=2)
    assert code == 0, error
    assert len(store) == 2
    _assert_each_sample_is_its_writers(store, tmp_path)
    # And one of the dead writer's values takes its frozen weights from the file.
    [(code, error)] = _appenders(path, tags=(1,), count=1)
    assert code == 0, error
    _assert_each_sample_is_its_writers(store, tmp_path)
    assert "shared" in np.load(store._files()[-1][1]).files


@pytest.mark.slow  # a JAX process: ~10 s
def test_a_frozen_sequential_backbone_under_jax(tmp_path):
    pytest.importorskip("jax")
    env = _worker_env(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    worker = os.path.join(os.path.dirname(__file__), "workers", "jax_transfer_check.py")
    done = subprocess.run([sys.executable, worker, str(tmp_path)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["backend"] == "jax" and result["samples"] == 3
    assert result["shared_entries"] == ["fingerprint", *(f"w{i}" for i in range(6))]
    assert result["trunk"] == ["backbone"] and result["reloaded_trunk"]
    # Probabilities ≤ 1 from the same float32 ops, summed in another order: a few ulps.
    assert result["member_difference"] <= 1e-6
    assert result["reload_difference"] == 0.0
