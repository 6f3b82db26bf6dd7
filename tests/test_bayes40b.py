"""``BayesianModel`` saving, ``kb.bayesian``'s ``priors`` keys and ``fit``'s warnings from
``exec()`` (session 40, second sweep)."""

import importlib.machinery
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

N = 16


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, 4)).astype("float32"), rng.normal(size=(N, 2)).astype("float32")


def _dense():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs))


def test_keras_saving_save_model_refuses_a_legacy_h5_file(tmp_path):
    """Found 2026-12-01: ``keras.saving.save_model(bnn, "x.h5")`` (which does not call
    ``bnn.save``) wrote a 22,800-byte file that ``load_model`` refused ("Unknown layer:
    'BayesianModel'") and popped ``"optimizer"`` from the model's compile config: a
    ``.keras`` file saved afterwards reloaded with SGD. Before the fix: "DID NOT RAISE".
    Keras' HDF5 saver asks for the config first: the refusal is there, before Keras
    touches the compile config."""
    bnn = kb.bayesian(_dense())
    bnn.compile(sampler=kb.samplers.SGHMC(step_size=1e-3, seed=3), train_size=N, loss="mse")
    x, y = _data()
    bnn.fit(x, y, batch_size=8, epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"keras\.saving\.save_model: a BayesianModel cannot "
                                         r"be saved in Keras' legacy HDF5 format"):
        keras.saving.save_model(bnn, tmp_path / "model.h5")
    assert "optimizer" in bnn._compile_config.config
    keras.saving.save_model(bnn, tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(reloaded.optimizer) is kb.samplers.SGHMC


@keras.saving.register_keras_serializable(package="test_bayes40b")
class _Net(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(3, name="hidden")
        self.head = keras.layers.Dense(2, name="head")

    def call(self, inputs):
        return self.head(self.hidden(inputs))


def _scales(model):
    return {v.path: v.regularizer.stddev for v in model.trainable_variables}


@pytest.mark.parametrize("key, chosen", [("net", 3), ("net/kernel", 2)])
def test_a_subclassed_models_name_is_a_priors_key(key, chosen):
    """Found 2026-12-01: ``kb.bayesian(net, priors={"net": ...})`` of a subclassed model
    named ``"net"``, the one layer of the ``BayesianModel`` it returns, raised
    "`priors` names no weight, layer or weight name of the model: ['net']", though a
    layer's name names all its weights (and ``"layer/weight"`` of a layer around a
    weight names it). Now it does, a sublayer's own name first."""
    net = _Net(name="net")
    net(_data()[0])
    prior = kb.priors.Normal(0.0, 7.0)
    bnn = kb.bayesian(net, priors={key: prior, "head/bias": kb.priors.Normal(0.0, 5.0)})
    scales = _scales(bnn)
    assert scales["net/head/bias"] == 5.0
    assert sum(scale == 7.0 for scale in scales.values()) == chosen


def test_fit_warns_from_code_run_with_exec(tmp_path):
    """Found 2026-12-01: ``fit`` called from code run with ``exec()`` in a module's
    globals (``exec(open(script).read(), globals())``) raised ``IndexError: list index
    out of range`` from ``warnings.warn_explicit``, which read the warned line 41 of
    ``"<string>"`` from the globals' loader, whose 1-line source has no such line. Now the
    TrainSizeWarning is issued, naming ``<string>``'s line."""
    module = tmp_path / "short.py"
    module.write_text("VALUE = 1\n")
    bnn = kb.bayesian(_dense())
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=3), train_size=N + 3, loss="mse")
    x, y = _data()
    scope = {"__name__": "short", "__file__": str(module), "bnn": bnn, "x": x, "y": y,
             "__loader__": importlib.machinery.SourceFileLoader("short", str(module))}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec("\n" * 40 + "bnn.fit(x, y, batch_size=8, epochs=1, verbose=0)\n", scope)
    found = [w for w in caught if issubclass(w.category, kb.TrainSizeWarning)]
    assert [(w.filename, w.lineno) for w in found] == [("<string>", 41)]
    assert "compile(train_size=19)" in str(found[0].message)
