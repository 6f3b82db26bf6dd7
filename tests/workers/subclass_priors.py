"""A subclassed BayesianModel's priors through save, load, copy and clone, its constructor
arguments through a reload, and its compile once built; prints ``RESULT <json>``.

Run by ``tests/test_subclass_priors.py`` in a process of its own: a subclass
of ``kb.BayesianModel`` must be made before any functional one in its
process (see ``subclassed_fit.py``). The model's priors are in no config:
its ``Scale`` layer's weight gets the prior passed to the model's
constructor (which Keras' config of a ``BayesianModel`` subclass leaves
out), and ``kb.bayesian`` gives its ``Dense`` layer's weights theirs.

Usage: python subclass_priors.py DIR (KERAS_BACKEND as the caller sets it).
"""

import copy
import json
import sys
import warnings
import zipfile
from pathlib import Path

import keras
import numpy as np

import keras_bnn as kb

N = 16
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@keras.saving.register_keras_serializable(package="subclass_priors")
class Scale(keras.layers.Layer):
    """A custom layer whose weight's prior is a constructor argument its config leaves out."""

    def __init__(self, prior=None, **kwargs):
        super().__init__(**kwargs)
        self.prior = prior

    def build(self, input_shape):
        self.w = self.add_weight(shape=(int(input_shape[-1]),), initializer="ones", name="w",
                                 regularizer=self.prior)

    def call(self, inputs):
        return inputs * self.w

    def get_config(self):
        return super().get_config()


@keras.saving.register_keras_serializable(package="subclass_priors")
class Net(kb.BayesianModel):
    """Its priors: ``scale_prior`` on the Scale's weight; none in code on the Dense's."""

    def __init__(self, scale_prior=None, **kwargs):
        super().__init__(**kwargs)
        self.scale = Scale(scale_prior, name="scale")
        self.out = keras.layers.Dense(2, name="out")

    def call(self, inputs):
        return self.out(self.scale(inputs))


@keras.saving.register_keras_serializable(package="subclass_priors")
class OwnFromConfig(Net):
    """A subclass with its own ``from_config`` (``cls(**config)``): Keras builds it after."""

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


@keras.saving.register_keras_serializable(package="subclass_priors")
class Sized(kb.BayesianModel):
    """A subclass whose constructor arguments are of basic types (Keras' config records them)."""

    def __init__(self, units=4, activation="relu", **kwargs):
        super().__init__(**kwargs)
        self.units, self.activation = units, activation
        self.hidden = keras.layers.Dense(units, activation=activation, name="hidden")
        self.out = keras.layers.Dense(2, name="out")

    def call(self, inputs):
        return self.out(self.hidden(inputs))


def priors(model):
    """Each trainable weight's prior: ``[class name, config]`` (``[None, None]`` for none)."""
    return [[type(v.regularizer).__name__, v.regularizer.get_config()]
            if v.regularizer is not None else [None, None] for v in model.trainable_variables]


def minus_log_prior(model):
    return -float(keras.ops.convert_to_numpy(kb.priors.log_prior(model)))


def trained(cls, tmp):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    keras.utils.set_random_seed(0)
    net = cls(scale_prior=kb.priors.Laplace(0.05))
    net.compile(sampler=kb.samplers.SGLD(step_size=1e-4, seed=0), train_size=N, loss=LOSS)
    net(x)  # built after compile (before it too since 2026-11-29: compiled_once_built)
    net = kb.bayesian(net, priors={"out/bias": kb.priors.Normal(0.0, 0.5)})
    store = kb.SampleStore(tmp / f"{cls.__name__}-samples")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NoEnsembleWarning: a subclassed model
        net.fit(x, y, batch_size=8, epochs=1, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    return net, store


def reloaded(net, path):
    """The model saved to ``path`` and loaded again, and the warnings of the load."""
    net.save(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = keras.saving.load_model(path)
    return loaded, [f"{type(w.message).__name__}: {w.message}" for w in caught]


def as_before_the_record(path, old):
    """Writes to ``old`` the ``.keras`` file ``path`` as saved before 2026-11-29: its
    config without the priors' record (``weight_priors``, ``weight_priors_build``)."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                for key in ("weight_priors", "weight_priors_build"):
                    del config["config"][key]
                data = json.dumps(config)
            target.writestr(item, data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = keras.saving.load_model(old)
    return {"priors": priors(loaded),
            "warnings": [f"{type(w.message).__name__}: {w.message}" for w in caught]}


def outcome(run):
    """``run()``'s result, or its error as ``"<type>: <message>"`` (the caller compares)."""
    try:
        return run()
    except Exception as error:  # what main's code raised, reported to the test
        return f"{type(error).__name__}: {str(error)[:300]}"


def sized_reloaded(x, path):
    """``Sized(8, activation="tanh")`` saved and loaded: its config's arguments, the
    loaded model's arguments and weight shapes, and whether it gives the same outputs."""
    keras.utils.set_random_seed(0)
    net = Sized(8, activation="tanh")  # a positional argument too
    net(x)
    net = kb.bayesian(net)
    config = net.get_config()
    loaded = reloaded(net, path)[0]
    return {"config": [config.get("units"), config.get("activation")],
            "loaded": [loaded.units, loaded.activation],
            "shapes": [list(v.shape) for v in loaded.trainable_variables],
            "same_outputs": bool(np.allclose(keras.ops.convert_to_numpy(net(x)),
                                             keras.ops.convert_to_numpy(loaded(x))))}


def compiled_once_built(x, y, sampler, times, fit):
    """A ``Sized`` built (``summary()``), then compiled ``times`` times: its metrics'
    names and, with ``fit``, the keys of one step's logs."""
    keras.utils.set_random_seed(0)
    net = Sized()
    net(x)
    net.summary(print_fn=lambda *args, **kwargs: None)
    net = kb.bayesian(net)
    for _ in range(times):
        net.compile(sampler=sampler, train_size=N, loss=LOSS)
    got = {"metrics": [metric.name for metric in net.metrics]}
    if fit:  # one step (the trace takes the time)
        got["logs"] = sorted(net.fit(x, y, batch_size=N, epochs=1, verbose=0).history)
    return got


def main(tmp):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(N, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    result = {"sized": outcome(lambda: sized_reloaded(x, tmp / "sized.keras")),
              "built_compile": {sampler: outcome(
                  lambda: compiled_once_built(x, y, sampler, times, fit))
                  for sampler, times, fit in (("sgld", 1, False), ("sghmc", 2, True))}}
    nets = {}
    for cls in (Net, OwnFromConfig):
        net, store = trained(cls, tmp)
        nets[cls] = net
        loaded, caught = reloaded(net, tmp / f"{cls.__name__}.keras")
        try:
            store.append(loaded)
            appended = "appended"
        except ValueError as error:
            appended = str(error)
        try:
            rebuilt = priors(store.build_model())
        except ValueError as error:
            rebuilt = str(error)
        result[cls.__name__] = {
            "priors": priors(net), "minus_log_prior": minus_log_prior(net),
            "loaded_priors": priors(loaded), "loaded_minus_log_prior": minus_log_prior(loaded),
            "loaded_flat": list(getattr(loaded, "flat_prior_weights", [])),
            "warnings": caught, "store": appended,
            "rebuilt_priors": rebuilt,
            "old_file": as_before_the_record(tmp / f"{cls.__name__}.keras",
                                             tmp / f"{cls.__name__}-old.keras"),
        }
    net = nets[Net]
    result["copy_priors"] = priors(Net.from_config(net.get_config()))
    result["clone_priors"] = priors(keras.models.clone_model(net))
    config = net.get_config()
    result["recorded"] = "weight_priors" in config and "weight_priors_build" in config
    if result["recorded"]:
        altered = copy.deepcopy(config)
        altered["weight_priors"][0][2] = [99]  # the Scale's weight, of shape (3,)
        try:
            Net.from_config(altered)
            result["altered"] = "loaded"
        except ValueError as error:
            result["altered"] = str(error)
        del config["weight_priors_build"]  # nothing to build it on
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Net.from_config(config)
        result["unbuilt_warnings"] = [str(w.message) for w in caught]
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
