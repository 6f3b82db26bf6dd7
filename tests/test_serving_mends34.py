"""``ServingClient`` and the metadata endpoint, follow-ups of 2026-11-30: a server
without the endpoint is asked for it once, not at every predict; without a pinned
``version`` a new version's signature is read again when the one read earlier
refuses a batch or the server answers HTTP 400. Served by the stand-in of
``tf_serving_standin``."""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import weight_sets
from keras_bnn.serving import ServingClient, ServingError
from tf_serving_standin import load, serving


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{name: SavedModel dir} of three one-input members: ``two`` (float32 [2]),
    ``three`` ([3]) and ``any`` ([any size])."""
    dirs = {}
    for name, width in {"two": 2, "three": 3, "any": None}.items():
        keras.utils.set_random_seed(0)
        x = keras.Input((width,))
        pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Reshape((-1, 1))(x))
        model = keras.Model(x, keras.layers.Dense(3)(pooled))
        dirs[name] = kb.PosteriorEnsemble(model, weight_sets(model, 2)).export(
            tmp_path_factory.mktemp("models") / name)
    return dirs


def _floats(width):
    return np.zeros((4, width), "float32")


def test_a_server_without_the_metadata_endpoint_is_asked_once(exports):
    """Until 2026-11-30 each predict GETs the metadata again (two requests a call);
    now, once a predict has answered after the failed GET, one request a call. A
    predict that fails too (the model perhaps not loaded yet) leaves it asked again."""
    with serving(exports["two"], "plain", metadata=False) as (url, httpd):
        client = ServingClient("plain", url=url, timeout=10)
        with pytest.raises(ServingError) as raised:
            client.predict(_floats(2) > 0)  # the server's 400: not of expected type
        assert raised.value.status == 400
        for _ in range(3):
            assert client.predict(_floats(2))["probabilities"].shape == (4, 3)
        assert (len(httpd.metadata_requests), len(httpd.requests)) == (2, 4)
        assert client.signature_inputs() is None and len(httpd.metadata_requests) == 2


def test_a_new_versions_signature_is_read_again(exports):
    """Unpinned, a client that read version 1's signature ([2]) checks against
    version 2's ([3]) once the server loads it: a [2] batch is a ValueError
    (until 2026-11-30 the server's HTTP 400), a [3] batch answers (until then a
    ValueError against the old signature). A pinned version is never read again."""
    with serving(exports["two"], "m") as (url, httpd):
        client = ServingClient("m", url=url, timeout=10)
        pinned = ServingClient("m", url=url, timeout=10, version=1)
        for user in (client, pinned):
            assert user.predict(_floats(2))["probabilities"].shape == (4, 3)
        load(httpd, exports["three"], 2)
        with pytest.raises(ValueError, match=r"`inputs` has shape \(4, 2\), but the "
                                             r"signature's input 'inputs' takes shape \[-1, 3\]"):
            client.predict(_floats(2))
        assert client.predict(_floats(3))["probabilities"].shape == (4, 3)
        assert client.signature_inputs() == {"inputs": ("DT_FLOAT", (-1, 3))}
        assert len(httpd.metadata_requests) == 3
        with pytest.raises(ServingError) as raised:
            pinned.predict(_floats(2))
        # version 1 is unloaded (TF Serving serves the latest): 404, not read again
        assert raised.value.status == 404 and len(httpd.metadata_requests) == 3


def test_a_batch_refused_while_the_server_changes_version_is_sent_once_more(exports):
    """The server answers HTTP 400 (version ``three`` still serving) and then loads
    one whose signature ([any size]) takes the batch: the client reads it and sends
    the batch once more, which answers; until 2026-11-30 the 400 came back."""
    with serving(exports["two"], "m") as (url, httpd):
        client = ServingClient("m", url=url, timeout=10)
        assert client.predict(_floats(2))["probabilities"].shape == (4, 3)
        load(httpd, exports["three"], 2)

        def new_version():
            httpd.after_predict = None
            load(httpd, exports["any"], 3)

        httpd.after_predict = new_version
        assert client.predict(_floats(2))["probabilities"].shape == (4, 3)
        assert len(httpd.requests) == 3 and len(httpd.metadata_requests) == 2
        assert client.signature_inputs() == {"inputs": ("DT_FLOAT", (-1, -1))}
