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
status): :class:`ServingClient` raises it as :class:`ServingError`, as it does
every other failure (no reply within the deadline, a reply over the size cap,
a truncated body, a bad status line, a redirect, non-JSON, ragged or
non-numeric arrays, outputs of the wrong batch size). Only the standard
library is used (``http.client``).

Before its first request the client reads the signature from

    GET http://host:port/v1/models/<name>[/versions/<version>]/metadata

(``{"model_spec": ..., "metadata": {"signature_def": {"signature_def": {name:
{"inputs": {input: {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size":
"-1"}, ...]}}}}}}}}``) and checks each batch against its inputs (names, dtypes
by TF Serving's JSON rules, shapes) before sending it.

Example, for a :meth:`keras_bnn.PosteriorEnsemble.export`-ed model served as
``cifar10_atmc``::

    client = ServingClient("cifar10_atmc", url="http://localhost:8501")
    outputs = client.predict(images)           # dict of numpy arrays
    outputs["probabilities"], outputs["mutual_information"]
"""

import json
import urllib.parse

import numpy as np

from keras_bnn.serving_batches import as_arrays, named
from keras_bnn.serving_http import (NOT_SERVED, ServingError, check_url, decode_reply,
                                    exchange, failure)
from keras_bnn.serving_signature import check_batch, signature_inputs
from keras_bnn.validation import check_bool, check_choice, check_int, check_positive

__all__ = ["FORMATS", "MAX_VERSION", "ServingClient", "ServingError"]

FORMATS = ("columnar", "row")
#: The largest model version: versions are int64 in TF Serving (here, not in
#: :mod:`keras_bnn.export`, so that the client imports no Keras).
MAX_VERSION = 2**63 - 1


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
        timeout: total deadline in seconds for one request (connect, send,
            and the whole reply), not per socket read.
        max_reply_bytes: the largest reply body accepted.
        input_names: the signature's input names in the model's order (an
            exported ensemble's ``ensemble.member_input_names``), so that
            :meth:`predict` takes a model of several inputs' batches as a
            list too; None: one input, or a dict of named inputs.
        check_inputs: read the signature from the server's metadata endpoint
            (once, at the first :meth:`predict`) and check each batch against
            it before sending; a server that answers the metadata request with
            an HTTP error (one without the endpoint) is sent unchecked batches,
            and once a predict has then answered, the endpoint is taken as
            absent for this client: later predicts send one request each (until
            2026-11-30 each asked for the metadata again). Without a pinned
            ``version``, a batch the signature read earlier refuses, or a
            predict answered HTTP 400 after checks against it, reads the
            metadata once more: when the server now serves another signature
            (a new version), the batch is checked against it (ValueError) and,
            fitting, sent (once more); until 2026-11-30 the first signature
            read was kept for good.
            False: no metadata request (saves that round trip for such a server).

    Raises:
        ValueError: for an empty ``model_name``, a ``url`` that is not
            ``http(s)://host[:port]``, a bad ``version``, a non-positive
            ``timeout`` or ``max_reply_bytes``, ``input_names`` that are not
            distinct non-empty strings, or a ``check_inputs`` that is not a bool.
    """

    def __init__(self, model_name, url="http://localhost:8501", version=None,
                 signature_name="serving_default", timeout=30.0, max_reply_bytes=256 * 2**20,
                 input_names=None, check_inputs=True):
        if not isinstance(model_name, str) or not model_name or "/" in model_name:
            raise ValueError(
                f"`model_name` must be a non-empty name without '/'; got {model_name!r}."
            )
        parsed = check_url(url)
        if not isinstance(signature_name, str) or not signature_name:
            raise ValueError(f"`signature_name` must be a non-empty str; got "
                             f"{signature_name!r}.")
        self.timeout = check_positive(timeout, "timeout", "ServingClient")
        self.max_reply_bytes = check_int(max_reply_bytes, "max_reply_bytes", 1)
        path = f"/v1/models/{urllib.parse.quote(model_name, safe='')}"
        if version is not None:
            path += f"/versions/{check_int(version, 'version', 1, maximum=MAX_VERSION)}"
        self.predict_url = f"{parsed.scheme}://{parsed.netloc}{path}:predict"
        self.metadata_url = f"{parsed.scheme}://{parsed.netloc}{path}/metadata"
        self._servable = (f"model_name={model_name!r} " + (
            f"version={version}" if version is not None else "(its latest version)"))
        self.check_inputs = check_bool(check_inputs, "check_inputs", "ServingClient")
        self._inputs = None  # the signature's inputs, once read
        # "failed": the metadata GET answered an HTTP error; "absent": and then a
        # predict answered (the server has no metadata endpoint: not asked again).
        self._metadata_state = None
        self._pinned = version is not None
        self.signature_name = signature_name
        if input_names is not None and (
                isinstance(input_names, str) or not isinstance(input_names, (list, tuple))
                or not input_names or len(set(input_names)) != len(input_names)
                or not all(isinstance(name, str) and name for name in input_names)):
            raise ValueError("`input_names` must be a list of distinct non-empty input names "
                             f"(e.g. ensemble.member_input_names) or None; got {input_names!r}.")
        self.input_names = None if input_names is None else list(input_names)

    def _error(self, message, status=None, url=None):
        return failure(message, url or self.predict_url, status)

    def request(self, body):
        """POSTs a JSON body to the predict URL and returns the decoded reply.

        Redirects are not followed (a 3xx is an unexpected reply).

        Args:
            body: dict in either request format (see the module docstring).

        Returns:
            The reply as a dict.

        Raises:
            ValueError: if ``body`` holds NaN or Inf (not valid JSON).
            ServingError: for an ``{"error": ...}`` reply, an HTTP error, an
                unreachable server, no complete reply within ``timeout``, a
                reply over ``max_reply_bytes`` or one that is not a JSON
                object.
        """
        return self._reply(json.dumps(body, allow_nan=False).encode(), "POST")

    def metadata(self):
        """GETs the served model's metadata (:attr:`metadata_url`): TF Serving's
        ``{"model_spec": ..., "metadata": {"signature_def": {"signature_def":
        {signature_name: {"inputs": ..., "outputs": ...}}}}}``.

        Returns:
            The reply as a dict.

        Raises:
            ServingError: as for :meth:`request` (e.g. HTTP 404 for a server
                without the metadata endpoint).
        """
        return self._reply(None, "GET")

    def _exchange(self, data, method="POST"):
        """(status, body) of one POST of ``data`` to the predict URL (or one GET of
        the metadata URL), within the total deadline (:func:`exchange`)."""
        url = self.predict_url if method == "POST" else self.metadata_url
        return exchange(url, data if method == "POST" else None, self.timeout,
                        self.max_reply_bytes)

    def _reply(self, data, method):
        """The decoded JSON object of one exchange, or ServingError."""
        status, payload = self._exchange(data, method)
        url = self.predict_url if method == "POST" else self.metadata_url
        return decode_reply(status, payload, url, self.max_reply_bytes, self._servable)

    def signature_inputs(self):
        """The inputs of the client's signature, read once from :meth:`metadata`.

        Returns:
            ``{input_name: (dtype, shape)}``, e.g. ``{"inputs": ("DT_FLOAT",
            (-1, 32, 32, 3))}`` (-1: any size; shape None: any rank); None when
            ``check_inputs`` is False or the server answered the metadata request
            with an HTTP error or not in TF Serving's form (asked again next time,
            unless a predict has answered since an HTTP error: the endpoint is
            then absent, see ``check_inputs``).

        Raises:
            ValueError: when the served model has no signature ``signature_name``
                (naming the served ones).
            ServingError: when no reply came (unreachable server, deadline,
                malformed HTTP), or TF Serving's 404 ``Servable not found``
                came: it serves no such model name or version (naming
                ``model_name`` and ``version``; until 2026-11-30 taken as a
                server without the endpoint, and the batch sent unchecked).
        """
        if self.check_inputs and self._inputs is None and self._metadata_state != "absent":
            try:
                reply = self.metadata()
            except ServingError as error:
                if error.status is None or str(error).startswith(NOT_SERVED):
                    raise
                self._metadata_state = "failed"
                return None
            self._inputs = signature_inputs(reply, self.signature_name)
        return self._inputs if self.check_inputs else None

    def predict(self, inputs, format="columnar"):
        """Runs the signature on a batch.

        Args:
            inputs: the batch, a numpy array or nested list [N, ...] for a
                signature with one input (numbers; for a text input str, sent
                as JSON strings, or bytes such as a ``tf.string`` tensor's,
                sent as TF Serving's ``{"b64": ...}``: until 2026-11-30
                refused), or a dict
                ``{input_name: batch}``; for a client given several
                ``input_names``, a list of the batches in their order too
                (until 2026-11-29 a list read as one ragged array). A list of
                one numpy array is that array, as Keras reads ``[x]`` (until
                2026-11-30 one example of a rank too many). Without
                ``input_names`` a list of two or more numpy arrays is refused,
                saying so, as Keras reads it as several inputs (until
                2026-11-30 arrays of one shape went stacked as one input's
                batch, and a server of several inputs answered an error about
                JSON objects); nested lists of numbers are a batch.
            format: ``"columnar"`` (``"inputs"``/``"outputs"``) or ``"row"``
                (``"instances"``/``"predictions"``); both give the same result.

        Returns:
            A dict ``{output_name: numpy array [N, ...]}`` for a signature with
            several named outputs (e.g. an exported PosteriorEnsemble), else
            one numpy array [N, ...].

        Raises:
            ValueError: for an unknown ``format``, inputs that are not
                rectangular finite numeric (or str, bytes) arrays, an empty batch (of
                any rank; until 2026-11-30 one of rank 1 was sent), named inputs of
                different batch sizes, or a list of arrays without
                ``input_names``; and (see ``check_inputs``) for input names
                other than the signature's, or a batch whose dtype, values or
                shape its input does not take (naming the input, its dtype and
                shape), before any predict request (or, answered HTTP 400, before
                resending to a new signature: see ``check_inputs``).
            ServingError: as for :meth:`request` (and :meth:`metadata`, when
                no reply came), or when the reply lacks
                the format's key or holds ragged, non-numeric or
                wrong-batch-size outputs.
        """
        check_choice(format, "format", FORMATS)
        listed = isinstance(inputs, (list, tuple))
        arrays, columns, batch, argument = as_arrays(named(inputs, self.input_names), listed)
        cached = self._checked(arrays, argument)
        body = {"signature_name": self.signature_name}
        if format == "columnar":
            body["inputs"] = columns
            key = "outputs"
        else:
            body["instances"] = (
                [{name: column[i] for name, column in columns.items()} for i in range(batch)]
                if isinstance(columns, dict) else columns
            )
            key = "predictions"
        try:
            reply = self.request(body)
        except ServingError as error:
            if not (cached and error.status == 400 and self._refreshed(arrays, argument)):
                raise
            reply = self.request(body)
        if self._metadata_state == "failed":
            self._metadata_state = "absent"
        if key not in reply:
            raise self._error(f"Reply has no {key!r}: keys {sorted(reply)}", status=200)
        outputs = reply[key]
        if format == "row":
            if not isinstance(outputs, list):
                raise self._error(f"{key!r} is not a list of rows", status=200)
            if outputs and all(isinstance(row, dict) for row in outputs):
                names = list(outputs[0])
                if any(list(row) != names for row in outputs):
                    raise self._error("rows of 'predictions' name different outputs", status=200)
                outputs = {name: [row[name] for row in outputs] for name in names}
        if isinstance(outputs, dict):
            return {str(name): self._array(tensor, name, batch)
                    for name, tensor in outputs.items()}
        return self._array(outputs, key, batch)

    def _checked(self, arrays, argument):
        """Checks ``arrays`` (:meth:`_check_signature`); a batch the signature read
        earlier refuses is checked once more against a new one (:meth:`_refreshed`).
        Returns whether the signature was read before this call."""
        cached = self._inputs is not None
        try:
            self._check_signature(arrays, argument)
        except ValueError:
            if not (cached and self._refreshed(arrays, argument)):
                raise
        return cached

    def _refreshed(self, arrays, argument):
        """Whether, with no pinned version, the server now serves another signature,
        read anew, that takes ``arrays`` (ValueError, as :meth:`_check_signature`,
        when it does not)."""
        if self._pinned:
            return False
        try:
            specs = signature_inputs(self.metadata(), self.signature_name)
        except ServingError:
            return False
        if specs is None or specs == self._inputs:
            return False
        self._inputs = specs
        self._check_signature(arrays, argument)
        return True

    def _check_signature(self, arrays, argument):
        """Raises ValueError, naming ``argument`` (the dict's, or ``input_names`` that
        made it), unless the signature's inputs (when the server tells them) take
        ``arrays``, a dict of them or one array (:func:`check_batch`)."""
        specs = self.signature_inputs()
        if specs:
            check_batch(specs, arrays, argument, self.signature_name)

    def _array(self, value, name, batch):
        """A reply tensor as a numeric numpy array with ``batch`` rows, or ServingError."""
        try:
            array = np.asarray(value)
        except (ValueError, RecursionError) as error:
            raise self._error(f"output {name!r} is not a rectangular array ({error})",
                              status=200) from None
        if array.dtype.kind not in "biuf":
            raise self._error(f"output {name!r} is not numeric (dtype {array.dtype})",
                              status=200)
        if array.ndim == 0 or array.shape[0] != batch:
            raise self._error(f"output {name!r} has shape {array.shape}; the request had "
                              f"{batch} examples", status=200)
        return array
