"""A sampled head on a frozen trunk: the store writes the frozen weights once
(``shared.npz``), the ensemble holds them once; both return every weight exactly."""

import os
import shutil
import threading

import keras
import numpy as np
import pytest

import keras_bnn as kb
from fit_helpers import (assert_samples_are, fit_collecting, head_sampled,
                         members_one_by_one, weight_sets_one_by_one)

N = 48
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
FROZEN = ("trunk", "trunk_bn")


def _model(freeze=True, seed=0):
    """4 → Dense(16) → BatchNormalization → Dense(3) head, under kb.bayesian; with
    ``freeze`` the trunk and its BatchNormalization (non-default statistics) are frozen."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(16, activation="relu", name="trunk")(inputs)
    hidden = keras.layers.BatchNormalization(name="trunk_bn")(hidden)
    model = keras.Model(inputs, keras.layers.Dense(3, name="head")(hidden))
    rng = np.random.default_rng(seed)
    bn = model.get_layer("trunk_bn")
    bn.moving_mean.assign(rng.normal(size=16).astype("float32"))
    bn.moving_variance.assign(rng.uniform(0.5, 2.0, size=16).astype("float32"))
    for name in FROZEN:
        model.get_layer(name).trainable = not freeze
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N, loss=LOSS)
    return bnn


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, 4)).astype("float32"), np.arange(N, dtype="int32") % 3


def _collect(model, path, epochs=3):
    store = kb.SampleStore(path)
    snapshots = fit_collecting(model, store, *_data(), epochs=epochs)
    assert len(store) == epochs
    return store, snapshots


def _indices(model, names):
    return [i for i, w in enumerate(model.weights) if w.path.split("/")[0] in names]


def _entries(path):
    with np.load(path) as data:
        return set(data.files)


@pytest.fixture(scope="module")
def frozen_run(tmp_path_factory):
    model = _model()
    store, snapshots = _collect(model, tmp_path_factory.mktemp("frozen") / "samples")
    return model, store, snapshots


def test_frozen_weights_are_written_once_and_read_back_exactly(frozen_run):
    model, store, snapshots = frozen_run
    frozen = _indices(model, FROZEN)
    head = _indices(model, ("head",))
    assert len(frozen) == 6 and len(model.non_trainable_weights) == 6
    assert _entries(os.path.join(store.path, "shared.npz")) == {
        "fingerprint", *(f"w{i}" for i in frozen)}
    for _, path in store._files():
        # The head's kernel and bias only, and which weights the shared file completes.
        assert {e for e in _entries(path) if e.startswith("w")} == {f"w{i}" for i in head}
        assert {"shared", "shared_digest"} <= _entries(path)
    assert_samples_are(store, snapshots)
    for i in frozen:  # frozen: every sample holds the values the trunk started with
        assert np.array_equal(store[0].weights[i], model.weights[i].numpy())
    rebuilt = store.build_model()
    assert [w.shape for w in rebuilt.weights] == [w.shape for w in model.weights]
    assert np.array_equal(store.snapshot()[-1].weights[frozen[0]], store[0].weights[frozen[0]])


def test_a_store_written_before_shared_files_still_reads_and_extends(frozen_run, tmp_path):
    model, store, snapshots = frozen_run
    old = tmp_path / "old"
    os.makedirs(old)
    shutil.copy(os.path.join(store.path, "store.json"), old)
    for position, (_, path) in enumerate(store._files()):  # the old format: every weight
        sample = store[position]
        with np.load(path) as data:
            np.savez(old / os.path.basename(path), metadata=data["metadata"],
                     fingerprint=data["fingerprint"],
                     **{f"w{i}": w for i, w in enumerate(sample.weights)})
    old_store = kb.SampleStore(old)
    assert_samples_are(old_store, snapshots)
    old_store.append(model, epoch=2)  # the new code extends it: the frozen weights once
    assert len(_entries(old / "shared.npz")) == 7
    assert_samples_are(old_store, [*snapshots, snapshots[2]])  # the model as at epoch 2


def test_changing_non_trainable_state_is_stored_exactly(tmp_path):
    model = _model(freeze=False)  # BatchNormalization's moving statistics move each step
    with pytest.warns(kb.StochasticLayerWarning, match="'trunk_bn'"):
        store, snapshots = _collect(model, tmp_path / "samples")
    moving = [i for i, w in enumerate(model.weights) if "moving" in w.path]
    assert len(moving) == len(model.non_trainable_weights) == 2
    # The first sample created the shared file; the later ones differ from it.
    files = [path for _, path in store._files()]
    assert not {f"w{i}" for i in moving} & _entries(files[0])
    assert all({f"w{i}" for i in moving} <= _entries(path) for path in files[1:])
    assert_samples_are(store, snapshots)


def test_concurrent_appenders_of_different_frozen_values_keep_their_own(tmp_path):
    models = [_model(seed=0), _model(seed=0)]
    bn = models[1].get_layer("trunk_bn")
    bn.moving_mean.assign(bn.moving_mean.numpy() + 1.0)  # another chain's frozen statistics
    store = kb.SampleStore(tmp_path / "samples")
    barrier = threading.Barrier(2)
    errors = []

    def append(chain):
        try:
            barrier.wait()
            for step in range(4):
                store.append(models[chain], chain=chain, step=step)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=append, args=(c,)) for c in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(store) == 8
    assert [name for name in os.listdir(store.path) if name.startswith("shared")] == [
        "shared.npz"]
    for sample in store:
        want = models[sample.metadata["chain"]].get_weights()
        assert all(got.tobytes() == w.tobytes() for got, w in zip(sample.weights, want))


@pytest.mark.parametrize("damage, says", [
    ("truncate", "shared weights file .*shared.npz is corrupt, truncated"),
    ("delete", "takes 6 weights from shared.npz, which is missing"),
    ("replace", "written against another shared.npz"),
    ("nan", "shared weights file .*shared.npz: w[0-9]+ holds non-finite"),
    ("shape", "shared weights file .*shared.npz does not match the store's architecture"),
    ("fingerprint", "shared weights file .*shared.npz was written by a model of another"),
    ("indices", "do not number the weights 0, 1, ... once each"),
])
def test_a_damaged_shared_file_or_entry_is_named(frozen_run, tmp_path, damage, says):
    _, store, _ = frozen_run
    copy = tmp_path / "copy"
    shutil.copytree(store.path, copy)
    shared = copy / "shared.npz"
    with np.load(shared) as data:
        entries = {name: data[name] for name in data.files}
    first = min(name for name in entries if name.startswith("w"))
    if damage == "truncate":
        shared.write_bytes(shared.read_bytes()[:200])
    elif damage == "delete":
        os.remove(shared)
    elif damage == "replace":
        np.savez(shared, **dict(entries, **{first: entries[first] + 1.0}))
    elif damage == "nan":
        np.savez(shared, **dict(entries, **{first: entries[first] * np.nan}))
    elif damage == "shape":
        np.savez(shared, **dict(entries, **{first: entries[first][:1]}))
    elif damage == "fingerprint":
        np.savez(shared, **dict(entries, fingerprint=np.array("0" * 64)))
    else:  # a sample naming a weight both held and taken from the shared file
        sample = copy / "sample-000000.npz"
        with np.load(sample) as data:
            held = {name: data[name] for name in data.files}
        np.savez(sample, **dict(held, shared=np.append(held["shared"], 6)))
    with pytest.raises(ValueError, match=says):
        kb.SampleStore(copy)[0]


# ------------------------------------------------------------------ the ensemble
def _variable_bytes(ensemble):
    return sum(keras.ops.convert_to_numpy(v).nbytes for v in ensemble.weights)


# Both sides run the same float32 ops on the same weights; only the order of a
# sum (16 terms) may differ: a few float32 ulps (1.2e-7) relative.
RTOL, ATOL = 1e-6, 1e-7


@pytest.mark.parametrize("member_loop", ["unroll", "map", "vectorized_map"])
def test_the_ensemble_holds_frozen_weights_once_and_predicts_as_its_members(
        frozen_run, member_loop):
    model, store, _ = frozen_run
    frozen = _indices(model, FROZEN)
    ensemble = kb.PosteriorEnsemble.from_store(store, member_loop=member_loop)
    assert ensemble.num_members == len(store) == 3
    assert ensemble._shared == tuple(frozen)
    assert {layer.name for layer in ensemble._trunk.value.layers[1:]} == set(FROZEN)
    sizes = [w.numpy().nbytes for w in model.weights]
    assert _variable_bytes(ensemble) == sum(
        size * (1 if i in frozen else 3) for i, size in enumerate(sizes))
    x, _ = _data()
    expected = members_one_by_one(store, x)
    np.testing.assert_allclose(ensemble.predict_members(x), expected, rtol=RTOL, atol=ATOL)
    stacked = kb.PosteriorEnsemble.from_store(store, member_loop=member_loop,
                                              shared_weights=())  # the old layout
    assert _variable_bytes(stacked) == 3 * sum(sizes)
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), stacked.predict(x, verbose=0),
                               rtol=RTOL, atol=ATOL)
    members = ensemble.member_weights()
    for j, sample in enumerate(store):
        assert all(np.array_equal(m[j], w) for m, w in zip(members, sample.weights))
    assert all(members[i].shape[0] == 3 and not members[i].flags.writeable for i in frozen)


def test_identical_members_and_a_wrong_shared_weights_argument(frozen_run):
    model, store, _ = frozen_run
    weights = store[0].weights
    same = kb.PosteriorEnsemble(store.build_model(), [weights, weights])
    assert same._shared == tuple(range(len(weights)))  # every weight held once
    x, _ = _data()
    np.testing.assert_allclose(same.predict_members(x), members_one_by_one(store, x)[[0, 0]],
                               rtol=RTOL, atol=ATOL)
    head = _indices(model, ("head",))[0]
    with pytest.raises(ValueError, match=r"`shared_weights` must list indices in \[0, 8\) of "
                                         rf"weights whose value is the same.*\[{head}\] are not"):
        kb.PosteriorEnsemble.from_store(store, shared_weights=[head])


def test_keras_round_trip_and_export_keep_one_copy(frozen_run, tmp_path):
    model, store, _ = frozen_run
    frozen = _indices(model, FROZEN)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    x, _ = _data()
    expected = ensemble.predict(x, verbose=0)
    ensemble.save(tmp_path / "e.keras")
    loaded = keras.saving.load_model(tmp_path / "e.keras")
    assert loaded._shared == tuple(frozen)
    assert _variable_bytes(loaded) == _variable_bytes(ensemble)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), expected)
    # A config saved before weights were held once stacks every weight, as then.
    config = ensemble.get_config()
    del config["shared_weights"]
    assert kb.PosteriorEnsemble.from_config(config)._shared == ()
    if keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf

    version = ensemble.export(tmp_path / "served")
    saved = tf.saved_model.load(version).signatures["serving_default"]
    served = saved(inputs=tf.constant(x))["probabilities"].numpy()
    np.testing.assert_allclose(served, expected, rtol=RTOL, atol=ATOL)
    shapes = [tuple(shape) for _, shape in tf.train.list_variables(
        os.path.join(version, "variables", "variables")) if len(shape)]
    for i in frozen:  # each frozen weight once, unstacked
        assert shapes.count(tuple(model.weights[i].shape)) >= 1
    assert (3, *model.weights[frozen[0]].shape) not in shapes


def _skip_model():
    """The input feeds both a frozen trunk and, beside it, the sampled head."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    trunk = keras.layers.Dense(8, activation="tanh", name="trunk", trainable=False)(inputs)
    return keras.Model(inputs, keras.layers.Add()([keras.layers.Dense(3, name="head")(trunk),
                                                   keras.layers.Dense(3, name="skip")(inputs)]))


def _ops_model():
    """keras.ops calls (operations without weights) in the trunk and after it."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    trunk = keras.ops.tanh(keras.layers.Dense(8, name="trunk", trainable=False)(inputs)) * 2.0
    both = keras.ops.concatenate([trunk, inputs], axis=-1)
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(both))


def _sequential_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((4,)),
                             keras.layers.Dense(8, activation="relu", trainable=False),
                             keras.layers.Dense(8, activation="relu", trainable=False),
                             keras.layers.Dense(3)])


@pytest.mark.parametrize("build, trunk_layers", [
    (_skip_model, 2), (_ops_model, 2), (_sequential_model, 3)])
@pytest.mark.parametrize("member_loop", ["unroll", "map", "vectorized_map"])
def test_the_frozen_trunk_runs_once_and_the_members_are_unchanged(build, trunk_layers,
                                                                   member_loop):
    model = build()
    sets = head_sampled(model)
    ensemble = kb.PosteriorEnsemble(model, sets, member_loop=member_loop)
    trunk = ensemble._trunk.value
    assert trunk is not None and len(trunk.layers) == trunk_layers  # input layer included
    assert not {id(w) for w in trunk.weights} & {id(w) for w in model.trainable_weights}
    x, _ = _data()
    np.testing.assert_allclose(ensemble.predict_members(x),
                               weight_sets_one_by_one(model, sets, x), rtol=RTOL, atol=ATOL)
