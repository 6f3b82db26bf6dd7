"""Keras' own workflow around ``fit`` under KERAS_BACKEND=jax; prints RESULT <json>.

Usage: python jax_keras_workflow_check.py OUT_DIR (the test sets KERAS_BACKEND=jax).

Each check runs what a Keras user writes (stock callbacks, fit's arguments
and input pipelines, ``kb.bayesian`` on the three kinds of Keras model, the
ensemble on those inputs) and records what happened: a value, or the
error's or warnings' class and message, for tests/test_jax_keras_workflow.py
to judge.
"""

import json
import os
import sys
import time
import traceback
import warnings

import keras
import numpy as np
import tensorflow as tf

import keras_bnn as kb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
import fit_helpers  # noqa: E402

assert keras.backend.backend() == "jax", keras.backend.backend()
OUT_DIR = sys.argv[1]
N = 32
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
SAMPLERS = {
    "atmc": lambda: kb.samplers.ATMC(warmup_steps=4),
    "sghmc": lambda: kb.samplers.SGHMC(warmup_steps=4),
    "sgld": lambda: kb.samplers.SGLD(warmup_steps=4),
    "sgnht": lambda: kb.samplers.SGNHT(warmup_steps=4),
    "hmc": lambda: kb.samplers.HMC(step_size=0.01, num_leapfrog_steps=2, num_adaptation_steps=3),
}
RESULT = {}


def record(name):
    """Runs the decorated check now; stores its value, or its error, under ``name``."""
    def run(check):
        began = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = {"value": check()}
            except Exception as error:  # recorded for the test to judge
                value = {"error": type(error).__name__, "message": str(error)[:600],
                         "trace": traceback.format_exc()[-1500:]}
        value["seconds"] = round(time.perf_counter() - began, 1)
        value["warnings"] = sorted({w.category.__name__ for w in caught})
        value["messages"] = [str(w.message)[:300] for w in caught
                             if w.category.__module__.startswith("keras_bnn")]
        RESULT[name] = value
        return check
    return run


def data(n=N):
    return fit_helpers.sign_rows(n, 3)


def model(sampler="atmc", train_size=N):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    built = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs)))
    built.compile(sampler=SAMPLERS[sampler]() if sampler in SAMPLERS else sampler,
                  train_size=train_size, loss=LOSS)
    return built


def fit(built, epochs, callbacks=(), **kwargs):
    x, y = data()
    full = isinstance(built.optimizer, kb.samplers.HMC)
    return built.fit(x, y, batch_size=N if full else 16, epochs=epochs, shuffle=False,
                     callbacks=list(callbacks), verbose=0, **kwargs)


def weights(built):
    return [np.asarray(w) for w in built.get_weights()]


def path(name):
    return os.path.join(OUT_DIR, name)


# Stock callbacks ------------------------------------------------------------

@record("early_stopping")
def _():
    stop = keras.callbacks.EarlyStopping(monitor="val_nll", patience=100)
    history = fit(model("sgld"), 3, [stop], validation_data=data())
    return {"mode": stop.mode, "best": float(stop.best),
            "min": float(min(history.history["val_nll"]))}


@record("early_stopping_stops")
def _():
    stop = keras.callbacks.EarlyStopping(monitor="val_nll", mode="max", patience=0)
    history = fit(model("sgld"), 6, [stop], validation_data=data())
    return len(history.history["loss"])


for _name in SAMPLERS:
    @record(f"checkpoint_{_name}")
    def _(name=_name):
        file = path(f"{name}.weights.h5")
        first = model(name)
        fit(first, 3, [keras.callbacks.ModelCheckpoint(file, save_weights_only=True)])
        reloaded = model(name)
        reloaded.load_weights(file)
        same_state = (int(reloaded.optimizer.iterations) == int(first.optimizer.iterations)
                      and reloaded.optimizer.step_size_value == first.optimizer.step_size_value)
        fit(first, 1)
        fit(reloaded, 1)
        return {"same_state": same_state,
                "max_difference": max(float(np.max(np.abs(a - b))) for a, b in
                                      zip(weights(first), weights(reloaded)))}


@record("backup_and_restore")
def _():
    straight = model("atmc")
    fit(straight, 4)

    class Crash(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("crash")

    backup = path("backup")
    interrupted = model("atmc")
    try:
        fit(interrupted, 4, [keras.callbacks.BackupAndRestore(backup), Crash()])
    except RuntimeError:
        pass
    resumed = model("atmc")
    history = fit(resumed, 4, [keras.callbacks.BackupAndRestore(backup)])
    return {"epochs_run": len(history.history["loss"]),
            "iterations": [int(straight.optimizer.iterations), int(resumed.optimizer.iterations)],
            "max_difference": max(float(np.max(np.abs(a - b))) for a, b in
                                  zip(weights(straight), weights(resumed)))}


class EpochEnds(keras.callbacks.Callback):
    """The weights and step counter at each epoch end, as a user's callback reads them."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def on_epoch_end(self, epoch, logs=None):
        self.seen[epoch] = (int(self.model.optimizer.iterations), weights(self.model))


@record("collected_at_epoch_ends")
def _():
    # Keras' JAX trainer keeps the state outside the variables within an epoch: each sample
    # must be the chain at its epoch's end, not a stale or purged value.
    store = kb.SampleStore(path("samples"))
    ends = EpochEnds()
    fit(model("atmc"), 5, [kb.callbacks.CollectSamples(store, start_epoch=2), ends])
    return [{"epoch": sample.metadata["epoch"], "step": sample.metadata["step"],
             "end_step": ends.seen[sample.metadata["epoch"]][0],
             "max_difference": max(float(np.max(np.abs(a - b))) for a, b in
                                   zip(sample.weights, ends.seen[sample.metadata["epoch"]][1]))}
            for sample in store]


@record("mid_epoch_checkpoint")
def _():
    # A callback that reads the model after every step (ModelCheckpoint(save_freq=1)) makes
    # Keras' JAX trainer put the state back each step: the chain must not change.
    plain, checkpointed = model("atmc"), model("atmc")
    fit(plain, 2)
    file = path("every_step.weights.h5")
    fit(checkpointed, 2, [keras.callbacks.ModelCheckpoint(file, save_weights_only=True,
                                                          save_freq=1)])
    reloaded = model("atmc")
    reloaded.load_weights(file)
    return {"chain": max(float(np.max(np.abs(a - b))) for a, b in
                         zip(weights(plain), weights(checkpointed))),
            "file": max(float(np.max(np.abs(a - b))) for a, b in
                        zip(weights(reloaded), weights(checkpointed))),
            "file_step": int(reloaded.optimizer.iterations)}


@record("reduce_lr_refused")
def _():
    built = model("atmc")
    try:
        fit(built, 2, [keras.callbacks.ReduceLROnPlateau(monitor="val_nll")])
    finally:
        RESULT["reduce_lr_built"] = built.optimizer.built


@record("tensorboard")
def _():
    fit(model("atmc"), 2, [keras.callbacks.TensorBoard(path("tensorboard"))])
    return sorted(os.listdir(path("tensorboard")))


@record("csv_logger")
def _():
    fit(model("atmc"), 2, [keras.callbacks.CSVLogger(path("log.csv"))], validation_data=data())
    with open(path("log.csv")) as lines:
        return lines.read().splitlines()[0].split(",")


# fit's arguments ------------------------------------------------------------

@record("class_weight")
def _():
    x, y = data()
    model("sgld").fit(x, y, batch_size=8, epochs=1, class_weight={1: 4.0}, verbose=0)


@record("sample_weight")
def _():
    x, y = data()
    model("sgld").fit(x, y, batch_size=8, epochs=1, sample_weight=np.where(y == 1, 4.0, 1.0),
                      verbose=0)


@record("dataset_sample_weight")
def _():
    x, y = data()
    weights = np.where(y == 1, 4.0, 1.0).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(8)
    model("sgld").fit(dataset, epochs=1, verbose=0, validation_data=dataset)


@record("dataset_class_weight")
def _():
    x, y = data()
    model("sgld").fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1,
                      class_weight={1: 4.0}, verbose=0)


@record("steps_per_execution")
def _():
    chains = []
    for steps in (1, 4):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((3,))
        built = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
        built.compile(sampler=SAMPLERS["atmc"](), train_size=N, loss=LOSS,
                      steps_per_execution=steps)
        built.fit(*data(), batch_size=8, epochs=2, shuffle=False, verbose=0)
        chains.append(weights(built))
    return max(float(np.max(np.abs(a - b))) for a, b in zip(*chains))


@record("validation_split")
def _():
    x, y = data()
    history = model("sgld").fit(x, y, batch_size=8, epochs=1, validation_split=0.25, verbose=0)
    return float(history.history["val_nll"][0])


def pydataset(size=8):
    return fit_helpers.Batches(*data(), size)


def generator(size=8):
    x, y = data()
    while True:
        for start in range(0, N, size):
            yield x[start:start + size], y[start:start + size]


def dataset():
    return tf.data.Dataset.from_tensor_slices(data())


VALIDATION = {
    "arrays": lambda: dict(validation_data=data()),
    "tf_data": lambda: dict(validation_data=dataset().batch(8)),
    "pydataset": lambda: dict(validation_data=pydataset()),
    "generator": lambda: dict(validation_data=generator(), validation_steps=4),
}
for _name, _make in VALIDATION.items():
    @record(f"validation_{_name}")
    def _(make=_make):
        x, y = data()
        history = model("sgld").fit(x, y, batch_size=8, epochs=1, verbose=0, **make())
        return float(history.history["val_nll"][0])


TRAINING = {
    "tf_data": lambda: dict(x=dataset().batch(8)),
    "pydataset": lambda: dict(x=pydataset()),
    "generator": lambda: dict(x=generator(), steps_per_epoch=4),
    "repeat_with_steps": lambda: dict(x=dataset().batch(8).repeat(), steps_per_epoch=4),
}
for _name, _make in TRAINING.items():
    @record(f"train_{_name}")
    def _(make=_make):
        built = model("sgld")
        history = built.fit(epochs=2, verbose=0, **make())
        return {"iterations": int(built.optimizer.iterations),
                "finite": bool(np.all(np.isfinite(history.history["loss"])))}


class StopAfter(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        self.model.stop_training = batch >= 20


@record("repeat_without_steps")
def _():
    model("sgld").fit(dataset().batch(8).repeat(), epochs=1, verbose=0, callbacks=[StopAfter()])


@record("unbatched")
def _():
    model("sgld").fit(dataset(), epochs=1, verbose=0)


@record("unbatched_validation")
def _():
    model("sgld").fit(*data(), epochs=1, verbose=0, validation_data=dataset())


@record("train_size_tf_data")
def _():
    model("sgld", train_size=2 * N).fit(dataset().batch(8), epochs=1, verbose=0)


@record("train_size_pydataset")
def _():
    model("sgld", train_size=2 * N).fit(pydataset(), epochs=1, verbose=0)


HMC_MINIBATCHES = {
    "tf_data": lambda: dict(x=dataset().batch(8)),
    "pydataset": lambda: dict(x=pydataset()),
    "generator": lambda: dict(x=generator(), steps_per_epoch=4),
    "arrays": lambda: dict(x=data()[0], y=data()[1], batch_size=12),  # 12, 12, 8: 2 traces
}
for _name, _make in HMC_MINIBATCHES.items():
    @record(f"hmc_minibatches_{_name}")
    def _(make=_make):
        model("hmc").fit(epochs=2, verbose=0, **make())


@record("hmc_full_batch")
def _():
    model("hmc").fit(dataset().batch(N), epochs=1, verbose=0)


@record("loss_reduction")
def _():
    inputs = keras.Input((3,))
    built = kb.BayesianModel(inputs, keras.layers.Dense(2)(inputs))
    built.compile(sampler="sgld", train_size=N, loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="sum"))


# kb.bayesian on the three kinds of model --------------------------------

class Subclassed(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(4, activation="relu")
        self.out = keras.layers.Dense(2)

    def call(self, inputs):
        return self.out(self.hidden(inputs))


def functional():
    inputs = keras.Input((3,))
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Dense(4, "relu")(inputs)))


KINDS = {
    "sequential": lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, "relu"),
                                            keras.layers.Dense(2)]),
    "functional": functional,
    "subclassed": Subclassed,
}
for _name, _make in KINDS.items():
    @record(f"bayesian_{_name}")
    def _(make=_make):
        keras.utils.set_random_seed(0)
        original = make()
        original(data()[0][:1])  # built by a call, as a subclassed model must be
        built = kb.bayesian(original)
        built.compile(sampler=kb.samplers.ATMC(warmup_steps=4), train_size=N, loss=LOSS)
        x, y = data()
        history = built.fit(x, y, batch_size=8, epochs=2, verbose=0)
        prior = float(keras.ops.convert_to_numpy(kb.priors.log_prior(built)))
        return {"iterations": int(built.optimizer.iterations), "log_prior": prior,
                "prior_logged": float(history.history["prior"][-1]),
                "finite": bool(np.all(np.isfinite(history.history["loss"])))}


# The ensemble on those inputs --------------------------------------------

ENSEMBLE_INPUTS = {
    "arrays": lambda: data()[0],
    "tf_data": lambda: dataset().map(lambda x, y: x).batch(8),
    "pydataset": lambda: pydataset(),
}


@record("ensemble")
def _():
    built = model("atmc")
    fit(built, 1)
    first = weights(built)
    fit(built, 1)
    ensemble = kb.PosteriorEnsemble(built, [first, weights(built)])
    x, y = data()
    expected = ensemble.predict(x, verbose=0)
    out = {}
    for name, make in ENSEMBLE_INPUTS.items():
        try:
            got = ensemble.predict(make(), verbose=0)
            out[f"predict_{name}"] = float(np.max(np.abs(got - expected)))
        except Exception as error:
            out[f"predict_{name}"] = f"{type(error).__name__}: {str(error)[:300]}"
    for name, make in ENSEMBLE_INPUTS.items():  # the README's evaluation of the members
        try:
            scores = kb.metrics.evaluate_members(ensemble.predict_members(make(), verbose=0), y)
            out[f"evaluate_{name}"] = float(scores["ensemble"]["nll"])
        except Exception as error:
            out[f"evaluate_{name}"] = f"{type(error).__name__}: {str(error)[:300]}"
    return out


# float64 with 64-bit arrays enabled after import (last: it changes the process) ----

@record("float64_enabled_after_import")
def _():
    import jax  # noqa: PLC0415  (the backend is JAX)

    jax.config.update("jax_enable_x64", True)  # as compile's refusal of float64 advises
    keras.config.set_dtype_policy("float64")
    try:
        # n = 2^20: the energies H = n·u/T + ½‖p‖² ≈ 7e5 (u ≈ 0.7, the mean-form
        # potential) lie in [2^19, 2^20), where
        # float32's spacing is 1/16; h = 1e-5 makes |ΔH| ≲ 1 (measured up to 0.15).
        sampler = kb.samplers.HMC(step_size=1e-5, num_leapfrog_steps=2, num_adaptation_steps=0)
        built = model(sampler, train_size=2**20)
        history = fit(built, 6)  # 6 transitions on the 32 rows
        return {"weights": sorted({str(v.dtype) for v in built.trainable_variables}),
                "acceptance_rate": history.history["acceptance_rate"]}
    finally:
        keras.config.set_dtype_policy("float32")


print("RESULT " + json.dumps(RESULT))
