"""Export and serving defects found by the session-39 sweep (serve39)."""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import weight_sets
from keras_bnn.export import served_signature
from keras_bnn.serving import ServingClient
from tf_serving_standin import serving


def dotted_ensemble():
    """An ensemble of a dict member whose keys TensorFlow sanitises as arguments:
    ``a/b`` -> ``a_b``, ``x.y`` -> ``x_y``."""
    keras.utils.set_random_seed(0)
    first, second = keras.Input((2,), name="first"), keras.Input((3,), name="second")
    output = keras.layers.Dense(3)(keras.layers.Concatenate()([first, second]))
    model = keras.Model({"a/b": first, "x.y": second}, output)
    return kb.PosteriorEnsemble(model, weight_sets(model, 2))


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_inputs_that_tensorflow_sanitises_are_served_under_the_signature_keys(
        tmp_path, format):
    """The SavedModel's SignatureDef names the inputs ``a/b`` and ``x.y`` (what
    ``saved_model_cli show --all`` prints, what TF Serving's metadata and predict
    take); the loaded function's arguments are ``a_b`` and ``x_y``. Until
    2026-11-30 the stand-in took the arguments' names, and answered the client's
    request under the signature's names HTTP 400 "Missing named input: a_b in
    'inputs' object." (row format: "keys must be equal to: a_b,x_y"), where TF
    Serving serves it. Now it serves the signature's keys, and the client's
    answer is the in-process ensemble's."""
    ensemble = dotted_ensemble()
    path = ensemble.export(tmp_path / "dotted")
    assert sorted(served_signature(path)["inputs"]) == ["a/b", "x.y"]
    batch = {"a/b": np.linspace(-1, 1, 8, dtype="float32").reshape(4, 2),
             "x.y": np.linspace(0, 2, 12, dtype="float32").reshape(4, 3)}
    with serving(path, "dotted") as (url, _):
        answer = ServingClient("dotted", url=url, timeout=10).predict(batch, format=format)
    np.testing.assert_allclose(answer["probabilities"], ensemble.predict(batch, verbose=0),
                               atol=1e-6)
