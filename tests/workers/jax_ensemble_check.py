"""The ensemble/store/export modules under KERAS_BACKEND=jax; prints RESULT <json>.

Usage: python jax_ensemble_check.py OUT_DIR (the test sets KERAS_BACKEND=jax).

1. Imports keras_bnn's serving-path modules one by one *without* the package
   ``__init__`` (which imports every submodule), recording that none of them
   imports TensorFlow.
2. In that TensorFlow-free process, builds PosteriorEnsembles of a plain
   Keras MLP (Dense 5-8-relu-units) for every likelihood and member loop
   from given weight sets, recording that this imports no TensorFlow.
3. Imports the remaining modules (plots, runs, experiment), recording which
   keras_bnn module, if any, imports TensorFlow first.
4. Writes the weight sets to a SampleStore under JAX and rebuilds the
   ensemble from it (Keras' own serialisation, which the store uses for the
   architecture, imports TensorFlow lazily when it is installed:
   keras/src/saving/serialization_lib.py checks ``tf.available``).
The predictions go to OUT_DIR/predictions.npz for the test's numpy
reference.
"""

import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
import types

OUT_DIR = sys.argv[1]
SERVING_PATH = ("durable", "shared_weights", "store", "runs.rundir", "export",
                "ensemble_weights", "ensemble", "serving", "predictive_checks", "cli")
OTHERS = ("plots", "runs.config", "runs.build", "runs.training", "runs.evaluation",
          "runs.sweeps", "experiment")
first_import = {}


class _WatchTensorFlow(importlib.abc.MetaPathFinder):
    """Records the innermost keras_bnn module on the stack when TF is first imported."""

    def find_spec(self, name, path, target=None):
        if name == "tensorflow" and not first_import:
            frames = [frame.f_globals.get("__name__", "") for frame, _ in
                      traceback.walk_stack(None)]
            first_import["importer"] = next(
                (n for n in frames if n.startswith("keras_bnn")), None)
        return None


sys.meta_path.insert(0, _WatchTensorFlow())
package = types.ModuleType("keras_bnn")
package.__path__ = list(importlib.util.find_spec("keras_bnn").submodule_search_locations)
sys.modules["keras_bnn"] = package  # the submodules load without the package __init__

result = {"tensorflow_free": []}


def import_all(modules):
    for module in modules:
        importlib.import_module(f"keras_bnn.{module}")
        if "tensorflow" in sys.modules:
            first_import.setdefault("while_importing", f"keras_bnn.{module}")
            return
        result["tensorflow_free"].append(f"keras_bnn.{module}")


import_all(SERVING_PATH)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bnn import ensemble as ensemble_lib  # noqa: E402
from keras_bnn.store import SampleStore  # noqa: E402

assert keras.backend.backend() == "jax", keras.backend.backend()
UNITS = {"categorical": 3, "bernoulli": 1, "gaussian": 4}
MEMBERS, EXAMPLES = 4, 9
rng = np.random.default_rng(0)
x = rng.normal(size=(EXAMPLES, 5)).astype("float32")
x[6, 2] = np.nan  # a non-finite row must give NaN, not a confident answer
saved = {"x": x}


def member(units):
    """A frozen Dense(8) trunk (the same weights in every set: stored and held
    once) under a Dense(units) head."""
    inputs = keras.Input((5,))
    hidden = keras.layers.Dense(8, activation="relu", trainable=False)(inputs)
    return keras.Model(inputs, keras.layers.Dense(units)(hidden))


models, weight_sets = {}, {}
for likelihood, units in UNITS.items():
    model = models[likelihood] = member(units)
    sets = weight_sets[likelihood] = [
        [rng.normal(size=w.shape).astype("float32") for w in model.weights]
        for _ in range(MEMBERS)]
    for weights in sets:
        weights[:2] = sets[0][:2]  # the frozen trunk
    for j in range(len(sets[0])):
        saved[f"{likelihood}/w{j}"] = np.stack([s[j] for s in sets])
    for loop in ensemble_lib.MEMBER_LOOPS:
        ensemble = ensemble_lib.PosteriorEnsemble(model, sets, likelihood=likelihood,
                                                  member_loop=loop)
        key = f"{likelihood}/{loop}"
        result[f"{key}/shared"] = list(ensemble._shared)
        saved[f"{key}/call"] = keras.ops.convert_to_numpy(ensemble(x))
        saved[f"{key}/predict"] = ensemble.predict(x, batch_size=4, verbose=0)
        saved[f"{key}/members"] = ensemble.predict_members(x, batch_size=4)
        for name, value in ensemble.predict_uncertainty(x, batch_size=4).items():
            saved[f"{key}/summary/{name}"] = value
result["tensorflow_imported_by_the_math"] = "tensorflow" in sys.modules
import_all(OTHERS)
result["tensorflow_first_import"] = first_import or None

for likelihood, model in models.items():
    sets = weight_sets[likelihood]
    store = SampleStore(os.path.join(OUT_DIR, f"store-{likelihood}"))
    for step, weights in enumerate(sets):
        model.set_weights(weights)
        store.append(model, chain=0, step=step)
    with np.load(os.path.join(store.path, "sample-000001.npz")) as data:
        result[f"{likelihood}/sample_entries"] = sorted(data.files)
    from_store = ensemble_lib.PosteriorEnsemble.from_store(store, likelihood=likelihood)
    result[f"{likelihood}/from_store_shared"] = list(from_store._shared)
    result[f"{likelihood}/from_store_loop"] = from_store.loop_used  # the default's
    saved[f"{likelihood}/from_store"] = from_store.predict(x, batch_size=4, verbose=0)
    from_store.compile(jit_compile=False)  # Keras' predict step runs JAX op by op
    saved[f"{likelihood}/eager"] = from_store.predict(x, batch_size=4, verbose=0)
    result[f"views_{likelihood}"] = sorted(
        [owner, jit, view.value.jit_compile] for (owner, jit), view in from_store._views.items())
    try:
        from_store.export(os.path.join(OUT_DIR, "saved_models", likelihood))
        result[f"export_{likelihood}"] = "exported"
    except NotImplementedError as error:
        result[f"export_{likelihood}"] = str(error)

np.savez(os.path.join(OUT_DIR, "predictions.npz"), **saved)
print("RESULT " + json.dumps(result))
