"""A small client for TensorFlow Serving's REST predict API.

The API (https://www.tensorflow.org/tfx/serving/api_rest):

    POST http://host:port/v1/models/<name>[/versions/<version>]:predict

with a JSON body in one of two formats:

* row ("instances"): ``{"signature_name": ..., "instances": [row, ...]}``,
  one entry per example (for a signature with several named inputs each row
  is an object ``{input_name: value}``); the reply is
  ``{"predictions": [...]}``, one entry per example (an object
  ``{output_name: value}`` per example when the signature has several named
  outputs);
* columnar ("inputs"): ``{"signature_name": ..., "inputs": tensor}`` or
  ``{"inputs": {input_name: tensor}}``; the reply is ``{"outputs": tensor}``
  or ``{"outputs": {output_name: tensor}}``.

A failed request comes back as ``{"error": "<message>"}`` (with an HTTP error
status): :class:`ServingClient` raises it as :class:`ServingError`. Only the
standard library is used (``urllib``).

Example, for a :meth:`keras_bnn.PosteriorEnsemble.export`-ed model served as
``cifar10_atmc``::

    client = ServingClient("cifar10_atmc", url="http://localhost:8501")
    outputs = client.predict(images)           # dict of numpy arrays
    outputs["probabilities"], outputs["mutual_information"]
"""

import json
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

from keras_bnn.validation import check_int

FORMATS = ("columnar", "row")


class ServingError(RuntimeError):
    """A predict request failed: the server's ``{"error": ...}`` message, an
    HTTP error without one, an unreachable server or a malformed reply.

    Attributes:
        status: the HTTP status code, or ``None`` when no reply came.
        url: the URL requested.
    """

    def __init__(self, message, status=None, url=None):
        super().__init__(message)
        self.status = status
        self.url = url


def _to_json(value):
    """Nested lists of a tensor-like value, for the JSON body."""
    return np.asarray(value).tolist()


class ServingClient:
    """Calls one model's ``:predict`` endpoint on a TensorFlow Serving server.

    Args:
        model_name: the served model's name (``--model_name``, or ``name``
            in ``models.config``).
        url: the server's REST address, ``http(s)://host:port``
            (``--rest_api_port``, 8501 by convention).
        version: a positive integer to ask for that version; ``None`` for the
            server's choice (the latest loaded).
        signature_name: the signature to run.
        timeout: seconds to wait for the server (connect and reply).

    Raises:
        ValueError: for an empty ``model_name``, a ``url`` that is not
            ``http(s)://host[:port]``, a bad ``version`` or a non-positive
            ``timeout``.
    """

    def __init__(self, model_name, url="http://localhost:8501", version=None,
                 signature_name="serving_default", timeout=30.0):
        if not isinstance(model_name, str) or not model_name or "/" in model_name:
            raise ValueError(
                f"`model_name` must be a non-empty name without '/'; received {model_name!r}."
            )
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.path.strip("/"):
            raise ValueError(f"`url` must look like http://host:port; received url={url!r}.")
        if not timeout > 0:
            raise ValueError(f"`timeout` must be positive; received timeout={timeout!r}.")
        path = f"/v1/models/{urllib.parse.quote(model_name)}"
        if version is not None:
            path += f"/versions/{check_int(version, 'version', 1)}"
        self.predict_url = f"{parsed.scheme}://{parsed.netloc}{path}:predict"
        self.signature_name = signature_name
        self.timeout = float(timeout)

    def request(self, body):
        """POSTs a JSON body to the predict URL and returns the decoded reply.

        Args:
            body: dict in either request format (see the module docstring).

        Returns:
            The reply as a dict.

        Raises:
            ServingError: for an ``{"error": ...}`` reply, an HTTP error, an
                unreachable server or a reply that is not a JSON object.
        """
        data = json.dumps(body).encode()
        request = urllib.request.Request(
            self.predict_url, data=data, method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        except OSError as error:  # URLError, timeouts, refused connections
            reason = getattr(error, "reason", error)
            raise ServingError(f"Cannot reach TF Serving at {self.predict_url}: {reason}",
                               url=self.predict_url) from error
        try:
            reply = json.loads(payload)
        except ValueError:
            reply = None
        if isinstance(reply, dict) and "error" in reply:
            raise ServingError(f"TF Serving error (HTTP {status}) from {self.predict_url}: "
                               f"{reply['error']}", status=status, url=self.predict_url)
        if status != 200 or not isinstance(reply, dict):
            raise ServingError(f"Unexpected reply (HTTP {status}) from {self.predict_url}: "
                               f"{payload[:200]!r}", status=status, url=self.predict_url)
        return reply

    def predict(self, inputs, format="columnar"):
        """Runs the signature on a batch.

        Args:
            inputs: the batch, a numpy array or nested list [N, ...] for a
                signature with one input, or a dict ``{input_name: batch}``.
            format: ``"columnar"`` (``"inputs"``/``"outputs"``) or ``"row"``
                (``"instances"``/``"predictions"``); both give the same result.

        Returns:
            A dict ``{output_name: numpy array [N, ...]}`` for a signature with
            several named outputs (e.g. an exported PosteriorEnsemble), else
            one numpy array [N, ...].

        Raises:
            ValueError: for an unknown ``format`` or, in row format, inputs
                of different batch sizes.
            ServingError: as for :meth:`request`, or when the reply lacks
                the format's key.
        """
        if format not in FORMATS:
            raise ValueError(f"`format` must be one of {FORMATS}; received format={format!r}.")
        body = {"signature_name": self.signature_name}
        if format == "columnar":
            body["inputs"] = (
                {name: _to_json(value) for name, value in inputs.items()}
                if isinstance(inputs, dict) else _to_json(inputs)
            )
            key = "outputs"
        else:
            body["instances"] = _rows(inputs)
            key = "predictions"
        reply = self.request(body)
        if key not in reply:
            raise ServingError(
                f"Reply from {self.predict_url} has no {key!r}: keys {sorted(reply)}.",
                status=200, url=self.predict_url,
            )
        if format == "columnar":
            outputs = reply[key]
            if isinstance(outputs, dict):
                return {name: np.asarray(tensor) for name, tensor in outputs.items()}
            return np.asarray(outputs)
        rows = reply[key]
        if rows and isinstance(rows[0], dict):
            return {name: np.asarray([row[name] for row in rows]) for name in rows[0]}
        return np.asarray(rows)


def _rows(inputs):
    """The row-format "instances" of a batch (one object per row for named inputs)."""
    if not isinstance(inputs, dict):
        return _to_json(inputs)
    columns = {name: _to_json(value) for name, value in inputs.items()}
    sizes = {name: len(column) for name, column in columns.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"`inputs` must share the batch size in row format; received sizes {sizes}."
        )
    count = next(iter(sizes.values()), 0)
    return [{name: column[i] for name, column in columns.items()} for i in range(count)]
