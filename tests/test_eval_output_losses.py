"""Each output's loss that ``evaluate`` and ``fit(validation_data=...)`` log for a
model of several outputs (``cls_loss``, ``reg_loss``, ``val_cls_loss``, ...) is
the mean over the examples of the set, whatever the batch size: checked against
numpy for a :class:`keras_bnn.BayesianModel` of a 3-class head ``cls`` and a
Gaussian head ``reg`` and for the :class:`keras_bnn.PosteriorEnsemble` of two of
its weight sets, with sample weights, on 54 rows in batches of 18 (dividing
them), 32 and 7 (a ragged last batch), on TensorFlow and (slow) JAX.

Keras weighs each update of an output's loss tracker by the predictions' static
batch size, None in TensorFlow's graph of the test step, so each batch's mean
weighed 1 and a ragged last batch as much as a full one. The model's trackers
were weighed by the batch's examples by :mod:`keras_bnn.loss_shares` (as in
training); the ensemble's were not until 2026-11-29: in batches of 32 its
``cls_loss``/``reg_loss`` read 1.2075/1.6442 here for 1.1230/1.5380, in batches
of 7 1.1394/1.5572 (the summed ``loss`` was right). JAX traces each batch shape,
so its sizes are static and it was right before.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

N = 54
BATCH_SIZES = (18, 32, 7)
#: The validation's batch size in fit: 32 + 22.
VALIDATION_BATCH = 32
#: float32 per-example losses (a few ulps each, of values O(1)) averaged over N
#: against float64 numpy: N ulps relative at most, as tests/test_ensemble_multi_output.py.
RTOL = N * float(np.finfo(np.float32).eps)
_rng = np.random.default_rng(0)
X = _rng.standard_normal((N, 4)).astype("float32")
Y_CLS = (X[:, 0] + X[:, 1] > 0).astype("int32") + (X[:, 2] > 1).astype("int32")
Y_REG = (X[:, 3] + 0.3 * _rng.standard_normal(N)).astype("float32")
WEIGHTS = np.linspace(0.2, 1.8, N).astype("float32")


def scores():
    """Samples the two-head model one epoch (validation in batches of 32), then
    evaluates it and the ensemble of its weights and a perturbed copy in each of
    :data:`BATCH_SIZES`, with :data:`WEIGHTS`, on the backend of the process.

    Returns:
        dict (JSON-ready): ``val`` (fit's last ``val_*`` logs), ``model`` and
        ``ensemble`` (evaluate's logs by batch size), ``sets`` (the weight sets).
    """
    import keras  # noqa: PLC0415 - the backend is the process's
    import keras_bnn as kb  # noqa: PLC0415

    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(6, activation="tanh")(inputs)
    model = kb.bayesian(keras.Model(inputs, {"cls": keras.layers.Dense(3, name="cls")(hidden),
                                             "reg": keras.layers.Dense(2, name="reg")(hidden)}))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N,
                  loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        "reg": kb.likelihoods.GaussianNLL()})
    y = {"cls": Y_CLS, "reg": Y_REG}
    history = model.fit(X, y, batch_size=16, epochs=1, verbose=0,
                        validation_data=(X, y, WEIGHTS), validation_batch_size=VALIDATION_BATCH)
    sampled = model.get_weights()
    perturbed = [w + 0.3 * np.random.default_rng(1).standard_normal(w.shape).astype(w.dtype)
                 for w in sampled]
    ensemble = kb.PosteriorEnsemble(model, [sampled, perturbed],
                                    likelihood={"cls": "categorical", "reg": "gaussian"})
    ensemble.compile(loss={"cls": kb.likelihoods.PredictiveNLL(),
                           "reg": kb.likelihoods.GaussianNLL()})
    evaluated = {name: {size: _floats(scored.evaluate(X, y, sample_weight=WEIGHTS,
                                                      batch_size=size, verbose=0,
                                                      return_dict=True))
                        for size in BATCH_SIZES}
                 for name, scored in (("model", model), ("ensemble", ensemble))}
    return {"val": _floats({key: values[-1] for key, values in history.history.items()}),
            **evaluated, "sets": [[w.tolist() for w in weights]
                                  for weights in (sampled, perturbed)]}


def _floats(logs):
    return {key: float(value) for key, value in logs.items()}


def _per_example(sets):
    """Per example, in float64: the model's (first set's) cross-entropy and Gaussian
    NLL, and the ensemble's −log p̄(y) and mixture NLL."""
    logits, log_densities = [], []
    for weights in sets:
        hk, hb, ck, cb, rk, rb = (np.asarray(w, "float64") for w in weights)
        hidden = np.tanh(X @ hk + hb)
        logits.append(hidden @ ck + cb)
        raw = hidden @ rk + rb
        log_densities.append(-0.5 * (np.log(2 * np.pi) + raw[:, 1]
                                     + (Y_REG - raw[:, 0]) ** 2 / np.exp(raw[:, 1])))
    logits, log_densities = np.asarray(logits), np.asarray(log_densities)
    log_p = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)  # [S, N, 3]
    log_p = log_p[:, np.arange(N), Y_CLS]
    model = {"cls": -log_p[0], "reg": -log_densities[0]}
    ensemble = {"cls": np.log(len(sets)) - np.logaddexp.reduce(log_p, axis=0),
                "reg": np.log(len(sets)) - np.logaddexp.reduce(log_densities, axis=0)}
    return model, ensemble


def _mean_of_batch_means(values, size):
    """Keras' reading before: the unweighted mean of each batch's Σ w·ℓ / b."""
    return np.mean([np.mean((WEIGHTS * values)[i:i + size]) for i in range(0, N, size)])


def _check(result):
    model, ensemble = _per_example(result["sets"])
    expected = {kind: {head: float(np.mean(WEIGHTS * values[head])) for head in ("cls", "reg")}
                for kind, values in (("model", model), ("ensemble", ensemble))}
    for kind, values in (("model", model), ("ensemble", ensemble)):
        for head in ("cls", "reg"):  # the mean of batch means would fail the tolerance
            missed = _mean_of_batch_means(values[head], VALIDATION_BATCH)
            assert abs(missed / expected[kind][head] - 1) > 10 * RTOL, (kind, head)
    for key in ("cls_loss", "reg_loss"):
        assert result["val"][f"val_{key}"] == pytest.approx(
            expected["model"][key[:3]], rel=RTOL), f"val_{key}"
    for kind in ("model", "ensemble"):
        for size, logs in result[kind].items():
            for head in ("cls", "reg"):
                assert logs[f"{head}_loss"] == pytest.approx(
                    expected[kind][head], rel=RTOL), (kind, size, head)
            assert logs["loss"] == pytest.approx(
                expected[kind]["cls"] + expected[kind]["reg"], rel=RTOL), (kind, size)


def test_each_outputs_loss_is_the_mean_over_the_set_for_any_batch_size():
    """TensorFlow: ``val_cls_loss``/``val_reg_loss`` of fit (batches of 32 + 22) and
    each output's ``evaluate`` loss of the model and of the ensemble, in batches of
    18, 32 and 7, are the weighted means Σ w·ℓ / N of numpy, and ``loss`` their sum."""
    _check(json.loads(json.dumps(scores())))


@pytest.mark.slow  # a JAX process
def test_each_outputs_loss_is_the_mean_over_the_set_under_jax():
    """The same under KERAS_BACKEND=jax."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(row for row in done.stdout.splitlines() if row.startswith("RESULT "))
    _check(json.loads(line[len("RESULT "):]))


if __name__ == "__main__":
    print("RESULT", json.dumps(scores()))
