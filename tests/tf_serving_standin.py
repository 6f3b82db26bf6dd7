"""A stand-in for TensorFlow Serving's REST API (the real server cannot be installed
here) that runs an exported SavedModel's ``serving_default``:

* inputs are named by the SignatureDef's input keys, as TF Serving names them
  (``a/b``, where the loaded function's argument is ``a_b``: until 2026-11-30
  the stand-in took the arguments' names);
* ``POST .../:predict`` parses the body by TF Serving's own rules
  (``tensorflow_serving/util/json_tensor.cc``: a tensor's shape is read from
  its nested lists, ``[]`` is shape ``[0]``; several inputs need JSON objects;
  ``instances`` must not be empty; ``AddValueToTensor``'s rules per dtype: a
  float input takes any JSON number, read as a double and cast (integers beyond
  ``2**24`` rounded to float32, decimals beyond its range ±inf: TF Serving 2.5 on,
  whose commit 57dac6cd dropped the "without loss of precision" check; until
  2026-11-30 the stand-in kept it), an integer input
  JSON integers, a bool input ``true``/``false``, a string input strings or
  ``{"b64": ...}``);
* ``GET /v1/models/<name>[/versions/<v>]/metadata`` answers TF Serving's
  ``GetModelMetadata`` JSON (``tensorflow_serving/model_servers/
  http_rest_api_util.cc``, ``ToJsonString``: ``{"model_spec": {...},
  "metadata": {"signature_def": {"signature_def": {name: SignatureDef}}}}``, each
  message printed with proto field names and default values, so int64 dim sizes
  are JSON strings, ``"-1"`` for the batch), made from the SavedModel's own
  MetaGraphDef;
* a predict or metadata request for another model name or version answers 404
  ``{"error": "Servable not found for request: Latest(<name>)"}`` (or
  ``Specific(<name>, <version>)``), as TF Serving's ``BasicManager`` does (until
  2026-11-30 a predict for any name or version answered).
"""

import base64
import contextlib
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?(:predict|/metadata)")
#: The float dtypes, each filled as ``val.GetFloat()``/``GetDouble()``: numpy's dtype.
_FLOATS = {tf.float32: np.float32, tf.float64: np.float64}
_INT_RANGES = {tf.int32: (-2**31, 2**31 - 1), tf.int16: (-2**31, 2**31 - 1),
               tf.int8: (-2**31, 2**31 - 1), tf.uint8: (-2**31, 2**31 - 1),
               tf.int64: (-2**63, 2**63 - 1), tf.uint32: (0, 2**32 - 1),
               tf.uint64: (0, 2**64 - 1)}
#: The dtypes AddValueToTensor converts JSON to; any other (DT_HALF, DT_BFLOAT16)
#: answers Unimplemented, HTTP 501 (tensorflow/serving#1639).
_JSON_DTYPES = {*_FLOATS, *_INT_RANGES, tf.bool, tf.string}


def _error(message, status=400):
    return status, {"error": message}


def _decoded(value):
    """A string tensor's JSON: ``{"b64": ...}`` objects are its binary strings."""
    if isinstance(value, dict):
        return base64.b64decode(value["b64"])
    return [_decoded(item) for item in value] if isinstance(value, list) else value


def _leaf_error(value, dtype):
    """TF Serving's error for one JSON leaf ``value`` of a ``dtype`` input, or None."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if dtype.is_floating:
        fits = number
    elif dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        fits = number and isinstance(value, int) and low <= value <= high
    else:
        fits = isinstance(value, {tf.bool: bool, tf.string: (str, dict)}[dtype])
    return None if fits else _error(f"JSON Value: {json.dumps(value)} is not of expected "
                                    f"type: {dtype.name}")


def _check_leaves(value, dtype):
    if dtype not in _JSON_DTYPES:
        while isinstance(value, list) and value:
            value = value[0]
        name = {tf.float16: "half"}.get(dtype, dtype.name)  # TF's DataTypeString
        return _error(f"Conversion of JSON Value: {json.dumps(value)} to type: {name}", 501)
    if isinstance(value, list):
        return next(filter(None, (_check_leaves(item, dtype) for item in value)), None)
    return _leaf_error(value, dtype)


def _tensors(request, specs):
    """The named input tensors TF Serving builds from ``request``, or its (status,
    error reply)."""
    if "instances" in request:
        rows = request["instances"]
        if not rows:
            return _error("No values in 'instances' array")
        if len(specs) > 1 and not isinstance(rows[0], dict):
            return _error("instances is a plain list, but expecting list of objects as "
                          "multiple input tensors required as per tensorinfo_map")
        if not isinstance(rows[0], dict):
            rows = [{next(iter(specs)): row} for row in rows]
        if any(sorted(row) != sorted(specs) for row in rows):
            return _error(f"keys must be equal to: {','.join(sorted(specs))}")
        named = {name: [row[name] for row in rows] for name in specs}
    else:
        named = request["inputs"]
        if not isinstance(named, dict):
            if len(specs) > 1:
                return _error("inputs is a plain value/list, but expecting an object as "
                              "multiple input tensors required as per tensorinfo_map")
            named = {next(iter(specs)): named}
        missing = sorted(set(specs) - set(named))
        if missing:
            return _error(f"Missing named input: {missing[0]} in 'inputs' object.")
    tensors = {}
    for name, spec in specs.items():
        error = _check_leaves(named[name], spec.dtype)
        if error:
            return error
        value = named[name]
        if spec.dtype in _FLOATS:  # rapidjson's GetFloat: the double, cast (beyond: ±inf)
            with np.errstate(over="ignore"):
                value = np.asarray(value, np.float64).astype(_FLOATS[spec.dtype])
        tensors[name] = tf.constant(np.asarray(
            _decoded(value) if spec.dtype == tf.string else value), spec.dtype)
    return tensors


def _serving_graph(version_dir):
    """The ``serve`` MetaGraphDef of the SavedModel in ``version_dir`` (what TF
    Serving loads)."""
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((Path(version_dir) / "saved_model.pb").read_bytes())
    (graph,) = [graph for graph in saved_model.meta_graphs if "serve" in graph.meta_info_def.tags]
    return graph


def signature_inputs(version_dir, signature):
    """(``{key: TensorSpec}``, ``{key: argument}``): the inputs of ``serving_default``
    as TF Serving takes them, by its SignatureDef's input keys (``saved_model_cli
    show --all``), and the argument of the loaded ``signature`` each feeds.

    TensorFlow sanitises an argument's name (``a/b`` -> ``a_b``) and keeps the key
    as its TensorSpec's name; a key no argument carries is an error here."""
    inputs = _serving_graph(version_dir).signature_def["serving_default"].inputs
    specs = {key: tf.TensorSpec(tf.TensorShape(info.tensor_shape), tf.as_dtype(info.dtype))
             for key, info in inputs.items()}
    arguments = {spec.name: argument
                 for argument, spec in signature.structured_input_signature[1].items()}
    if set(arguments) != set(specs):
        raise ValueError(f"{version_dir}: the SignatureDef's inputs {sorted(specs)} are not "
                         f"the loaded signature's {sorted(arguments)}")
    return specs, arguments


def metadata_json(version_dir, name, version):
    """TF Serving's ``GET .../metadata`` reply for the SavedModel in ``version_dir``."""
    graph = _serving_graph(version_dir)

    def as_json(message):
        return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)

    return {"model_spec": {"name": name, "signature_name": "", "version": str(version)},
            "metadata": {"signature_def": {"signature_def": {
                key: as_json(signature) for key, signature in graph.signature_def.items()}}}}


class _TFServing(BaseHTTPRequestHandler):
    """POST .../:predict: parses the body as TF Serving does and runs the signature;
    GET .../metadata: the signatures, as TF Serving answers (when the server has
    ``metadata``; else 404 with a plain-text body, as a proxy without it)."""

    def log_message(self, *args):
        pass

    def _answer(self, request):
        signature, arguments = self.server.signature, self.server.arguments
        tensors = _tensors(request, self.server.inputs)
        if isinstance(tensors, tuple):
            return tensors
        try:
            outputs = signature(**{arguments[key]: value for key, value in tensors.items()})
        except tf.errors.InvalidArgumentError as error:
            return _error(error.message)
        outputs = {name: value.numpy().tolist() for name, value in outputs.items()}
        if "inputs" in request:
            return 200, {"outputs": outputs}
        return 200, {"predictions": [dict(zip(outputs, row)) for row in zip(*outputs.values())]}

    def _send(self, status, reply):
        body = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _unserved(self, endpoint):
        """TF Serving's 404 for a path that is not ``endpoint`` of the served model's
        name and version (True when sent)."""
        match = _PATH.fullmatch(self.path)
        if not match or match.group(3) != endpoint:
            self._send(404, b"Not Found")
            return True
        name, version, _ = match.groups()
        name = urllib.parse.unquote(name)  # as TF Serving's ParseModelInfo (DecodeArg)
        if name != self.server.model_name or version not in (None, self.server.version):
            servable = f"Specific({name}, {version})" if version else f"Latest({name})"
            self._send(404, {"error": f"Servable not found for request: {servable}"})
            return True
        return False

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self._unserved(":predict"):
            return
        self.server.requests.append(request)
        answer = self._answer(request)
        if self.server.after_predict:  # e.g. a new version loaded while answering
            self.server.after_predict()
        self._send(*answer)

    def do_GET(self):
        self.server.metadata_requests.append(self.path)
        if self.server.metadata is None:
            return self._send(404, b"Not Found")
        if not self._unserved("/metadata"):
            self._send(200, self.server.metadata)


def load(httpd, version_dir, version):
    """Makes the stand-in ``httpd`` serve ``version_dir`` as ``version`` (as TF Serving
    loads a new version directory and serves the latest), its metadata too when it
    has the endpoint."""
    httpd.signature = tf.saved_model.load(str(version_dir)).signatures["serving_default"]
    httpd.inputs, httpd.arguments = signature_inputs(version_dir, httpd.signature)
    httpd.version = str(version)
    if httpd.metadata is not None:
        httpd.metadata = metadata_json(version_dir, httpd.model_name, version)


def start(version_dir, model_name="model", metadata=True, port=0):
    """(URL, HTTP server) of the stand-in serving ``version_dir`` as version 1 of
    ``model_name`` on ``port`` (0: a free one), from a daemon thread;
    ``metadata=False``: without the metadata endpoint. The server records
    ``requests`` (the predict bodies) and ``metadata_requests`` (the GET paths);
    :func:`load` swaps in another version; ``httpd.after_predict``, when set, is
    called after each predict is answered, before the reply is sent."""
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _TFServing)
    httpd.model_name, httpd.metadata = model_name, metadata or None
    load(httpd, version_dir, 1)
    httpd.requests, httpd.metadata_requests, httpd.after_predict = [], [], None
    httpd.thread = threading.Thread(target=httpd.serve_forever,
                                    kwargs={"poll_interval": 0.05}, daemon=True)
    httpd.thread.start()
    return f"http://127.0.0.1:{httpd.server_port}", httpd


@contextlib.contextmanager
def serving(*args, **kwargs):
    """:func:`start`'s (URL, HTTP server) while in the block; shut down after it."""
    url, httpd = start(*args, **kwargs)
    try:
        yield url, httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        httpd.thread.join(timeout=5)
