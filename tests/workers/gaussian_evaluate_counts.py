"""How often a Gaussian PosteriorEnsemble's evaluate computes its members; prints RESULT <json>.

Usage: python gaussian_evaluate_counts.py (under the KERAS_BACKEND the test sets);
tests/test_ensemble_gaussian_scoring.py also imports :func:`counts` under TensorFlow.

The members' graph is ``_members_and_finite_rows``, wrapped by a counter
(Python: it counts calls while tracing, or per batch when run eagerly).
"""

import json

import keras
import numpy as np

import keras_bnn as kb
from keras_bnn import likelihoods, metrics


def _mean_error(y_true, y_pred):
    return keras.ops.mean(keras.ops.abs(y_true - y_pred[:, :2]), axis=-1)


def counts():
    """Member-graph calls of evaluate with a metric (1 and 3 batches of 20, run
    eagerly; 1 batch traced, with the traces of compute_loss), evaluate's loss
    and kb.metrics' float64 mixture NLL of the same 60 rows."""
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(4)(inputs))
    rng = np.random.default_rng(7)
    sets = [[0.7 * rng.standard_normal(w.shape).astype("float32") for w in model.weights]
            for _ in range(3)]
    x = rng.standard_normal((60, 3)).astype("float32")
    y = rng.standard_normal((60, 2)).astype("float32")
    calls = {"members": 0, "compute_loss": 0}

    def ensemble(run_eagerly):
        made = kb.PosteriorEnsemble(model, sets, likelihood="gaussian")
        members, compute_loss = made._members_and_finite_rows, made.compute_loss

        def counted_members(batch):
            calls["members"] += 1
            return members(batch)

        def counted_loss(*args, **kwargs):
            calls["compute_loss"] += 1
            return compute_loss(*args, **kwargs)

        made._members_and_finite_rows, made.compute_loss = counted_members, counted_loss
        made.compile(loss=likelihoods.PredictiveGaussianNLL(), metrics=[_mean_error],
                     run_eagerly=run_eagerly)
        return made

    result = {}
    for batches in (1, 3):
        calls.update(members=0, compute_loss=0)
        loss = ensemble(True).evaluate(x, y, batch_size=60 // batches, verbose=0)
        result[f"eager_{batches}"] = dict(calls)
    calls.update(members=0, compute_loss=0)
    result["loss"] = ensemble(False).evaluate(x, y, batch_size=60, verbose=0)
    result["traced"] = dict(calls)
    result["eager_loss"] = loss
    members = ensemble(False).predict_members(x).astype(np.float64)
    result["mixture_nll"] = float(metrics.gaussian_mixture_nll_per_example(
        members[..., :2], np.exp(members[..., 2:]), y).mean())
    return result


if __name__ == "__main__":
    print("RESULT " + json.dumps(counts()))
