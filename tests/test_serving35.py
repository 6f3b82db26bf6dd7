"""Serving follow-ups of 2026-11-30: a model name or version the server does not
serve (TF Serving's 404 ``Servable not found``), and float16 / bfloat16 inputs,
which TF Serving's REST API cannot fill from JSON (``json_tensor.cc``,
``AddValueToTensor``: HTTP 501 for every value, tensorflow/serving#1639).
Served by the stand-in of ``tf_serving_standin``."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from ensemble_helpers import INPUT_DIM, inputs, tiny_ensemble, weight_sets
from keras_bnn.serving import ServingClient, ServingError
from tf_serving_standin import serving


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(URL, server, ensemble) of a tiny categorical ensemble served as ``m``, version 1."""
    ensemble = tiny_ensemble(count=2)
    with serving(ensemble.export(tmp_path_factory.mktemp("models") / "m"), "m") as (url, httpd):
        yield url, httpd, ensemble


@pytest.mark.parametrize("check_inputs", [True, False])
@pytest.mark.parametrize("name, version, servable, asked", [
    ("other", None, r"model_name='other' \(its latest version\)", r"Latest\(other\)"),
    ("m", 2, r"model_name='m' version=2", r"Specific\(m, 2\)"),
])
def test_a_model_the_server_does_not_serve_is_a_404_naming_it(
        served, check_inputs, name, version, servable, asked):
    """Until 2026-11-30 the stand-in answered a predict for any name or version
    (a misspelt ``model_name`` got predictions), and the client took the metadata
    404 as a server without the endpoint; now TF Serving's 404, raised as a
    ServingError naming the argument, the request and the URL, before any predict
    when the metadata answered it."""
    url, httpd, _ = served
    before = len(httpd.requests)
    client = ServingClient(name, url=url, version=version, timeout=10,
                           check_inputs=check_inputs)
    with pytest.raises(ServingError, match=rf"TF Serving serves no {servable}: check "
                                           rf"`model_name` and `version`.*HTTP 404.*"
                                           rf"Servable not found for request: {asked}") as raised:
        client.predict(inputs(2))
    assert raised.value.status == 404 and str(raised.value).endswith(f"({raised.value.url})")
    assert raised.value.url == (client.metadata_url if check_inputs else client.predict_url)
    assert len(httpd.requests) == before


def test_a_model_name_is_url_decoded_as_tf_serving_does(tmp_path):
    """The client sends "my model" as my%20model; TF Serving decodes it
    (ParseModelInfo), as the stand-in now does: the name answers, checked."""
    version_dir = tiny_ensemble(count=2).export(tmp_path / "m")
    with serving(version_dir, "my model") as (url, httpd):
        client = ServingClient("my model", url=url, timeout=10)
        assert client.predict(inputs(2))["probabilities"].shape == (2, 3)
        assert client.signature_inputs() == {"inputs": ("DT_FLOAT", (-1, INPUT_DIM))}
        assert httpd.metadata_requests == ["/v1/models/my%20model/metadata"]


def _half_model(path, dtype):
    """A SavedModel whose ``serving_default`` takes one ``dtype`` input [-1, 3]."""
    module = tf.Module()
    module.serve = tf.function(lambda x: {"y": tf.cast(x, tf.float32) * 2.0},
                               input_signature=[tf.TensorSpec([None, 3], dtype, name="x")])
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


@pytest.mark.parametrize("dtype, name", [(tf.float16, "DT_HALF"), (tf.bfloat16, "DT_BFLOAT16")])
def test_a_half_input_is_refused_before_sending(tmp_path, dtype, name):
    """TF Serving answers HTTP 501 "Conversion of JSON Value: 1.0 to type: half" to
    any JSON value for such an input (the stand-in too, now); until 2026-11-30 the
    client checked only the shape, sending values beyond float16's range too."""
    with serving(_half_model(tmp_path / "half", dtype), "h") as (url, httpd):
        for batch in (np.ones((2, 3), "float32"), np.full((2, 3), 1e5), [["a"] * 3] * 2):
            with pytest.raises(ValueError, match=rf"`inputs` goes to the signature's input "
                                                 rf"'x' of dtype {name}, which TF Serving's "
                                                 rf"REST API cannot fill from JSON"):
                ServingClient("h", url=url, timeout=10).predict(batch)
        assert not httpd.requests
        with pytest.raises(ServingError, match=r"HTTP 501\): Conversion of JSON Value: 1\.0 "
                                               rf"to type: {name[3:].lower()}") as raised:
            ServingClient("h", url=url, timeout=10, check_inputs=False).predict(
                np.ones((2, 3), "float32"))
        assert raised.value.status == 501


@pytest.mark.parametrize("dtype, served, batch, outside, refused", [
    ("float16", "DT_FLOAT", inputs(4), 7e4, r"\[-65504, 65504\], the range of float16"),
    ("bfloat16", "DT_FLOAT", inputs(4), None, None),
    ("uint16", "DT_INT32", np.arange(4 * INPUT_DIM).reshape(4, -1) * 3000, 65536,
     r"\[0, 65535\], the range of uint16"),
])
def test_an_input_json_cannot_fill_is_served_as_one_it_can(
        tmp_path, dtype, served, batch, outside, refused):
    """Until 2026-11-30 the export's input had the member's dtype, float16
    (DT_HALF), bfloat16 or uint16, which no REST request can fill; now float32
    (int32 for uint16), cast inside after a range check: the served predictions are
    the in-process ensemble's, and a value outside the dtype's range is the model's
    HTTP 400, not an overflow to inf or a wrapped integer."""
    keras.utils.set_random_seed(0)
    x = keras.Input((INPUT_DIM,), dtype=dtype)
    scaled = keras.layers.Rescaling(1e-4)(keras.ops.cast(x, "float32"))
    model = keras.Model(x, keras.layers.Dense(3)(scaled))
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    with serving(ensemble.export(tmp_path / "m"), "m") as (url, _):
        client = ServingClient("m", url=url, timeout=10)
        assert client.signature_inputs() == {"inputs": (served, (-1, INPUT_DIM))}
        np.testing.assert_allclose(client.predict(batch)["probabilities"],
                                   ensemble.predict(batch.astype(dtype), verbose=0), atol=1e-5)
        if outside is not None:
            with pytest.raises(ServingError, match=rf"`inputs` holds values outside "
                                                   rf"{refused}, the dtype of the member "
                                                   r"input") as raised:
                client.predict(np.full((2, INPUT_DIM), outside, batch.dtype))
            assert raised.value.status == 400


def test_a_zero_padded_version_is_that_version(tmp_path):
    """TF Serving reads the entry "001" as version 1 (``absl::SimpleAtoi``). Until
    2026-11-30 an export with ``version=1`` published "1" next to it (version 1
    twice), and one of another signature was published over it, as the newest
    version "001" was looked for as "1" and not compared."""
    model_dir = tmp_path / "m"
    os.rename(tiny_ensemble(count=2).export(model_dir), model_dir / "001")
    x = keras.Input((INPUT_DIM + 2,))
    other = keras.Model(x, keras.layers.Dense(2)(x))
    other = kb.PosteriorEnsemble(other, weight_sets(other, 2))
    with pytest.raises(FileExistsError, match="Version directory exists") as raised:
        other.export(model_dir, version=1)
    assert raised.value.filename == str(model_dir / "001")
    with pytest.raises(ValueError, match=r"serves version 1 with another 'serving_default' "
                                         r"signature"):
        other.export(model_dir)
    assert sorted(os.listdir(model_dir)) == ["001", "models.config"]
