"""``evaluate`` and validation log the set's mean NLL over the terms its loss counts.

Keras averages a test step's loss over the epoch weighing each batch by its
examples: exact when every example gives the loss as many terms, not when the
loss counts other terms: (a) a Keras mask (padded token sequences,
``Embedding(mask_zero=True)``: the unmasked tokens), (b) the loss's
``ignore_class`` on ``[N, T]`` labels and on ``[N]`` labels (the labels it
scores), (c) ``reduction="mean_with_sample_weight"`` (the denominator ``Σ w``).
(d) ``"sum_over_batch_size"`` with sample weights divides by the examples and
was right already (the guard). Checked against numpy on the model's
predictions over the whole set (``Σ m·w·ℓ / D``, ``D`` the loss's denominator
on one batch of the whole set), for ``nll`` and ``loss`` of a model of one
output (c), each output's loss and ``loss`` of a model of five, one a case
(``tag`` (a), ``padded`` and ``unlabelled`` (b), ``weighted`` (c), ``plain``
(d)), the ``val_`` keys of ``fit(validation_data=...)`` (in batches of 32),
and the :class:`keras_bnn.PosteriorEnsemble` of two weight sets, in batches of
18 (dividing N = 54) and 7 (a ragged last batch), on TensorFlow and (slow) JAX.

Until 2026-11-29 each case but (d) read a batch-size dependent mean of the
batches' means (each batch weighed by its examples): on TensorFlow the model of
one output read ``nll`` 1.1716 in batches of 18 and 1.1761 in batches of 7, its
``val_nll`` 1.1619, for the set's 1.2251; the model of five ``tag_loss`` 1.1210
and 1.0934 for 1.0754 (this test on the code before the change).
"""

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

N, T, K, VOCAB = 54, 6, 3, 9
BATCH_SIZES = (18, 7)
#: float32 losses (a few ulps each, values O(1)) summed over at most N·T terms
#: against float64 numpy: N·T ulps relative at most.
RTOL = N * T * float(np.finfo(np.float32).eps)
_rng = np.random.default_rng(0)
#: Token sequences of lengths 1..T, 0-padded; tags in [0, K) at each token, and
#: the same padded with -1 (the loss's ignore_class).
TOKENS = np.where(np.arange(T) < _rng.integers(1, T + 1, (N, 1)),
                  _rng.integers(1, VOCAB, (N, T)), 0).astype("int32")
TAGS = (TOKENS % K).astype("int32")
PADDED = np.where(TOKENS > 0, TAGS, -1).astype("int32")
#: Rows of 4 features; classes in [0, K), and the same a third of them -1.
X = _rng.standard_normal((N, 4)).astype("float32")
CLASSES = ((X[:, 0] > 0).astype("int32") + (X[:, 1] > 1)).astype("int32")
UNLABELLED = np.where(_rng.random(N) < 1 / 3, -1, CLASSES).astype("int32")
WEIGHTS = np.linspace(0.2, 1.8, N).astype("float32")[:, None]  # one a sequence, [N, 1]

#: Per model and output: ``(labels, counted, denominator)`` of ``Σ m·w·ℓ / D``.
TERMS = {
    "one": {"": (CLASSES, True, WEIGHTS.sum())},
    "five": {"tag": (TAGS, TOKENS > 0, (TOKENS > 0).sum()),
             "padded": (PADDED, PADDED >= 0, (PADDED >= 0).sum()),
             "unlabelled": (UNLABELLED, UNLABELLED >= 0, (UNLABELLED >= 0).sum()),
             "weighted": (CLASSES, True, WEIGHTS.sum()),
             "plain": (CLASSES, True, N)},
}


def _models(scope):
    """``{name: (model, x, y, ensemble loss)}``: the models of :data:`TERMS`, compiled
    in ``scope`` (a strategy's, or a null context)."""
    import keras  # noqa: PLC0415 - the backend is the process's
    import keras_bnn as kb  # noqa: PLC0415

    def crossentropy(**kwargs):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, **kwargs)

    def compiled(inputs, outputs, loss):
        model = kb.bayesian(keras.Model(inputs, outputs))
        model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N,
                      loss=loss)
        return model

    with scope:
        keras.utils.set_random_seed(0)
        rows = keras.Input((4,))
        one = compiled(rows, keras.layers.Dense(K)(rows),
                       crossentropy(reduction="mean_with_sample_weight"))
        tokens = keras.Input((T,), dtype="int32")
        heads_of = {name: keras.layers.Embedding(VOCAB, 4, mask_zero=name == "tag")(tokens)
                    for name in ("tag", "padded")}  # masked, and not
        losses = {"tag": crossentropy(), "padded": crossentropy(ignore_class=-1),
                  "unlabelled": crossentropy(ignore_class=-1),
                  "weighted": crossentropy(reduction="mean_with_sample_weight"),
                  "plain": crossentropy()}
        five = compiled([tokens, rows], {
            name: keras.layers.Dense(K, name=name)(heads_of.get(name, rows))
            for name in losses}, losses)
        predictive = {name: kb.likelihoods.PredictiveNLL(reduction=loss.reduction)
                      if loss.ignore_class is None
                      else keras.losses.SparseCategoricalCrossentropy(ignore_class=-1)
                      for name, loss in losses.items()}
    return {"one": (one, X, CLASSES, predictive["weighted"]),
            "five": (five, [TOKENS, X], {"tag": TAGS, "padded": PADDED,
                                         "unlabelled": UNLABELLED, "weighted": CLASSES,
                                         "plain": CLASSES}, predictive)}


def scores(strategy=None):
    """Each model sampled one epoch with validation in batches of 32, then it and the
    ensemble of its weights and a perturbed copy evaluated with :data:`WEIGHTS` in
    each of :data:`BATCH_SIZES`, on the backend of the process; under ``strategy``
    (a ``tf.distribute`` strategy) the models only, in batches of 7.

    Returns:
        dict (JSON-ready): per model ``val`` (fit's ``val_*`` logs), ``model`` and
        ``ensemble`` (evaluate's logs by batch size), ``logits`` (each weight set's
        predictions on the whole set, by output; ``""`` for one output).
    """
    import keras_bnn as kb  # noqa: PLC0415

    results = {}
    scope = contextlib.nullcontext() if strategy is None else strategy.scope()
    for name, (model, x, y, ensemble_loss) in _models(scope).items():
        history = model.fit(x, y, batch_size=16, epochs=1, verbose=0,
                            validation_data=(x, y, WEIGHTS), validation_batch_size=32)
        sets = [model.get_weights()]
        sets.append([w + 0.3 * np.random.default_rng(1).standard_normal(w.shape).astype(w.dtype)
                     for w in sets[0]])
        logits = []
        for weight_set in sets:
            model.set_weights(weight_set)
            predicted = model.predict(x, batch_size=N, verbose=0)
            logits.append({output: np.asarray(value).tolist() for output, value in (
                predicted.items() if isinstance(predicted, dict) else [("", predicted)])})
        model.set_weights(sets[0])
        scorers = {"model": model}
        if strategy is None:
            scorers["ensemble"] = kb.PosteriorEnsemble(
                model, sets, likelihood="categorical" if name == "one"
                else {output: "categorical" for output in y})
            scorers["ensemble"].compile(loss=ensemble_loss)
        results[name] = {
            "val": {key: float(values[-1]) for key, values in history.history.items()
                    if key.startswith("val_")},
            **{scorer: {str(size): {key: float(value) for key, value in scored.evaluate(
                x, y, sample_weight=WEIGHTS, batch_size=size, verbose=0,
                return_dict=True).items()} for size in (BATCH_SIZES if strategy is None else (7,))}
               for scorer, scored in scorers.items()},
            "logits": logits}
    return results


def _softmax(logits):
    logits = np.asarray(logits, "float64")
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def expected(name, logits):
    """The set's mean NLL over its counted terms, by numpy, of the model (its first
    weight set) and the ensemble (the mean of the two sets' softmaxes), per output.

    Returns:
        ``{"model": {output: value}, "ensemble": {output: value}}``.
    """
    result = {"model": {}, "ensemble": {}}
    for output, (labels, counted, denominator) in TERMS[name].items():
        first, second = (_softmax(weight_set[output]) for weight_set in logits)
        for scorer, probabilities in (("model", first), ("ensemble", (first + second) / 2)):
            picked = np.take_along_axis(probabilities, np.maximum(labels, 0)[..., None], -1)
            weights = WEIGHTS.reshape((N,) + (1,) * (labels.ndim - 1))
            terms = -np.log(picked[..., 0]) * counted * weights  # labels -1 not counted
            result[scorer][output] = terms.sum() / denominator
    return result


def _check(results):
    """Every loss key of ``results`` against :func:`expected`, within :data:`RTOL`;
    the assertion lists each key off and its value with the expected one."""
    off = []
    for name, scored in results.items():
        want = expected(name, scored["logits"])
        logs = {f"{scorer}@{size}": logs for scorer in ("model", "ensemble")
                for size, logs in scored.get(scorer, {}).items()}
        logs["model@val"] = {key[len("val_"):]: value for key, value in scored["val"].items()}
        for where, values in logs.items():
            outputs = want[where.split("@")[0]]
            sums = {"loss": sum(outputs.values())}
            if where.startswith("model"):
                sums["nll"] = sums["loss"]
            sums.update({f"{output}_loss": value for output, value in outputs.items() if output})
            off += [f"{name} {where} {key} {values[key]:.4f} for {value:.4f}"
                    for key, value in sums.items()
                    if not np.isclose(values[key], value, rtol=RTOL, atol=0)]
    assert not off, "\n".join(off)


def test_evaluate_and_validation_are_the_sets_mean_over_its_counted_terms():
    _check(scores())


@pytest.mark.slow
def test_the_same_under_mirrored_strategy(new_strategy):
    """Batches of 7 split 4 + 3 over the 2 logical CPUs (tests/conftest.py); each
    replica's loss and denominator are summed over the replicas when read."""
    _check(scores(new_strategy()))


@pytest.mark.slow
def test_the_same_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    _check(json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    print(json.dumps(scores()))
