"""Export and serving defects found by the session-38 sweep (serve38)."""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import weight_sets
from keras_bnn.serving import ServingClient, ServingError
from tf_serving_standin import serving

#: The first double that rounds to inf as float32 (2**128 - 2**103: half an ulp
#: above float32's largest value, 2**128 - 2**104, a tie that rounds to even, inf).
FLOAT32_OVERFLOW = float(2**128 - 2**103)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(URL, server) of an exported ensemble of one float32 input [2], as ``m``."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    with serving(ensemble.export(tmp_path_factory.mktemp("models") / "m"), "m") as url_httpd:
        yield url_httpd


@pytest.mark.parametrize("value", [
    3.4028235e38,  # float32's largest value as numpy prints it: rounds to it
    np.nextafter(FLOAT32_OVERFLOW, 0.0),  # the largest double that rounds to it
    FLOAT32_OVERFLOW, 1e39])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_float64_values_are_refused_exactly_when_float32_rounds_them_to_inf(
        served, value, sign):
    """TF Serving casts each JSON number (a double) to the float32 input: a float64
    value up to half an ulp beyond float32's largest value rounds to that value,
    and the model answers; only one that rounds to ±inf is refused by the model
    (HTTP 400). The client refuses a batch exactly then. Until 2026-11-30 it
    refused every value above float32's largest, 3.4028234663852886e+38, so
    3.4028235e+38, float32's largest as printed, was refused as "outside the
    range [-3.4028235e+38, 3.4028235e+38]", a batch the server answers."""
    url, httpd = served
    batch = np.array([[sign * value, 0.0]])
    unchecked = ServingClient("m", url=url, timeout=10, check_inputs=False)
    client = ServingClient("m", url=url, timeout=10)
    if abs(value) >= FLOAT32_OVERFLOW:
        with pytest.raises(ServingError) as raised:
            unchecked.predict(batch)
        assert raised.value.status == 400
        before = len(httpd.requests)
        with pytest.raises(ValueError, match=r"`inputs` holds .*e\+3[89], outside the range "
                                             r"\[-3\.4028235e\+38, 3\.4028235e\+38\]"):
            client.predict(batch)
        assert len(httpd.requests) == before
    else:
        expected = unchecked.predict(batch)  # the server answers it
        np.testing.assert_array_equal(client.predict(batch)["probabilities"],
                                      expected["probabilities"])


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_an_empty_batch_of_scalar_examples_is_refused_before_the_request(
        tmp_path_factory, format):
    """A member of scalar examples (``keras.Input(())``) takes a batch of rank 1:
    until 2026-11-30 the client sent an empty one (it refused only empty batches
    of rank >= 2), and TF Serving answered the row format HTTP 400 "No values in
    'instances' array" and the columnar one outputs whose shape JSON's ``[]``
    loses (``probabilities`` (0,) where the signature gives (0, 3)). Now it is
    refused, naming the argument, before any request, as one of rank >= 2."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input(())
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Reshape((1,))(inputs)))
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    path = ensemble.export(tmp_path_factory.mktemp("models") / "scalar")
    with serving(path, "scalar") as (url, httpd):
        client = ServingClient("scalar", url=url, timeout=10)
        np.testing.assert_allclose(client.predict(np.ones(2, "float32"), format=format)[
            "probabilities"], ensemble.predict(np.ones(2, "float32"), verbose=0), atol=1e-6)
        before = len(httpd.requests)
        with pytest.raises(ValueError, match=r"`inputs` has no examples \(shape \(0,\)\).*"
                                             r"send at least one example"):
            client.predict(np.zeros(0, "float32"), format=format)
        assert len(httpd.requests) == before


@pytest.mark.filterwarnings("ignore:When providing `inputs` as a dict")
@pytest.mark.parametrize("names, same", [
    (("A", "a"), "graph ops of one name but for case"),
    (("a.b", "a/b"), "arguments 'a_b'"),
    (("1a", "arg_1a"), "arguments 'arg_1a'")])
def test_inputs_that_tensorflow_would_give_one_name_are_refused_before_writing(
        tmp_path, names, same):
    """TensorFlow names a signature's inputs as graph ops (unique regardless of
    case) and as Python arguments (``[^A-Za-z0-9]`` -> ``_``, ``arg_`` before a
    leading non-letter): two member inputs that become one such name each pass
    :func:`keras_bnn.export.check_input_names`. Until 2026-11-30 the export then
    failed inside ``write_out`` (after writing ``models.config``) with
    TensorFlow's "Got non-flat/non-unique argument names for SavedModel signature
    'serving_default': more than one argument to '__inference_signature_wrapper_
    serve_...' was named 'a'" or "Name collision after sanitization"; now it is a
    ValueError naming both inputs, and nothing is written."""
    inputs = {name: keras.Input((2,), name=f"input_{i}") for i, name in enumerate(names)}
    model = keras.Model(inputs, keras.layers.Dense(3)(
        keras.layers.Concatenate()(list(inputs.values()))))
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    with pytest.raises(ValueError, match=rf"inputs '{names[0]}' and '{names[1]}' .*{same}"):
        ensemble.export(tmp_path / "m")
    assert not (tmp_path / "m").exists()
