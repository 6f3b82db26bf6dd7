"""An exported ensemble of two inputs queried the ways TF Serving's REST API is
queried (row and columnar, named inputs, a batch of 1, float64 and integer
JSON numbers) through :class:`keras_bnn.serving.ServingClient`, against the
stand-in of ``tf_serving_standin`` (TF Serving's own parsing rules, its
metadata endpoint, the SavedModel's ``serving_default``); and an ensemble of a
text (string) input exported and queried alike."""

import base64

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from ensemble_helpers import saved_model_cli, weight_sets
from keras_bnn.ensemble import CATEGORICAL_OUTPUTS
from keras_bnn.serving import ServingClient, ServingError
from tf_serving_standin import serving

# float32 outputs through JSON (shortest repr) against the in-process float32 run.
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(URL, HTTP server, ensemble) of a two-input member (``a`` [2], ``b`` [2]) exported
    and served as model ``two``."""
    keras.utils.set_random_seed(0)
    a, b = keras.Input((2,), name="a"), keras.Input((2,), name="b")
    logits = keras.layers.Dense(3)(keras.layers.Concatenate()([a, b]))
    model = keras.Model([a, b], logits)
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    version_dir = ensemble.export(tmp_path_factory.mktemp("models") / "two")
    with serving(version_dir, "two") as (url, httpd):
        yield url, httpd, ensemble


@pytest.fixture(scope="module")
def text_export(tmp_path_factory):
    """(ensemble, version directory) of a member of one text input (StringLookup,
    Embedding, Dense: 3 classes)."""
    keras.utils.set_random_seed(0)
    text = keras.Input((2,), dtype="string")
    tokens = keras.layers.StringLookup(vocabulary=["good", "bad", "fine"])(text)
    embedded = keras.layers.Flatten()(keras.layers.Embedding(4, 3)(tokens))
    model = keras.Model(text, keras.layers.Dense(3)(embedded))
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    return ensemble, ensemble.export(tmp_path_factory.mktemp("models") / "text")


def _batch(count, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((count, 2)).astype("float32") for _ in range(2)]


@pytest.mark.parametrize("format", ["columnar", "row"])
@pytest.mark.parametrize("form", ["dict", "list", "one", "float64", "ints"])
def test_two_inputs_in_every_request_form_match_the_ensemble(served, format, form):
    """Named inputs as a dict, a list with ``input_names``, a batch of one example,
    float64 arrays and integer JSON numbers where the signature takes float32: each
    answers the documented outputs, ``[N, 3]`` and ``[N]``, equal to the in-process
    ensemble's summary of the same (float32) values."""
    url, httpd, ensemble = served
    a, b = _batch(1 if form == "one" else 4)
    if form == "ints":
        a, b = np.round(3 * a).astype("int64"), np.round(3 * b).astype("int64")
    names = ensemble.member_input_names
    client = ServingClient("two", url=url, timeout=10,
                           input_names=names if form == "list" else None)
    sent = {"dict": {"a": a, "b": b}, "list": [a, b], "one": {"a": a, "b": b},
            "float64": {"a": a.astype("float64"), "b": b.astype("float64")},
            "ints": {"a": a, "b": b}}[form]
    outputs = client.predict(sent, format=format)
    expected = ensemble.predict_uncertainty([a.astype("float32"), b.astype("float32")])
    assert names == ["a", "b"] and sorted(outputs) == sorted(CATEGORICAL_OUTPUTS)
    for name, value in expected.items():
        assert outputs[name].shape == ((len(a), 3) if value.ndim == 2 else (len(a),))
        np.testing.assert_allclose(outputs[name], value, rtol=0, atol=TOLERANCE, err_msg=name)
    request = httpd.requests[-1]
    columns = request["inputs"] if format == "columnar" else request["instances"][0]
    assert sorted(columns) == ["a", "b"] and request["signature_name"] == "serving_default"
    if form == "ints":  # sent as JSON integers, which TF Serving takes for float32
        assert all(type(value) is int for value in np.ravel(columns["a"]).tolist())


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_a_list_of_same_shape_arrays_without_names_is_refused_naming_input_names(
        served, format):
    """``predict([a, b])`` without ``input_names`` (Keras' form for several inputs),
    ``a`` and ``b`` of one shape: until 2026-11-30 the client stacked them into one
    unnamed [2, N, 2] tensor and TF Serving answered HTTP 400 "inputs is a plain
    value/list, but expecting an object as multiple input tensors"; now the client
    refuses it, saying to name them, before any request."""
    url, httpd, _ = served
    a, b = _batch(4)
    before = len(httpd.requests)
    with pytest.raises(ValueError, match=r"several inputs.*input_names=.*np\.stack"):
        ServingClient("two", url=url, timeout=10).predict([a, b], format=format)
    assert len(httpd.requests) == before


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_an_empty_batch_is_refused_before_the_request(served, format):
    """A batch of 0 examples of shape [2]: JSON's ``[]`` loses the [0, 2] shape, so
    until 2026-11-30 TF Serving answered HTTP 400 "Shape of tensor a [0] is not
    compatible with expected shape [?,2]" (columnar) or "No values in 'instances'
    array" (row); now the client says why, naming the argument, before any request."""
    url, httpd, _ = served
    a, b = _batch(0)
    before = len(httpd.requests)
    with pytest.raises(ValueError, match=r"`inputs\['a'\]` has no examples \(shape \(0, 2\)\)"):
        ServingClient("two", url=url, timeout=10).predict({"a": a, "b": b}, format=format)
    assert len(httpd.requests) == before
    with pytest.raises(ServingError, match="No values in 'instances'"):
        ServingClient("two", url=url, timeout=10).request({"instances": []})


TEXT = [["good", "bad"], ["fine", "unseen"], ["bad", "bad"]]


def test_a_text_input_ensemble_exports_and_runs_in_saved_model_cli(text_export, tmp_path):
    """A member of a string input (StringLookup): until 2026-11-30 ``export``
    failed with AssertionError "Tried to export a function which references an
    'untracked' resource" (the lookup table of the member the ensemble holds
    untracked); now its signature takes ``inputs`` string ``[-1, 2]`` and
    ``saved_model_cli run --input_exprs`` answers the in-process summary."""
    ensemble, version_dir = text_export
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    (spec,) = signature.structured_input_signature[1].values()
    assert spec.dtype == tf.string and spec.shape.as_list() == [None, 2]
    expected = ensemble.predict_uncertainty(tf.constant(TEXT))
    done = saved_model_cli(
        "run", "--dir", version_dir, "--tag_set", "serve", "--signature_def",
        "serving_default", "--input_exprs", f"inputs={TEXT!r}", "--outdir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    for name, value in expected.items():
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), value, rtol=0,
                                   atol=TOLERANCE, err_msg=name)


def _b64(text):
    return {"b64": base64.b64encode(text.encode()).decode()}


@pytest.mark.parametrize("format", ["columnar", "row"])
@pytest.mark.parametrize("kind", ["str", "bytes"])
def test_the_client_sends_a_text_batch_as_json_strings_or_b64(text_export, format, kind):
    """``ServingClient.predict`` of a str array sends JSON strings, and of a
    ``tf.string`` tensor (its numpy value holds bytes) TF Serving's ``{"b64": ...}``
    objects; TF Serving reads either into a string input, and the answer is the
    in-process summary. Until 2026-11-30 both were refused ("must be numeric")."""
    ensemble, version_dir = text_export
    expected = ensemble.predict_uncertainty(tf.constant(TEXT))
    batch, wire = ((np.array(TEXT), TEXT) if kind == "str" else
                   (tf.constant(TEXT), [[_b64(text) for text in row] for row in TEXT]))
    with serving(version_dir, "text") as (url, httpd):
        outputs = ServingClient("text", url=url, timeout=10).predict(batch, format=format)
        sent = httpd.requests[-1]
        assert (sent["inputs"] if format == "columnar" else sent["instances"]) == wire
    for name, value in expected.items():
        np.testing.assert_allclose(outputs[name], value, rtol=0, atol=TOLERANCE, err_msg=name)


def test_the_ensemble_takes_the_served_dict_of_a_list_member_in_process(served):
    """A member ``keras.Model([a, b], ...)`` takes ``{"a": a, "b": b}`` in Keras (its
    Input names), as its export does: until 2026-11-30 the ensemble refused it ("`x`
    must be a list of 2 arrays (the member's inputs); got a dict"); now each
    prediction method equals the list's. Other keys are still refused."""
    _, _, ensemble = served
    a, b = _batch(5)
    np.testing.assert_array_equal(ensemble.predict({"b": b, "a": a}, verbose=0),
                                  ensemble.predict([a, b], verbose=0))
    np.testing.assert_array_equal(ensemble.predict_members({"a": a, "b": b}),
                                  ensemble.predict_members([a, b]))
    listed = ensemble.predict_uncertainty([a, b])
    for name, value in ensemble.predict_uncertainty({"a": a, "b": b}).items():
        np.testing.assert_array_equal(value, listed[name], err_msg=name)
    with pytest.raises(ValueError, match=r"`x` must be a list of 2 arrays.*got a dict"):
        ensemble.predict({"a": a, "c": b}, verbose=0)


def test_evaluate_and_datasets_take_the_dict_of_a_list_member_too():
    """``evaluate`` with that dict, and ``evaluate``/``predict`` of a dataset yielding
    it, as Keras takes them: until 2026-11-30 each raised TypeError in the ensemble's
    ``call`` ("Cannot convert 'a' to EagerTensor"); now each equals the list's."""
    keras.utils.set_random_seed(0)
    a_in, b_in = keras.Input((2,), name="a"), keras.Input((2,), name="b")
    model = keras.Model([a_in, b_in], keras.layers.Dense(3)(
        keras.layers.Concatenate()([a_in, b_in])))
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    ensemble.compile(loss=keras.losses.SparseCategoricalCrossentropy())
    (a, b), y = _batch(8), np.arange(8) % 3
    listed = ensemble.evaluate([a, b], y, verbose=0)
    assert ensemble.evaluate({"a": a, "b": b}, y, verbose=0) == listed
    dicts = tf.data.Dataset.from_tensor_slices(({"a": a, "b": b}, y)).batch(4)
    np.testing.assert_allclose(ensemble.evaluate(dicts, verbose=0), listed, rtol=1e-6)
    np.testing.assert_allclose(ensemble.predict(dicts.map(lambda x, _: x), verbose=0),
                               ensemble.predict([a, b], verbose=0), rtol=1e-6)  # batches of 4


@pytest.mark.parametrize("input_names", [None, ["inputs"]])
def test_a_list_of_one_array_is_that_inputs_batch(text_export, input_names):
    """``predict([x])`` of a one-input export (Keras' and ``ensemble.predict``'s
    reading of ``[x]``, e.g. code written for any number of inputs with
    ``input_names=ensemble.member_input_names``): until 2026-11-30 sent as one
    example [1, 3, 2], which the signature refused (HTTP 400 "Shape of tensor
    inputs [1,3,2] is not compatible with expected shape [?,2]"); now the batch."""
    ensemble, version_dir = text_export
    assert ensemble.member_input_names == ["inputs"]
    with serving(version_dir, "text") as (url, _):
        client = ServingClient("text", url=url, timeout=10, input_names=input_names)
        listed, plain = client.predict([np.array(TEXT)]), client.predict(np.array(TEXT))
    assert sorted(listed) == sorted(CATEGORICAL_OUTPUTS)
    for name, value in plain.items():
        np.testing.assert_array_equal(listed[name], value, err_msg=name)
