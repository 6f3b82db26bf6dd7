"""A frozen Sequential backbone under a sampled head, under KERAS_BACKEND=jax
(tests/test_transfer_learning.py); prints RESULT <json>.

Usage: python jax_transfer_check.py OUT_DIR (the test sets KERAS_BACKEND=jax).

kb.bayesian → fit with SGLD and CollectSamples → the store's shared file →
PosteriorEnsemble.from_store (its trunk) against the members one by one →
the ensemble's .keras round trip.
"""

import json
import os
import sys

import keras
import numpy as np

import keras_bnn as kb

N = 32


def main():
    out = sys.argv[1]
    keras.utils.set_random_seed(0)
    backbone = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                                 keras.layers.BatchNormalization(name="bb_bn")],
                                name="backbone")
    backbone.get_layer("bb_bn").moving_mean.assign(np.linspace(-1, 1, 8).astype("float32"))
    backbone.trainable = False
    inputs = keras.Input((6,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3)(backbone(inputs))))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(N, 6)).astype("float32"), np.arange(N) % 3
    store = kb.SampleStore(os.path.join(out, "samples"))
    model.fit(x, y, batch_size=16, epochs=3, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    with np.load(os.path.join(store.path, "shared.npz")) as data:
        shared_entries = sorted(data.files)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    member = store.build_model()
    one_by_one = []
    for sample in store:
        member.set_weights(sample.weights)
        one_by_one.append(keras.ops.convert_to_numpy(keras.ops.softmax(member(x))))
    members = keras.ops.convert_to_numpy(ensemble.predict_members(x))
    ensemble.save(os.path.join(out, "e.keras"))
    loaded = keras.saving.load_model(os.path.join(out, "e.keras"))
    result = {
        "backend": keras.backend.backend(),
        "samples": len(store),
        "shared_entries": shared_entries,
        "trunk": [layer.name for layer in ensemble._trunk.value.layers[1:]],
        "member_difference": float(np.abs(members - np.array(one_by_one)).max()),
        "reload_difference": float(np.abs(keras.ops.convert_to_numpy(
            loaded.predict(x, verbose=0)) - ensemble.predict(x, verbose=0)).max()),
        "reloaded_trunk": loaded._trunk.value is not None,
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
