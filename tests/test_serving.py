"""keras_bnn.serving.ServingClient against a stand-in for TF Serving's REST
predict API: a local HTTP server that follows the API's JSON shapes and runs
the exported SavedModel (the real server cannot be installed here)."""

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import tensorflow as tf

from ensemble_helpers import INPUT_DIM, inputs, tiny_ensemble
from keras_bnn.ensemble import CATEGORICAL_OUTPUTS
from keras_bnn.serving import ServingClient, ServingError

MODEL_NAME = "tiny"
_PREDICT_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?:predict")


class _PredictHandler(BaseHTTPRequestHandler):
    """POST /v1/models/<name>[/versions/<v>]:predict, as TF Serving answers it.

    Row format: {"instances": [row | {input: row}, ...]} -> {"predictions":
    [{output: value}, ...]}; columnar: {"inputs": tensor | {input: tensor}}
    -> {"outputs": {output: tensor}}; failures -> HTTP 4xx {"error": text}.
    The model named "broken" answers 502 with a non-JSON body.
    """

    timeout = 10  # seconds a connection may stall: requests are bounded

    def log_message(self, *args):  # keep test output quiet
        pass

    def _reply(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        match = _PREDICT_PATH.fullmatch(self.path)
        if match and match.group(1) == "broken":
            return self._reply(502, b"<html>Bad Gateway</html>", "text/html")
        served = self.server.served
        if not match or match.group(1) != MODEL_NAME or match.group(2) not in (None, "1"):
            return self._reply(404, {"error": f"Servable not found for request: {self.path}"})
        try:
            request = json.loads(body)
        except ValueError as error:
            return self._reply(400, {"error": f"JSON Parse error: {error}"})
        self.server.requests.append(request)
        name = request.get("signature_name", "serving_default")
        if name not in served.signatures:
            message = f'Serving signature name: "{name}" not found in signature def'
            return self._reply(400, {"error": message})
        if ("instances" in request) == ("inputs" in request):
            return self._reply(400, {"error": "Missing 'inputs' or 'instances' key"})
        signature = served.signatures[name]
        ((input_name, spec),) = signature.structured_input_signature[1].items()
        if "instances" in request:
            rows = request["instances"]
            batch = [row[input_name] if isinstance(row, dict) else row for row in rows]
        else:
            batch = request["inputs"]
            batch = batch[input_name] if isinstance(batch, dict) else batch
        try:
            outputs = signature(**{input_name: tf.constant(batch, spec.dtype)})
        except (TypeError, ValueError, tf.errors.InvalidArgumentError) as error:
            return self._reply(400, {"error": getattr(error, "message", str(error))})
        outputs = {key: value.numpy().tolist() for key, value in outputs.items()}
        if "inputs" in request:
            return self._reply(200, {"outputs": outputs})
        rows = [dict(zip(outputs, values)) for values in zip(*outputs.values())]
        return self._reply(200, {"predictions": rows})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(base URL, the HTTP server, in-process ensemble) serving the export as version 1."""
    ensemble = tiny_ensemble(count=3)
    version_dir = ensemble.export(tmp_path_factory.mktemp("saved_models") / MODEL_NAME)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _PredictHandler)
    httpd.served = tf.saved_model.load(version_dir)
    httpd.requests = []
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}", httpd, ensemble
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def _client(url, **kwargs):
    return ServingClient(MODEL_NAME, url=url, timeout=10, **kwargs)


@pytest.mark.parametrize("format", ["columnar", "row"])
@pytest.mark.parametrize("named", [False, True])
def test_predict_matches_the_in_process_ensemble(server, format, named):
    url, httpd, ensemble = server
    x = inputs(6)
    outputs = _client(url).predict({"inputs": x} if named else x, format=format)
    expected = ensemble.predict_uncertainty(x)
    assert set(outputs) == set(CATEGORICAL_OUTPUTS)
    for name in CATEGORICAL_OUTPUTS:
        assert outputs[name].shape == expected[name].shape, name
        np.testing.assert_allclose(outputs[name], expected[name], atol=1e-5, err_msg=name)
    np.testing.assert_allclose(outputs["probabilities"].sum(axis=1), 1.0, atol=1e-5)
    # The request followed the API's shape for its format.
    request = httpd.requests[-1]
    assert request["signature_name"] == "serving_default"
    if format == "row":
        assert set(request) == {"signature_name", "instances"}
        assert len(request["instances"]) == 6
        first = request["instances"][0]
        assert (first["inputs"] if named else first) == pytest.approx(x[0].tolist())
    else:
        assert set(request) == {"signature_name", "inputs"}
        sent = request["inputs"]["inputs"] if named else request["inputs"]
        assert np.asarray(sent).shape == (6, INPUT_DIM)


def test_a_version_can_be_requested(server):
    url, _, ensemble = server
    x = inputs(2)
    client = _client(url, version=1)
    assert client.predict_url == f"{url}/v1/models/{MODEL_NAME}/versions/1:predict"
    np.testing.assert_allclose(
        client.predict(x)["probabilities"], ensemble.predict(x, verbose=0), atol=1e-5
    )
    with pytest.raises(ServingError, match="Servable not found") as caught:
        _client(url, version=2).predict(x)
    assert caught.value.status == 404


def test_server_errors_raise_serving_errors_with_the_message(server):
    url, _, _ = server
    shape_error = r"Shape of tensor inputs \[2,4\] is not compatible"
    with pytest.raises(ServingError, match=shape_error) as caught:
        _client(url).predict(np.ones((2, INPUT_DIM - 1)), format="row")
    assert caught.value.status == 400
    with pytest.raises(ServingError, match='signature name: "nope" not found'):
        _client(url, signature_name="nope").predict(inputs(1))
    with pytest.raises(ServingError, match=r"Unexpected reply \(HTTP 502\)") as caught:
        ServingClient("broken", url=url, timeout=10).predict(inputs(1))
    assert caught.value.status == 502


def test_an_unreachable_server_raises_a_serving_error():
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ServingError, match="Cannot reach TF Serving") as caught:
        ServingClient(MODEL_NAME, url=f"http://127.0.0.1:{port}", timeout=5).predict(inputs(1))
    assert caught.value.status is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(model_name=""), "model_name"),
        (dict(url="localhost:8501"), "url"),
        (dict(url="http://localhost:8501/v1"), "url"),
        (dict(version=0), "version"),
        (dict(timeout=0), "timeout"),
    ],
)
def test_bad_client_arguments_raise_value_errors(kwargs, message):
    arguments = dict(model_name=MODEL_NAME)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ServingClient(**arguments)


def test_bad_predict_arguments_raise_value_errors():
    client = ServingClient(MODEL_NAME)
    with pytest.raises(ValueError, match="format"):
        client.predict(inputs(1), format="grpc")
    with pytest.raises(ValueError, match="batch size"):
        client.predict({"a": np.ones((2, 1)), "b": np.ones((3, 1))}, format="row")


# ------------------------------------------------------- reliability (#12)
def test_a_nan_input_is_an_http_400_not_an_answer(server):
    """Item 5: the exported signature rejects NaN (the stand-in answers 400
    for InvalidArgument, as TF Serving does); the client refuses to send it."""
    url, _, _ = server
    row = ", ".join(["NaN"] * INPUT_DIM)  # what a non-strict JSON writer sends
    status, payload = _client(url)._exchange(f'{{"inputs": [[{row}]]}}'.encode())
    assert status == 400 and "NaN or Inf" in json.loads(payload)["error"]
    with pytest.raises(ValueError, match="`inputs` holds NaN or Inf"):
        _client(url).predict(np.full((1, INPUT_DIM), np.inf))


class _Hostile:
    """A raw TCP server on 127.0.0.1 answering every connection with ``behave(conn)``."""

    def __init__(self, behave):
        self.behave = behave
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                try:
                    conn.recv(65536)  # the request (small)
                    self.behave(conn)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def _reply(body, status="200 OK", extra=b""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n").encode() + extra + b"\r\n" + data


def _drip(conn):
    for byte in _reply({"outputs": [[1.0]]}):
        conn.sendall(bytes([byte]))
        time.sleep(0.2)


def _drip_and_close(conn):
    """An HTTP/1.0 reply with ``Connection: close``: the headers at once,
    then the body one byte per 0.2 s. Once the headers are read, http.client
    hands the socket to the response (``connection.sock`` is None while the
    body is read)."""
    conn.sendall(b"HTTP/1.0 200 OK\r\nConnection: close\r\n"
                 b"Content-Type: application/json\r\n\r\n")
    for byte in json.dumps({"outputs": [[1.0]]}).encode():
        conn.sendall(bytes([byte]))
        time.sleep(0.2)


_HOSTILE_REPLIES = {
    "truncated body": lambda c: c.sendall(_reply(b'{"outputs": [[1.0]]}')[:-5]),
    "bad status line": lambda c: c.sendall(b"HTTP/9 banana\r\n\r\n"),
    "not json": lambda c: c.sendall(_reply(b"<html>hello</html>")),
    "ragged arrays": lambda c: c.sendall(_reply({"outputs": {"p": [[1.0], [1.0, 2.0]]}})),
    "deeply nested": lambda c: c.sendall(_reply(b'{"outputs": ' + b"[" * 100_000
                                                + b"]" * 100_000 + b"}")),
    "nested not numeric": lambda c: c.sendall(_reply({"outputs": [["a"], ["b"]]})),
    "wrong batch size": lambda c: c.sendall(_reply({"outputs": {"p": [[0.5, 0.5]] * 3}})),
    "redirect": lambda c: c.sendall(_reply({}, "302 Found",
                                           b"Location: http://127.0.0.1:1/elsewhere\r\n")),
    "too large": lambda c: c.sendall(_reply({"outputs": [[0.0] * 300_000] * 2})),
    "closed": lambda c: None,
}


@pytest.mark.parametrize("case", sorted(_HOSTILE_REPLIES))
def test_every_malformed_reply_raises_a_serving_error(case):
    """Item 6: whatever the server sends, the client raises ServingError."""
    hostile = _Hostile(_HOSTILE_REPLIES[case])
    try:
        client = ServingClient(MODEL_NAME, url=hostile.url, timeout=5,
                               max_reply_bytes=1_000_000)
        with pytest.raises(ServingError) as raised:
            client.predict(inputs(2))
        if case == "redirect":  # not followed: the 302 itself is the error
            assert raised.value.status == 302 and "HTTP 302" in str(raised.value)
    finally:
        hostile.close()


@pytest.mark.parametrize("drip", [_drip, _drip_and_close], ids=["keep-alive", "close"])
def test_timeout_is_a_total_deadline_against_a_dripping_server(drip):
    """Item 6 (and #21 item 14, `Connection: close`): a server sending one
    byte per 0.2 s (each read within any per-read timeout) is cut off at the
    1 s deadline; 2.5 s leaves room for a loaded 2-core machine (the whole
    reply takes over 20 s)."""
    hostile = _Hostile(drip)
    try:
        client = ServingClient(MODEL_NAME, url=hostile.url, timeout=1.0)
        start = time.monotonic()
        with pytest.raises(ServingError, match="deadline"):
            client.predict(inputs(1))
        assert time.monotonic() - start < 2.5
    finally:
        hostile.close()
