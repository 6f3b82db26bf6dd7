"""``kb.bayesian`` and ``BayesianModel`` as a Keras user meets them (session 40 sweep)."""

import zipfile

import keras
import numpy as np
import pytest
import tensorflow_probability as tfp

import keras_bnn as kb

N = 16


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, 4)).astype("float32"), rng.normal(size=(N, 2)).astype("float32")


def _priors(model):
    return [None if v.regularizer is None else
            (type(v.regularizer).__name__, sorted(v.regularizer.get_config().items()))
            for v in model.trainable_variables]


def _sampled(model):
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGHMC(step_size=1e-3, seed=3), train_size=N, loss="mse")
    x, y = _data()
    bnn.fit(x, y, batch_size=8, epochs=1, verbose=0)
    return bnn


def _dense(units=2):
    keras.utils.set_random_seed(1)
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(units, name="out")(inputs))


def test_keras_saving_save_model_refuses_sampled_lora_weights(tmp_path):
    """Found 2026-12-01: ``keras.saving.save_model(bnn, path)`` (which does not call
    ``bnn.save``) saved a model sampling LoRA weights without a word: Dense(3) on 4
    inputs, rank 2, sampled LoRA weights |a|+|b| = 18.3, reloaded as 0.0 (the sampled
    weights and their prior lost). Keras asks the model for its own weights first:
    the refusal is there, and the file left has no weights (``load_model`` refuses it)."""
    model = _dense(3)
    model.get_layer("out").enable_lora(2)
    bnn = kb.bayesian(model)
    for variable in bnn.trainable_variables:
        variable.assign(np.ones(variable.shape, "float32"))
    path = tmp_path / "lora.keras"
    with pytest.raises(ValueError, match=r"keras\.saving\.save_model\): layers \['out'\] "
                                         r"sample LoRA weights"):
        keras.saving.save_model(bnn, path)
    assert not any(name.endswith((".h5", ".npz")) for name in zipfile.ZipFile(path).namelist())
    with pytest.raises(ValueError, match="weights"):
        keras.saving.load_model(path)


def test_save_refuses_a_legacy_h5_file_that_could_not_be_reloaded(tmp_path):
    """Found 2026-12-01: ``bnn.save("x.h5")`` wrote a file that ``load_model`` refused
    ("Unknown layer: 'BayesianModel'": Keras' HDF5 format records the bare class
    name; with ``custom_objects`` "Could not deserialize 'keras.metrics.mse'"), and
    Keras popped the sampler from the model's compile config: a ``.keras`` file saved
    afterwards reloaded with SGD (2 optimizer variables), not SGHMC (38). Now refused,
    naming ``filepath``, before the file is touched."""
    bnn = _sampled(_dense())
    path = tmp_path / "model.h5"
    with pytest.raises(ValueError, match=r"BayesianModel\.save: `filepath` must end in "
                                         r"'\.keras'"):
        bnn.save(str(path))
    assert not path.exists()
    bnn.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(reloaded.optimizer) is kb.samplers.SGHMC


@pytest.mark.parametrize("how", ["method", "function"])
def test_a_nested_bayesian_model_round_trips(tmp_path, how):
    """A ``BayesianModel`` used as a layer of a Keras model that ``kb.bayesian`` turns
    into another: not refused, as it samples, saves and reloads right (measured
    2026-12-01: predictions, every prior and the sampler's 38 variables equal after
    ``bnn.save`` and ``keras.saving.save_model``; ``clone_model`` keeps the priors)."""
    inner = kb.bayesian(_dense(3))
    inputs = keras.Input((4,))
    outer = keras.Model(inputs, keras.layers.Dense(2, name="head")(inner(inputs)))
    bnn = _sampled(outer)
    path = tmp_path / "nested.keras"
    bnn.save(path) if how == "method" else keras.saving.save_model(bnn, path)
    reloaded = keras.saving.load_model(path)
    x, _ = _data()
    np.testing.assert_allclose(reloaded.predict(x, verbose=0), bnn.predict(x, verbose=0),
                               atol=1e-6)
    assert _priors(reloaded) == _priors(bnn) and None not in _priors(bnn)
    for mine, theirs in zip(reloaded.optimizer.variables, bnn.optimizer.variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    assert _priors(keras.models.clone_model(bnn)) == _priors(bnn)


def test_default_priors_match_tfp_log_densities():
    """Each weight's ``-log p(w)`` (its layer loss) against TFP's Normal of the σ the
    module doc gives: He's sqrt(2/fan_in) with the fans of a convolution, a depthwise
    and a transposed kernel, an LSTM's kernels and a ``MultiHeadAttention``'s
    projections; Normal(0, 1) biases, Normal(1, 1) scales. Float32 sums: 1e-6 relative."""
    keras.utils.set_random_seed(2)
    inputs = keras.Input((6, 6, 2))
    hidden = keras.layers.Conv2D(3, 3, name="conv")(inputs)
    hidden = keras.layers.DepthwiseConv2D(3, name="dw")(hidden)
    hidden = keras.layers.Conv2DTranspose(2, 3, strides=2, name="tconv")(hidden)
    hidden = keras.layers.LayerNormalization(name="ln")(keras.layers.Reshape((-1, 2))(hidden))
    hidden = keras.layers.LSTM(3, name="lstm", return_sequences=True)(hidden)
    hidden = keras.layers.MultiHeadAttention(2, 4, name="mha")(hidden, hidden)
    bnn = kb.bayesian(keras.Model(inputs, hidden))
    fan_in = {"conv/kernel": 18, "dw/kernel": 9, "tconv/kernel": 7,  # round(9·3/4)
              "lstm/lstm_cell/kernel": 2, "lstm/lstm_cell/recurrent_kernel": 3,
              "mha/query/kernel": 3, "mha/key/kernel": 3, "mha/value/kernel": 3,
              "mha/attention_output/kernel": 8}
    for variable in bnn.trainable_variables:
        if variable.path in fan_in:
            mean, sigma = 0.0, np.sqrt(2.0 / fan_in[variable.path])
        else:
            mean, sigma = (1.0 if variable.name == "gamma" else 0.0), 1.0
        expected = float(np.sum(tfp.distributions.Normal(mean, sigma).log_prob(
            variable.numpy().astype("float64"))))
        got = -float(variable.regularizer(variable))
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-5), variable.path


def test_priors_keys_follow_the_documented_precedence():
    """Path > "layer/weight" > layer name > weight name, on a Sequential's paths
    (``"seqnet/d1/kernel"``); a key that matches nothing is refused by name."""
    def sequential():
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, name="d1"),
                                 keras.layers.Dense(2, name="d2")], name="seqnet")

    laplace, wide = kb.priors.Laplace(1.0), kb.priors.Normal(0.0, 2.0)
    chosen = kb.bayesian(sequential(), priors={"kernel": laplace, "d1": wide,
                                               "d2/bias": laplace, "seqnet/d1/bias": laplace})
    assert [type(v.regularizer).__name__ for v in chosen.trainable_variables] == [
        "Normal", "Laplace", "Laplace", "Laplace"]
    assert chosen.trainable_variables[0].regularizer.get_config()["stddev"] == 2.0
    with pytest.raises(ValueError, match=r"names no weight.*\['d3'\]"):
        kb.bayesian(sequential(), priors={"d3": laplace})


def test_a_model_sharing_the_layers_samples_under_the_priors_set_after_its_fit():
    """Found 2026-12-01: ``bnn = kb.bayesian(model)``, ``bnn.fit``, then
    ``kb.bayesian(model, kernel_prior=Normal(0, 0.01), ...)`` (new priors on the
    same layers): ``bnn.fit`` went on under the priors it was traced with, its
    ``prior`` logged 10.5 where the priors its weights carry give -log p(θ) = 20252.
    A step of 1e-12 leaves θ as it is: the logged prior is the new priors'."""
    x, y = _data()
    model = _dense()
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-12, seed=0), train_size=N, loss="mse")
    bnn.fit(x, y, batch_size=N, epochs=1, verbose=0)
    tight = kb.priors.Normal(0.0, 0.01)
    kb.bayesian(model, kernel_prior=tight, bias_prior=tight)
    now = float(sum(v.regularizer(v) for v in bnn.trainable_variables))
    logged = bnn.fit(x, y, batch_size=N, epochs=1, verbose=0).history["prior"][0]
    assert logged == pytest.approx(now, rel=1e-4)


@keras.saving.register_keras_serializable(package="test_bayes40")
class _Units(keras.Model):
    """A plain keras.Model subclass with a constructor argument (Keras' automatic config)."""

    def __init__(self, units=2, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units, name="units_dense")

    def call(self, x):
        return self.dense(x)


def test_a_reload_that_rebuilds_a_subclass_with_other_weights_names_that_class(tmp_path):
    """Found 2026-12-01: ``kb.bayesian(Net(units=3))``, saved and reloaded, failed with
    "the class BayesianModel makes other weights than when it was saved": Keras 3.15
    records a built ``keras.Model`` subclass's ``__init__`` defaults (``units=2``) as its
    config, so the reload rebuilt ``Net()`` (Keras' own ``load_model`` of ``Net(units=3)``
    fails too: "Layer 'units_dense' expected 2 variables, but received 0"). The message
    now names the class that made the weight and what to do."""
    model = _Units(units=3)
    model(np.zeros((1, 4), "float32"))
    kb.bayesian(model).save(tmp_path / "units.keras")
    with pytest.raises(ValueError, match=r"or the class _Units of layer '\w+' \(a keras\.Model "
                                         r"subclass .* give it a get_config"):
        keras.saving.load_model(tmp_path / "units.keras")


def test_priors_keys_that_are_not_strings_are_refused_by_name():
    """Found 2026-12-01: ``priors={"nope": p, 1: p}`` raised a TypeError,
    "'<' not supported between instances of 'int' and 'str'" (the unknown keys were
    sorted for the message); now a ValueError naming ``priors``."""
    laplace = kb.priors.Laplace(1.0)
    with pytest.raises(ValueError, match=r"bayesian: `priors` must be a dict .* with str keys"):
        kb.bayesian(_dense(), priors={"nope": laplace, 1: laplace})
