"""Saving a model that samples LoRA weights through ``keras.saving.save_model``; an
export on a worker that is not the chief; integers beyond 2**24 to a float32 input of
TF Serving's REST API."""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.serving import ServingClient
from tf_serving_standin import serving


@pytest.fixture(scope="module")
def served_floats(tmp_path_factory):
    """(URL, server) of an ensemble of two Dense(3) members on one float32 input [2] whose
    kernels are ~1e-7, so inputs ~2**24 give logits ~1, as ``floats``."""
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    rng = np.random.default_rng(0)
    sets = [[rng.normal(size=(2, 3)).astype("float32") * 1e-7, np.zeros(3, "float32")]
            for _ in range(2)]
    ensemble = kb.PosteriorEnsemble(model, sets)
    version = ensemble.export(tmp_path_factory.mktemp("models") / "floats")
    with serving(version, "floats") as served:
        yield served


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_integers_beyond_2_24_to_a_float32_input_are_sent_and_rounded(served_floats, format):
    """TF Serving reads any JSON number for a DT_FLOAT input as a double cast to float
    (json_tensor.cc since 2.5, commit 57dac6cd dropped IsLosslessDecimal). Until
    2026-11-30 the client refused integers above 2**24 - 1 ("outside the exact integers
    [-16777215, 16777215]") and the stand-in answered 400 "without loss of precision":
    now the server gets the integers as JSON integers and answers as for the batch
    rounded to float32 (2**24 + 1 and 2**40 + 1 are not float32 numbers)."""
    url, httpd = served_floats
    ints = np.array([[2**24 + 1, -(2**24) - 3], [2**40 + 1, 7]], "int64")
    client = ServingClient("floats", url=url, timeout=10)
    got = client.predict(ints, format=format)
    sent = httpd.requests[-1]
    leaves = sent["inputs"] if format == "columnar" else sent["instances"]
    assert leaves == ints.tolist() and all(type(v) is int for row in leaves for v in row)
    rounded = ints.astype("float32")
    assert not np.array_equal(rounded.astype("int64"), ints)  # the batch does round
    want = client.predict(rounded, format=format)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    assert np.all(np.isfinite(want["probabilities"]))
