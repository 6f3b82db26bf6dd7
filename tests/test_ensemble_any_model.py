"""The posterior ensemble of the model a user brings: a subclassed ``BayesianModel`` and a
functional one of several inputs (a list or a dict), end to end: ``fit`` with
``CollectSamples``, ``PosteriorEnsemble.from_store``, ``predict``,
``predict_uncertainty``, ``evaluate``, ``.keras`` save and load, ``export``, and the
SavedModel loaded by TensorFlow and run by ``saved_model_cli``
(:mod:`keras_bnn.ensemble_inputs`).

Until 2026-11-29 the ensemble refused both ("a subclassed model has no graph",
"concatenate them into one input") and ``CollectSamples`` warned
``NoEnsembleWarning``: such a model could be sampled, not averaged or served.
"""

import json
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import INPUT_DIM, inputs, run_fresh, saved_model_cli, weight_sets

WORKER = Path(__file__).parent / "workers" / "any_model_ensemble.py"
#: float32 round-off of probabilities (≤ 1) through a softmax and a mean over
#: members, in units of float32's epsilon: the ensemble against the members'
#: probabilities computed in numpy.
TOLERANCE = 16 * float(np.finfo(np.float32).eps)
_RESULTS = {}


def _run(case, tmp_path_factory):
    """The worker's result for ``case`` (a process of its own: a subclass of
    ``kb.BayesianModel`` must be made before any functional one), and its directory."""
    if case not in _RESULTS:
        tmp = tmp_path_factory.mktemp(f"any_model_{case}")
        done = run_fresh([sys.executable, str(WORKER), str(tmp), case], timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
        _RESULTS[case] = json.loads(line[len("RESULT "):]), tmp / case
    return _RESULTS[case]


def _check_end_to_end(result):
    assert result["samples"] == 4
    assert result["refusals"] == []  # CollectSamples: no NoEnsembleWarning
    # The members differ (their mean is no one member's) far beyond round-off.
    assert result["members_spread"] > 100 * TOLERANCE
    assert result["predict_error"] < TOLERANCE
    assert result["uncertainty_error"] < TOLERANCE
    assert result["evaluate_error"] < TOLERANCE
    assert result["loaded_error"] < TOLERANCE
    assert result["served_error"] < TOLERANCE


@pytest.mark.slow
def test_a_subclassed_bayesian_models_ensemble_is_the_mean_of_its_samples_end_to_end(
        tmp_path_factory):
    """A subclassed ``BayesianModel`` sampled 4 epochs: its ensemble (rebuilt from
    the store, the member from its recorded build shape) predicts the mean of the
    stored samples' softmax probabilities (computed here in numpy), as does the
    loaded ``.keras`` file and the exported signature, whose one input is
    ``inputs``. One not built is refused, saying how to build it."""
    result, _ = _run("subclassed", tmp_path_factory)
    _check_end_to_end(result)
    assert result["signature_inputs"] == ["inputs"]
    assert "must be built" in result["unbuilt"] and "calling it on data" in result["unbuilt"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["list", "dict"])
def test_a_several_input_models_ensemble_is_the_mean_of_its_samples_end_to_end(
        how, tmp_path_factory):
    """A functional ``BayesianModel`` of inputs ``a`` and ``b`` (a list, or a dict)
    whose ``a`` goes through a frozen layer: sampled 4 epochs, its ensemble runs
    that trunk once, predicts the members' mean probability, and exports a
    signature of one named input per model input. Arrays that do not fit the
    inputs are refused naming them; a model of two outputs is taken, its units
    per output (tests/test_ensemble_multi_output.py)."""
    result, _ = _run(how, tmp_path_factory)
    _check_end_to_end(result)
    assert result["signature_inputs"] == ["a", "b"]
    assert result["trunk"] is True
    wrong = {"list": "`x` must hold examples of shape (2,) (the model's input); got examples "
                     "of shape (1,)",
             "dict": "`x` must be a dict of arrays with keys ['a', 'b'] (the member's "
                     "inputs); got keys ['a']"}[how]
    assert wrong in result["wrong_inputs"]
    assert result["two_outputs"] == [2, 3]  # the units per output (until 2026-11-29 refused)


@pytest.mark.slow
def test_saved_model_cli_runs_a_several_input_export(tmp_path_factory, tmp_path):
    """``saved_model_cli run`` of the two-input export, one ``.npy`` per named
    input, gives the members' mean probability."""
    _, directory = _run("list", tmp_path_factory)
    done = saved_model_cli(
        "run", "--dir", str(directory / "served" / "1"), "--tag_set", "serve",
        "--signature_def", "serving_default",
        "--inputs", f"a={directory / 'a.npy'};b={directory / 'b.npy'}",
        "--outdir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    probabilities = np.load(tmp_path / "probabilities.npy")
    np.testing.assert_allclose(probabilities, np.load(directory / "expected.npy"),
                               rtol=0, atol=TOLERANCE)


def test_a_several_input_member_is_checked_in_process():
    """The rules in this process: a dict member's signature and serving names, an
    ensemble of a list member equal to its member's softmax for one weight set, a
    list of arrays of two batch sizes refused, and the row of a non-finite value in
    any input NaN."""
    a = keras.Input((3,), name="left")
    b = keras.Input((2,), name="right")
    logits = keras.layers.Dense(2)(keras.layers.Concatenate()([a, b]))
    shape, dtype, units = kb.member_model.check_ensemble_model(
        keras.Model({"left": a, "right": b}, logits))
    assert (shape, dtype, units) == ({"left": (3,), "right": (2,)},
                                     {"left": "float32", "right": "float32"}, 2)
    model = keras.Model([a, b], logits)
    ensemble = kb.PosteriorEnsemble(model, [model.get_weights()])
    assert ensemble.member_input_names == ["left", "right"]
    rng = np.random.default_rng(0)
    x = [rng.standard_normal((5, 3)).astype("float32"),
         rng.standard_normal((5, 2)).astype("float32")]
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(x)))
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, rtol=0, atol=TOLERANCE)
    with pytest.raises(ValueError, match=r"`x` must hold arrays of one batch size; got batch "
                                         r"sizes \[4, 5\]"):
        ensemble.predict([x[0], x[1][:4]], verbose=0)
    x[1][2, 0] = np.nan  # a non-finite value in the second input: that row is NaN
    rows = np.isnan(ensemble.predict(x, verbose=0)).any(axis=-1)
    assert rows.tolist() == [False, False, True, False, False]


class _Subclassed(keras.Model):
    """A plain ``keras.Model`` subclass (``kb.BayesianModel`` ones need a process of
    their own: the slow tests above): a dense layer of 3 logits on a tanh layer."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(4, activation="tanh")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


def test_a_subclassed_member_called_once_predicts_and_exports_the_members_mean(tmp_path):
    """A subclassed member built by one call takes its signature from the shape it
    was built on: the ensemble predicts the mean of the members' probabilities
    (numpy), and its export, loaded by TensorFlow, gives the same numbers. Before
    the call it is refused, saying how to build it."""
    import tensorflow as tf  # noqa: PLC0415 - the export is TensorFlow's

    keras.utils.set_random_seed(0)
    model = _Subclassed()
    with pytest.raises(ValueError, match="must be built and have weights"):
        kb.PosteriorEnsemble(model, [[]])
    x = inputs(7)
    model(x[:2])
    sets = weight_sets(model, 3)

    def member(w):
        logits = np.tanh(x @ w[0] + w[1]) @ w[2] + w[3]
        exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return exp / exp.sum(axis=-1, keepdims=True)

    expected = np.mean([member(w) for w in sets], axis=0)
    ensemble = kb.PosteriorEnsemble(model, sets)
    assert ensemble.member_input_shape == (INPUT_DIM,)
    assert np.max(np.std([member(w) for w in sets], axis=0)) > 100 * TOLERANCE
    predicted = ensemble.predict(x, verbose=0)
    np.testing.assert_allclose(predicted, expected, rtol=0, atol=TOLERANCE)
    version = ensemble.export(tmp_path / "served")
    served = tf.saved_model.load(version).signatures["serving_default"](inputs=tf.constant(x))
    np.testing.assert_allclose(served["probabilities"].numpy(), predicted, rtol=0,
                               atol=TOLERANCE)


class _Joined(keras.Model):
    """A subclassed model of two inputs, ``x[0]``/``x[1]`` or ``x["a"]``/``x["b"]``."""

    def __init__(self, keys, **kwargs):
        super().__init__(**kwargs)
        self.keys = keys
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(keras.ops.concatenate([x[k] for k in self.keys], axis=-1))


@pytest.mark.parametrize("keys, names", [((0, 1), ["inputs_0", "inputs_1"]),
                                         (("a", "b"), ["a", "b"])])
def test_a_subclassed_member_of_several_inputs_takes_them_as_it_was_built(keys, names):
    """A subclassed member built on a list (or a dict) of inputs: the ensemble's
    signature is the shapes it was built on, its serving names ``inputs_i`` (or the
    keys), and it predicts the member's softmax for one weight set."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((5, 4)).astype("float32"),
              rng.standard_normal((5, 2)).astype("float32")]
    x = arrays if keys == (0, 1) else dict(zip(keys, arrays))
    model = _Joined(keys)
    model(x)
    ensemble = kb.PosteriorEnsemble(model, [model.get_weights()])
    expected_shape = [(4,), (2,)] if keys == (0, 1) else {"a": (4,), "b": (2,)}
    assert ensemble.member_input_shape == expected_shape
    assert ensemble.member_input_names == names
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(x)))
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, rtol=0, atol=TOLERANCE)


class _Tagger(keras.Model):
    """A subclassed sequence tagger: token ids -> Embedding -> 3 logits per position;
    declares its input dtype."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.serving_input_dtype = "int32"
        self.embed = keras.layers.Embedding(20, 4)
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.embed(x))


class _Ids(keras.Model):
    """Token ids one-hot encoded in ``call`` (no Embedding): declares its input dtype."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.serving_input_dtype = "int32"
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(keras.ops.one_hot(x, 20))


@pytest.mark.parametrize("cls", [_Tagger, _Ids])
def test_a_subclassed_member_fed_token_ids_exports_an_int32_signature(cls, tmp_path):
    """A subclassed member that sets ``serving_input_dtype = "int32"`` gets int32
    inputs: its export's signature is int32 and
    serves the ensemble's predictions, the members' mean in numpy (until 2026-11-29
    float32 for any subclassed member: a tagger's export took float ids)."""
    import tensorflow as tf  # noqa: PLC0415 - the export is TensorFlow's

    keras.utils.set_random_seed(0)
    ids = np.random.default_rng(0).integers(0, 20, size=(6, 5)).astype("int32")
    model = cls()
    model(ids[:2])
    sets = weight_sets(model, 3)

    def member(w):
        embedded = w[0][ids] if cls is _Tagger else np.eye(20, dtype="float32")[ids]
        logits = embedded @ w[-2] + w[-1]
        exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return exp / exp.sum(axis=-1, keepdims=True)

    ensemble = kb.PosteriorEnsemble(model, sets)
    assert (ensemble.member_input_shape, ensemble.member_input_dtype) == ((5,), "int32")
    predicted = ensemble.predict(ids, verbose=0)
    np.testing.assert_allclose(predicted, np.mean([member(w) for w in sets], axis=0), rtol=0,
                               atol=TOLERANCE)
    served = tf.saved_model.load(ensemble.export(tmp_path / "served")).signatures[
        "serving_default"]
    [spec] = served.structured_input_signature[1].values()
    assert spec.dtype == tf.int32
    np.testing.assert_allclose(served(inputs=tf.constant(ids))["probabilities"].numpy(),
                               predicted, rtol=0, atol=TOLERANCE)


def test_a_subclassed_members_declared_input_dtype_is_checked():
    """A ``serving_input_dtype`` that is no dtype, or not one per input, is refused
    naming it; a float member keeps float32 inputs."""
    keras.utils.set_random_seed(0)
    model = _Subclassed()
    model(inputs(2))
    assert kb.PosteriorEnsemble(model, [model.get_weights()]).member_input_dtype == "float32"
    for bad in ("token", ["int32", "int32"]):
        model.serving_input_dtype = bad
        with pytest.raises(ValueError, match=r"`serving_input_dtype` must be a dtype name .*"
                           r"one per input, in the structure it was built on \(1 input"):
            kb.PosteriorEnsemble(model, [model.get_weights()])
