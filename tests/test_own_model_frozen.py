"""A subclassed model with a frozen part (README "Your own model", "A Bayesian last layer"):
``kb.bayesian`` of it reloads with the same trainable weights and priors."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_bnn as kb


@keras.saving.register_keras_serializable(package="test_own_model_frozen")
class TrunkAndHead(keras.Model):
    """A trunk (Dense, BatchNormalization) and a head, as a subclassed model."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.trunk = keras.layers.Dense(8, activation="relu", name="trunk")
        self.norm = keras.layers.BatchNormalization(name="norm")
        self.head = keras.layers.Dense(3, name="head")

    def call(self, inputs):
        return self.head(self.norm(self.trunk(inputs)))


def _frozen_trunk():
    keras.utils.set_random_seed(0)
    model = TrunkAndHead()
    model(np.zeros((2, 6), "float32"))
    model.trunk.trainable = False
    model.norm.trainable = False
    return kb.bayesian(model, priors={"head/kernel": kb.priors.Normal(0.0, 0.5)})


def _priors(model):
    return [(tuple(v.shape), type(v.regularizer).__name__, v.regularizer.get_config())
            for v in model.trainable_variables]


def test_a_reload_keeps_the_frozen_trunk_and_the_head_priors(tmp_path):
    """Until 2026-11-29 load_model raised: the recorded priors of the 2 head weights did
    not fit the rebuilt model, whose trunk Keras had made trainable again (4 weights)."""
    bnn = _frozen_trunk()
    bnn.save(tmp_path / "bll.keras")
    loaded = keras.saving.load_model(tmp_path / "bll.keras")
    assert _priors(loaded) == _priors(bnn) == [
        ((8, 3), "Normal", {"mean": 0.0, "stddev": 0.5}),
        ((3,), "Normal", {"mean": 0.0, "stddev": 1.0})]
    trunk = loaded.layers[1].trunk
    assert not trunk.trainable and not loaded.layers[1].norm.trainable
    x = np.random.default_rng(0).normal(size=(5, 6)).astype("float32")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), bnn.predict(x, verbose=0),
                               rtol=1e-6, atol=1e-6)
    assert kb.BayesianModel.from_config(bnn.get_config()).layers[1].trunk.trainable is False


def test_the_posterior_ensemble_of_its_store_rebuilds_it(tmp_path):
    bnn = _frozen_trunk()
    bnn.compile(sampler="sgld", train_size=32,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(str(tmp_path / "samples"))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6)).astype("float32")
    store.append(bnn)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(bnn(x, training=False)))
    np.testing.assert_allclose(ensemble.predict(x), expected, rtol=1e-5, atol=1e-6)
    assert ensemble.num_members == 1


_SUBCLASS_OF_BAYESIAN_MODEL = """
import sys
import keras, numpy as np
import keras_bnn as kb

@keras.saving.register_keras_serializable(package="own_model_frozen")
class Net(kb.BayesianModel):  # made before any functional BayesianModel (Keras' rule)
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.trunk = kb.layers.Dense(8, name="trunk")
        self.head = kb.layers.Dense(3, name="head")

    def call(self, inputs):
        return self.head(self.trunk(inputs))

model = Net()
model(np.zeros((2, 6), "float32"))
model.trunk.trainable = False
model.save(sys.argv[1])
loaded = keras.saving.load_model(sys.argv[1])
print("RESULT", len(loaded.trainable_variables), loaded.trunk.trainable,
      [type(v.regularizer).__name__ for v in loaded.trainable_variables])
"""


@pytest.mark.slow  # a process of its own: 17-21 s on 2 cores
def test_a_subclass_of_bayesian_model_reloads_with_its_frozen_part(tmp_path):
    """Until 2026-11-29 load_model raised, as for kb.bayesian of a subclassed model."""
    done = subprocess.run(
        [sys.executable, "-c", _SUBCLASS_OF_BAYESIAN_MODEL, str(tmp_path / "net.keras")],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, KERAS_BACKEND="tensorflow",
                 PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RESULT 2 False ['HeNormal', 'Normal']" in done.stdout
