"""The posterior ensemble of a model of several outputs (a multi-task model):
``fit`` with ``CollectSamples``, ``PosteriorEnsemble.from_store``, ``predict``,
``predict_uncertainty``, ``predict_members``, ``evaluate`` with per-output losses,
``.keras`` save and load, ``export`` (one named output per model output), and
``ServingClient.predict`` of several inputs given as a list
(:mod:`keras_bnn.ensemble_outputs`).

Until 2026-11-29 the ensemble refused a member of several outputs ("one
likelihood per ensemble") and ``CollectSamples`` warned ``NoEnsembleWarning``:
such a model was sampled, not averaged, scored or served. Every number here is
checked against numpy on the stored samples' weights (dense layers written out).
"""

import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import categorical_summary, saved_model_cli

N, CLASSES = 48, 3
#: float32 round-off of probabilities (<= 1) through a softmax and a mean over members,
#: in units of float32's epsilon (as tests/test_ensemble_any_model.py).
TOLERANCE = 16 * float(np.finfo(np.float32).eps)
#: Relative round-off of a float32 mean of N per-example NLLs: N ulps at most.
NLL_RTOL = N * float(np.finfo(np.float32).eps)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((N, 4)).astype("float32")
Y_CLS = (X[:, 0] + X[:, 1] > 0).astype("int32") + (X[:, 2] > 1).astype("int32")
Y_REG = (X[:, 3] + 0.1 * RNG.standard_normal(N)).astype("float32")


def _two_heads(how):
    """A functional model of a 3-class head ``cls`` and a Gaussian head ``reg``
    (``[mean, log variance]``) on one tanh layer, its outputs a list or a dict."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(6, activation="tanh", name="hidden")(inputs)
    cls = keras.layers.Dense(CLASSES, name="cls")(hidden)
    reg = keras.layers.Dense(2, name="reg")(hidden)
    return keras.Model(inputs, [cls, reg] if how == "list" else {"cls": cls, "reg": reg})


def _numpy_members(store):
    """Per stored sample the heads' raw outputs on X: ([S, N, 3] logits, [S, N, 2])."""
    logits, gaussians = [], []
    for sample in store:
        w = dict(zip(["hk", "hb", "ck", "cb", "rk", "rb"], sample.weights))
        hidden = np.tanh(X @ w["hk"] + w["hb"])
        logits.append(hidden @ w["ck"] + w["cb"])
        gaussians.append(hidden @ w["rk"] + w["rb"])
    return np.asarray(logits, "float64"), np.asarray(gaussians, "float64")


def _softmax(logits):
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def _mixture(raw):
    """The Gaussian mixture's mean, aleatoric and epistemic variances of raw [S, N, 2]."""
    mean, variance = raw[..., :1], np.exp(raw[..., 1:])
    return mean.mean(0), variance.mean(0), ((mean - mean.mean(0)) ** 2).mean(0)


@pytest.fixture(scope="module", params=["list", "dict"])
def sampled(request, tmp_path_factory):
    """(how, store, NoEnsembleWarning texts): the two-head model sampled 4 epochs."""
    model = kb.bayesian(_two_heads(request.param))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N,
                  loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        "reg": kb.likelihoods.GaussianNLL()})
    store = kb.SampleStore(str(tmp_path_factory.mktemp("multi") / "samples"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, {"cls": Y_CLS, "reg": Y_REG}, batch_size=16, epochs=4, verbose=0,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    refusals = [str(w.message) for w in caught if issubclass(w.category, kb.NoEnsembleWarning)]
    return request.param, store, refusals


def _by_name(how, value):
    """A list output's two values as a dict by output name (a dict's unchanged)."""
    return dict(zip(["cls", "reg"], value)) if how == "list" else value


def test_each_output_is_averaged_under_its_own_likelihood(sampled):
    """``from_store`` reads each head's likelihood from its stored loss; ``predict``
    returns the member's structure: the members' mean softmax for ``cls`` and the
    mixture's ``[mean, log variance]`` for ``reg``; ``predict_uncertainty`` and
    ``predict_members`` give each output's own, all as numpy on the stored samples."""
    how, store, refusals = sampled
    assert refusals == [] and len(store) == 4
    ensemble = kb.PosteriorEnsemble.from_store(store)
    assert ensemble.likelihood == {"cls": "categorical", "reg": "gaussian"}
    logits, raw = _numpy_members(store)
    probabilities = _softmax(logits)
    mean, aleatoric, epistemic = _mixture(raw)
    assert probabilities.std(0).max() > 100 * TOLERANCE and epistemic.max() > 1e-4
    predicted = ensemble.predict(X, batch_size=20, verbose=0)
    assert isinstance(predicted, list if how == "list" else dict)
    predicted = _by_name(how, predicted)
    np.testing.assert_allclose(predicted["cls"], probabilities.mean(0), rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(predicted["reg"], np.concatenate(
        [mean, np.log(aleatoric + epistemic)], -1), rtol=1e-5, atol=1e-5)
    summary = _by_name(how, ensemble.predict_uncertainty(X, batch_size=20))
    for key, value in categorical_summary(probabilities).items():
        np.testing.assert_allclose(summary["cls"][key], value, rtol=0, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(summary["reg"]["epistemic_variance"], epistemic, rtol=1e-4,
                               atol=1e-6)
    members = _by_name(how, ensemble.predict_members(X))
    np.testing.assert_allclose(members["cls"], probabilities, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(members["reg"], raw, rtol=1e-5, atol=1e-5)


def test_evaluate_scores_each_output_as_keras_does(sampled):
    """``evaluate`` with a loss per output: ``cls_loss`` is the mean −log p̄(y),
    ``reg_loss`` the mixture's NLL read from the members (not its moment-matched
    Gaussian), ``loss`` their sum; a ``.keras`` save loads compiled and predicts
    the same."""
    how, store, _ = sampled
    ensemble = kb.PosteriorEnsemble.from_store(store)
    ensemble.compile(loss={"cls": kb.likelihoods.PredictiveNLL(),
                           "reg": kb.likelihoods.GaussianNLL()})
    scores = ensemble.evaluate(X, {"cls": Y_CLS, "reg": Y_REG}, batch_size=N, verbose=0,
                               return_dict=True)
    logits, raw = _numpy_members(store)
    cls_nll = -np.log(_softmax(logits).mean(0)[np.arange(N), Y_CLS]).mean()
    log_density = -0.5 * (np.log(2 * np.pi) + raw[..., 1]
                          + (Y_REG - raw[..., 0]) ** 2 / np.exp(raw[..., 1]))
    reg_nll = np.mean(np.log(len(store)) - np.logaddexp.reduce(log_density, axis=0))
    assert scores["cls_loss"] == pytest.approx(cls_nll, rel=NLL_RTOL)
    assert scores["reg_loss"] == pytest.approx(reg_nll, rel=NLL_RTOL)
    assert scores["loss"] == pytest.approx(cls_nll + reg_nll, rel=NLL_RTOL)
    path = str(store.path) + ".keras"
    ensemble.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.likelihood == ensemble.likelihood
    for mine, theirs in zip(keras.tree.flatten(ensemble.predict(X, verbose=0)),
                            keras.tree.flatten(loaded.predict(X, verbose=0))):
        np.testing.assert_array_equal(theirs, mine)
    again = loaded.evaluate(X, {"cls": Y_CLS, "reg": Y_REG}, batch_size=N, verbose=0,
                            return_dict=True)
    assert again["reg_loss"] == pytest.approx(reg_nll, rel=NLL_RTOL)


def test_the_export_has_one_named_output_per_model_output(sampled, tmp_path):
    """The SavedModel's signature: per output its predictive under its name and its
    summary as ``<name>_<key>``, the numbers of ``predict`` and ``predict_uncertainty``."""
    import tensorflow as tf  # noqa: PLC0415 - the export is TensorFlow's

    how, store, _ = sampled
    ensemble = kb.PosteriorEnsemble.from_store(store)
    served = tf.saved_model.load(ensemble.export(tmp_path / "served")).signatures[
        "serving_default"](inputs=tf.constant(X))
    expected = {"cls", "reg"} | {f"cls_{key}" for key in kb.ensemble.CATEGORICAL_OUTPUTS} | {
        f"reg_{key}" for key in kb.ensemble.GAUSSIAN_OUTPUTS}
    assert set(served) == expected
    predicted = _by_name(how, ensemble.predict(X, verbose=0))
    summary = _by_name(how, ensemble.predict_uncertainty(X))
    for name in ("cls", "reg"):
        np.testing.assert_allclose(served[name].numpy(), predicted[name], rtol=0, atol=1e-6)
        for key, value in summary[name].items():
            np.testing.assert_allclose(served[f"{name}_{key}"].numpy(), value, rtol=0,
                                       atol=1e-6, err_msg=key)


@pytest.mark.slow
def test_saved_model_cli_runs_a_multi_output_export(tmp_path):
    """``saved_model_cli run`` of a two-head export writes one file per named output."""
    model = _two_heads("dict")
    ensemble = kb.PosteriorEnsemble(model, [model.get_weights()],
                                    likelihood={"cls": "categorical", "reg": "gaussian"})
    version = ensemble.export(tmp_path / "served")
    np.save(tmp_path / "x.npy", X)
    done = saved_model_cli("run", "--dir", version, "--tag_set", "serve", "--signature_def",
                           "serving_default", "--inputs", f"inputs={tmp_path / 'x.npy'}",
                           "--outdir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    predicted = ensemble.predict(X, verbose=0)
    for name in ("cls", "reg"):
        np.testing.assert_allclose(np.load(tmp_path / "out" / f"{name}.npy"), predicted[name],
                                   rtol=0, atol=1e-6)


def test_explicit_per_output_likelihoods_and_per_position_heads():
    """A list member of a per-position tagger head [N, T, 4] and a Bernoulli head
    [N, 1]: given ``likelihood`` as a list, each averages as a one-output ensemble
    does (numpy), under every member loop; a likelihood that does not fit its
    output's head, or of another length, is refused naming it."""
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5, 3))
    tags = keras.layers.Dense(4, name="tags")(inputs)
    flag = keras.layers.Dense(1, name="flag")(keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, [tags, flag])
    rng = np.random.default_rng(2)
    sets = [[w + 0.5 * rng.standard_normal(w.shape).astype("float32")
             for w in model.get_weights()] for _ in range(3)]
    x = rng.standard_normal((6, 5, 3)).astype("float32")
    tag_p = np.mean([_softmax(x @ w[0] + w[1]) for w in sets], axis=0)
    flag_p = np.mean([1 / (1 + np.exp(-(x.reshape(6, -1) @ w[2] + w[3]))) for w in sets], 0)
    for loop in kb.ensemble.MEMBER_LOOPS:
        ensemble = kb.PosteriorEnsemble(model, sets, likelihood=["categorical", "bernoulli"],
                                        member_loop=loop)
        assert ensemble.likelihood == {"tags": "categorical", "flag": "bernoulli"}
        tags_out, flag_out = ensemble.predict(x, verbose=0)
        np.testing.assert_allclose(tags_out, tag_p, rtol=0, atol=TOLERANCE, err_msg=loop)
        np.testing.assert_allclose(flag_out, flag_p, rtol=0, atol=TOLERANCE, err_msg=loop)
    # Without a likelihood (no compiled loss): one unit is Bernoulli, four categorical.
    assert kb.PosteriorEnsemble(model, sets).likelihood == {"tags": "categorical",
                                                            "flag": "bernoulli"}
    with pytest.raises(ValueError, match="output 'flag'.*`likelihood` must be 'categorical'"):
        kb.PosteriorEnsemble(model, sets, likelihood={"tags": "categorical",
                                                      "flag": "gaussian"})
    with pytest.raises(ValueError, match=r"`likelihood` must be one of .* a list of 2"):
        kb.PosteriorEnsemble(model, sets, likelihood=["categorical"])


class _TwoInputs(BaseHTTPRequestHandler):
    """A TF Serving stand-in of a two-input model (``a``, ``b``): answers the sum of the
    inputs' first columns, recording each request."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(request)
        if "inputs" in request:
            named = request["inputs"]
        else:
            rows = request["instances"]
            named = {key: [row[key] for row in rows] for key in rows[0]}
        total = (np.asarray(named["a"])[:, 0] + np.asarray(named["b"])[:, 0]).tolist()
        body = json.dumps({"outputs": total} if "inputs" in request else
                          {"predictions": total}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_serving_client_takes_several_inputs_as_a_list(format):
    """``ServingClient(input_names=...)`` sends a list of batches as the named inputs
    (until 2026-11-29 a list read as one ragged array); without names a list of
    arrays of different shapes is refused, saying how to name them."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _TwoInputs)
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_port}"
        a = np.arange(6, dtype="float32").reshape(3, 2)
        b = np.ones((3, 4), "float32")
        client = kb.serving.ServingClient("m", url=url, timeout=10, input_names=["a", "b"])
        np.testing.assert_array_equal(client.predict([a, b], format=format), a[:, 0] + 1)
        sent = httpd.requests[-1]
        named = sent["inputs"] if format == "columnar" else sent["instances"][0]
        assert sorted(named) == ["a", "b"]
        with pytest.raises(ValueError, match=r"a list of 2 batches, one per input"):
            client.predict([a], format=format)
        with pytest.raises(ValueError, match=r"input_names="):
            kb.serving.ServingClient("m", url=url).predict([a, b], format=format)
        with pytest.raises(ValueError, match="`input_names` must be a list of distinct"):
            kb.serving.ServingClient("m", url=url, input_names=["a", "a"])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
