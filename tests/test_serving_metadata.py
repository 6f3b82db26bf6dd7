"""``ServingClient`` reads the served signature from TF Serving's metadata endpoint
(``GET /v1/models/<name>[/versions/<v>]/metadata``) once, and checks each batch
against its inputs before the predict request: input names, dtypes by TF
Serving's JSON rules, values the input's dtype cannot take, shapes. Until
2026-11-30 each such batch went to the server, which answered HTTP 400 with its
own terse message. Served by the stand-in of ``tf_serving_standin`` (TF
Serving's metadata JSON and parsing rules)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from ensemble_helpers import weight_sets
from keras_bnn.serving import ServingClient, ServingError
from tf_serving_standin import serving


def _export(tmp_path_factory, name, inputs, outputs):
    keras.utils.set_random_seed(0)
    model = keras.Model(inputs, outputs)
    ensemble = kb.PosteriorEnsemble(model, weight_sets(model, 2))
    return ensemble.export(tmp_path_factory.mktemp("models") / name)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """(URL, server) of a member of two float32 inputs ``a`` [2], ``b`` [2], as ``two``."""
    a, b = keras.Input((2,), name="a"), keras.Input((2,), name="b")
    logits = keras.layers.Dense(3)(keras.layers.Concatenate()([a, b]))
    with serving(_export(tmp_path_factory, "two", [a, b], logits), "two") as served:
        yield served


@pytest.fixture(scope="module")
def ids(tmp_path_factory):
    """(URL, server) of a member of one int32 input [3] (token ids), as ``ids``."""
    tokens = keras.Input((3,), dtype="int32")
    embedded = keras.layers.Flatten()(keras.layers.Embedding(10, 2)(tokens))
    with serving(_export(tmp_path_factory, "ids", tokens, keras.layers.Dense(3)(embedded)),
                 "ids") as served:
        yield served


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """(URL, server) of a member of one string input [2], as ``text``."""
    words = keras.Input((2,), dtype="string")
    tokens = keras.layers.StringLookup(vocabulary=["good", "bad"])(words)
    embedded = keras.layers.Flatten()(keras.layers.Embedding(3, 2)(tokens))
    with serving(_export(tmp_path_factory, "text", words, keras.layers.Dense(3)(embedded)),
                 "text") as served:
        yield served


FLOATS = np.zeros((4, 2), "float32")
IDS = np.ones((4, 3), "int32")

#: (server, client arguments, batch, the ValueError's message): each an HTTP 400
#: from the server until 2026-11-30.
REFUSED = {
    "bool": ("two", {}, {"a": FLOATS > 0, "b": FLOATS},
             r"`inputs\['a'\]` has dtype bool, but the signature's input 'a' is float32 "
             r"\(DT_FLOAT\), which takes float or int arrays; cast it with "
             r"\.astype\('float32'\)"),
    "float64 beyond float32": ("two", {}, {"a": FLOATS + np.float64(1e39), "b": FLOATS},
                               r"`inputs\['a'\]` holds 1e\+39, outside the range "
                               r"\[-3\.4028235e\+38, 3\.4028235e\+38\] of the signature's "
                               r"input 'a' \(float32\)"),
    "features": ("two", {}, {"a": FLOATS, "b": np.zeros((4, 3))},
                 r"`inputs\['b'\]` has shape \(4, 3\), but the signature's input 'b' takes "
                 r"shape \[-1, 2\] \(-1: any size\)"),
    "rank": ("two", {}, {"a": FLOATS, "b": np.zeros((4, 2, 1))},
             r"`inputs\['b'\]` has shape \(4, 2, 1\), but .* takes shape \[-1, 2\]"),
    "misspelled": ("two", {}, {"a": FLOATS, "bb": FLOATS},
                   r"`inputs` must name the inputs of signature 'serving_default', "
                   r"\['a', 'b'\]; unknown \['bb'\]; missing \['b'\]"),
    "extra": ("two", {}, {"a": FLOATS, "b": FLOATS, "c": FLOATS}, r"; unknown \['c'\]\."),
    "input_names": ("two", {"input_names": ["a", "c"]}, [FLOATS, FLOATS],
                    r"`input_names` must name .*\['a', 'b'\]; unknown \['c'\]; missing \['b'\]"),
    "one of two": ("two", {}, FLOATS,
                   r"`inputs` is one batch, but signature 'serving_default' has the inputs "
                   r"\['a', 'b'\]: give a dict"),
    "floats to ids": ("ids", {}, IDS + 0.0,
                      r"`inputs` has dtype float64, but the signature's input 'inputs' is "
                      r"int32 \(DT_INT32\), which takes int arrays; cast it with "
                      r"\.astype\('int32'\)"),
    "beyond int32": ("ids", {}, IDS.astype("int64") * 2**40,
                     r"`inputs` holds 1099511627776, outside the range "
                     r"\[-2147483648, 2147483647\] .* \(int32\)"),
    "str to ids": ("ids", {}, IDS.astype(str), r"dtype <U\d+, .* which takes int arrays\.$"),
    "ids to text": ("text", {}, np.ones((4, 2), "int64"),
                    r"`inputs` has dtype int64, but the signature's input 'inputs' is string "
                    r"\(DT_STRING\), which takes str or bytes arrays\.$"),
    "text shape": ("text", {}, np.array([["good"], ["bad"]]),
                   r"has shape \(2, 1\), but .* takes shape \[-1, 2\]"),
}


@pytest.mark.parametrize("format", ["columnar", "row"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_batch_the_signature_does_not_take_is_refused_before_predicting(
        request, case, format):
    """Each batch is refused with a ValueError naming the argument, the input, and
    what it takes, and no predict request is made; the server says why it refuses
    it too (the stand-in applies TF Serving's rules), so the check keeps nothing
    the server takes from it."""
    server, kwargs, batch, message = REFUSED[case]
    url, httpd = request.getfixturevalue(server)
    before = len(httpd.requests)
    with pytest.raises(ValueError, match=message):
        ServingClient(server, url=url, timeout=10, **kwargs).predict(batch, format=format)
    assert len(httpd.requests) == before
    if (case, format) == ("extra", "columnar"):
        return  # TF Serving reads the signature's names from "inputs" and ignores others
    unchecked = ServingClient(server, url=url, timeout=10, check_inputs=False, **kwargs)
    with pytest.raises(ServingError) as raised:
        unchecked.predict(batch, format=format)
    assert raised.value.status == 400 and len(httpd.requests) == before + 1


def test_the_metadata_is_read_once_in_tf_servings_form(two):
    """The client GETs ``.../metadata`` (of the pinned version, when given) once, at
    its first predict, and reads TF Serving's JSON (dims as int64 strings, -1 the
    batch); ``check_inputs=False`` never asks; accepted batches answer as before."""
    url, httpd = two
    batch = {"a": FLOATS, "b": np.ones((4, 2), "int64")}
    start = len(httpd.metadata_requests)
    client = ServingClient("two", url=url, timeout=10, version=1)
    for format in ("columnar", "row", "row"):
        assert client.predict(batch, format=format)["probabilities"].shape == (4, 3)
    assert httpd.metadata_requests[start:] == ["/v1/models/two/versions/1/metadata"]
    assert client.metadata_url == f"{url}/v1/models/two/versions/1/metadata"
    assert client.signature_inputs() == {"a": ("DT_FLOAT", (-1, 2)), "b": ("DT_FLOAT", (-1, 2))}
    reply = client.metadata()
    assert reply["model_spec"] == {"name": "two", "signature_name": "", "version": "1"}
    dims = reply["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"][
        "a"]["tensor_shape"]["dim"]
    assert dims == [{"size": "-1", "name": ""}, {"size": "2", "name": ""}]
    unchecked = ServingClient("two", url=url, timeout=10, check_inputs=False)
    assert unchecked.predict(batch)["probabilities"].shape == (4, 3)
    assert unchecked.signature_inputs() is None
    assert len(httpd.metadata_requests) == start + 2


def test_a_server_without_the_metadata_endpoint_is_sent_unchecked_batches(tmp_path_factory):
    """A server answering the metadata GET with an HTTP error (404, plain text: a proxy
    that forwards only ``:predict``) still serves predictions, and its own errors
    come back as ServingError as before. TF Serving's 404 ``Servable not found``
    is no such server (test_serving35)."""
    x = keras.Input((2,), name="x")
    version_dir = _export(tmp_path_factory, "plain", x, keras.layers.Dense(3)(x))
    with serving(version_dir, "plain", metadata=False) as (url, httpd):
        client = ServingClient("plain", url=url, timeout=10)
        assert client.predict(FLOATS)["probabilities"].shape == (4, 3)
        assert client.signature_inputs() is None
        with pytest.raises(ServingError, match="not of expected type: float") as raised:
            client.predict(FLOATS > 0)
        assert raised.value.status == 400 and len(httpd.requests) == 2
    with serving(version_dir, "plain") as (url, httpd):
        with pytest.raises(ServingError, match=r"Servable not found .*Specific\(plain, 2\)"):
            ServingClient("plain", url=url, timeout=10, version=2).metadata()


def test_an_unknown_signature_name_is_refused_naming_the_served_ones(two):
    """``signature_name="serving"`` (a typo): until 2026-11-30 the server's 400
    ('Serving signature name: "serving" not found'); now a ValueError naming the
    argument and the served signatures, before any predict request."""
    url, httpd = two
    before = len(httpd.requests)
    with pytest.raises(ValueError, match=r"`signature_name` must be one of the served "
                                         r"model's signatures \['serving_default'\]; got "
                                         r"'serving'"):
        ServingClient("two", url=url, signature_name="serving").predict({"a": FLOATS,
                                                                         "b": FLOATS})
    assert len(httpd.requests) == before


def test_text_and_ids_batches_the_signature_takes_still_answer(ids, text):
    """int64 ids to an int32 input, str and bytes (a ``tf.string`` tensor) to a
    string input pass the checks and answer."""
    url, _ = ids
    assert ServingClient("ids", url=url).predict(IDS.astype("int64"))[
        "probabilities"].shape == (4, 3)
    url, _ = text
    words = [["good", "bad"], ["bad", "odd"]]
    client = ServingClient("text", url=url)
    for batch in (np.array(words), tf.constant(words), words):
        assert client.predict(batch, format="row")["probabilities"].shape == (2, 3)
