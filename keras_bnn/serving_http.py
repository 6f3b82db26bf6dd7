"""One HTTP exchange with TF Serving's REST API, and its failures as :class:`ServingError`.

:func:`exchange` sends one request within a total deadline (connect, send and
the whole reply) and reads at most a size cap; :func:`decode_reply` turns the
reply into a JSON object, or TF Serving's ``{"error": ...}``, an HTTP error, a
reply over the cap or one that is not JSON into a :class:`ServingError`. Only
the standard library is used (``http.client``): :mod:`keras_bnn.serving`
imports no Keras.
"""

import http.client
import json
import socket
import threading
import urllib.parse

#: How the message of TF Serving's 404 ``Servable not found`` starts.
NOT_SERVED = "TF Serving serves no"


class ServingError(RuntimeError):
    """A predict (or metadata) request failed: the server's ``{"error": ...}``
    message, an HTTP error without one, an unreachable server or a malformed reply.

    Attributes:
        status: the HTTP status code, or ``None`` when no reply came.
        url: the URL requested.
    """

    def __init__(self, message, status=None, url=None):
        super().__init__(message)
        self.status = status
        self.url = url


def failure(message, url, status=None):
    """A :class:`ServingError` whose message ends with the URL requested.

    Args:
        message: what failed.
        url: the URL requested.
        status: the HTTP status code, or None when no reply came.

    Returns:
        The :class:`ServingError` (to raise).
    """
    return ServingError(f"{message} ({url})", status=status, url=url)


def check_url(url):
    """The parts of a server's REST address.

    Args:
        url: ``http(s)://host[:port]``, without a path, query or fragment.

    Returns:
        ``urllib.parse.urlsplit(url)``.

    Raises:
        ValueError: naming ``url``, for anything else (a port out of 1-65535
            too).
    """
    try:
        parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
        if parsed is not None and parsed.port == 0:  # no server listens on port 0
            parsed = None
    except ValueError:  # a port out of range or not a number
        parsed = None
    if (parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname
            or parsed.path.strip("/") or parsed.query or parsed.fragment):
        raise ValueError(f"`url` must look like http://host:port; got url={url!r}.")
    return parsed


def exchange(url, data, timeout, max_reply_bytes):
    """One request to ``url``: a POST of ``data`` (a JSON body), or a GET when
    ``data`` is None; redirects are not followed.

    Args:
        url: ``http(s)://host[:port]/path``.
        data: the request body (bytes), or None for a GET.
        timeout: total deadline in seconds (connect, send and the whole reply),
            not per socket read.
        max_reply_bytes: the body is read up to one byte more than this.

    Returns:
        ``(status, body)``: the HTTP status code and the body read (bytes).

    Raises:
        ServingError: (status None) when no complete reply came within
            ``timeout``, the server cannot be reached or the reply is
            malformed HTTP (a bad status line, a truncated body).
    """
    parsed = urllib.parse.urlsplit(url)
    connection_class = (http.client.HTTPSConnection if parsed.scheme == "https"
                        else http.client.HTTPConnection)
    connection = connection_class(parsed.hostname, parsed.port, timeout=timeout)
    expired = threading.Event()
    sockets = []  # the connected socket, kept: a reply that closes the
    # connection (HTTP/1.0, `Connection: close`) takes it over and
    # `connection.sock` becomes None while the reply is still being read.

    def shut():
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def expire():  # wakes a read blocked on a slow (dripping) server
        expired.set()
        shut()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        connection.connect()
        sockets.append(connection.sock)
        if expired.is_set():  # the deadline passed while connecting
            shut()
        connection.request("POST" if data is not None else "GET", parsed.path, body=data,
                           headers={"Content-Type": "application/json"} if data else {})
        response = connection.getresponse()
        payload = response.read(max_reply_bytes + 1)
        if expired.is_set():
            raise TimeoutError
        if len(payload) <= max_reply_bytes and response.length:
            raise http.client.IncompleteRead(payload, response.length)
        return response.status, payload
    except (OSError, http.client.HTTPException, ValueError) as error:
        if expired.is_set():
            raise failure(f"No complete reply from TF Serving within the deadline "
                          f"timeout={timeout}s", url) from None
        if isinstance(error, OSError) and not isinstance(error, http.client.HTTPException):
            reason = getattr(error, "strerror", None) or error
            raise failure(f"Cannot reach TF Serving: {reason}", url) from error
        raise failure(f"Malformed reply from TF Serving: {type(error).__name__}: {error}",
                      url) from None
    finally:
        timer.cancel()
        connection.close()


def decode_reply(status, payload, url, max_reply_bytes, servable):
    """The JSON object of a reply (:func:`exchange`'s), or ServingError.

    Args:
        status: the HTTP status code.
        payload: the body read.
        url: the URL requested, for the message.
        max_reply_bytes: the largest body accepted.
        servable: the model asked for, for the message of TF Serving's 404
            ``Servable not found`` (``"model_name='m' (its latest version)"``).

    Returns:
        The reply, a dict.

    Raises:
        ServingError: for a body over ``max_reply_bytes``, TF Serving's
            ``{"error": ...}`` (with its message; for ``Servable not found``
            naming ``servable``), or another status than 200 or a body that
            is not a JSON object.
    """
    if len(payload) > max_reply_bytes:
        raise failure(f"Reply larger than max_reply_bytes={max_reply_bytes}", url, status)
    try:
        reply = json.loads(payload)
    except (ValueError, RecursionError):
        reply = None
    if isinstance(reply, dict) and "error" in reply:
        message = f"TF Serving error (HTTP {status}): {str(reply['error'])[:2000]}"
        if status == 404 and str(reply["error"]).startswith("Servable not found"):
            message = (f"{NOT_SERVED} {servable}: check `model_name` and `version` "
                       "against the server's models (--model_name, models.config), or wait "
                       f"until the model has loaded; {message}")
        raise failure(message, url, status)
    if status != 200 or not isinstance(reply, dict):
        raise failure(f"Unexpected reply (HTTP {status}): {payload[:200]!r}", url, status)
    return reply
