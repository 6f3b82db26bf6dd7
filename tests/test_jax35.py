"""The JAX backend as a user meets it: a ``PosteriorEnsemble``'s ``evaluate`` under
``keras.distribution.DataParallel``.

The JAX half runs in a subprocess (the Keras backend is fixed at import),
which imports a function of this file, as tests/test_jax_user.py does.
"""

import pytest

pytest.importorskip("jax")

#: Puts tests/ on the path of the JAX process: it runs :func:`ensemble_evaluations`.
JAX_EVALUATE = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
                "from test_jax35 import ensemble_evaluations; "
                "print('RESULT ' + json.dumps(ensemble_evaluations(sys.argv[2])))")


def ensemble_evaluations(folder):
    """A ``PosteriorEnsemble``'s ``evaluate`` under ``DataParallel`` over 2 devices:
    of 100 examples in batches of 50, then of 101 (the last batch of 1 cannot
    be split) as arrays and as a generator of batches (no TensorFlow to
    import), then of the 100 again, with a ``predict`` of the 100 before and
    after.

    Returns:
        dict: ``errors`` (type and message of the two calls on 101, None where
        one ran), ``loss`` (of the 100, before and after) and
        ``max_difference`` between the predictions before and after.
    """
    import numpy as np

    import keras_bnn as kb

    x, y, net = _sampled_mlp(101)
    store = kb.SampleStore(folder)
    store.append(net)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    before = ensemble.predict(x[:100], batch_size=50, verbose=0)
    losses = [ensemble.evaluate(x[:100], y[:100], batch_size=50, verbose=0)]
    errors = [_error_of(lambda: ensemble.evaluate(x, y, batch_size=50, verbose=0)),
              _error_of(lambda: ensemble.evaluate(
                  ((x[i:i + 50], y[i:i + 50]) for i in (0, 50, 100)), verbose=0))]
    after = ensemble.predict(x[:100], batch_size=50, verbose=0)
    losses.append(ensemble.evaluate(x[:100], y[:100], batch_size=50, verbose=0))
    return {"errors": errors, "loss": [float(loss) for loss in losses],
            "max_difference": float(np.max(np.abs(after - before)))}


def _sampled_mlp(rows):
    """Under ``DataParallel`` over the JAX devices: ``rows`` examples ``x`` [rows, 5],
    labels ``y`` and a 5-8-2 MLP compiled with SGLD (in the JAX process)."""
    import jax
    import keras
    import numpy as np

    import keras_bnn as kb

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    x = np.random.default_rng(0).normal(size=(rows, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    net = kb.models.mlp((5,), 2, hidden=(8,))
    net.compile(sampler=kb.samplers.SGLD(1e-3), train_size=100,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return x, y, net


def _error_of(call):
    """None where ``call()`` returns, else the type and message of what it raised."""
    try:
        call()
    except Exception as raised:  # the test checks its type and message
        return f"{type(raised).__name__}: {raised}"
    return None


def test_ensemble_evaluate_refuses_unsplittable_batches_and_keeps_the_weights(tmp_path):
    """Under DataParallel over 2 devices, an ensemble's ``evaluate`` of 101
    examples in batches of 50 is refused before Keras' loop, naming
    ``batch_size``, as the model's is; a dataset's ragged last batch (a
    generator's) fails inside it, explained the same way; after both the
    ensemble predicts and scores as before. Before, both raised JAX's bare
    ``IndivisibleError`` inside Keras' loop, which had taken the weights out
    of the variables: every later ``predict`` or ``evaluate`` failed with
    "TypeError: 'NoneType' object is not callable"."""
    from test_jax_user import _jax_process  # here: the JAX process imports this file

    result = _jax_process(JAX_EVALUATE, str(tmp_path / "samples"),
                          XLA_FLAGS="--xla_force_host_platform_device_count=2")
    arrays, dataset = result["errors"]
    assert arrays is not None and arrays.startswith("ValueError: evaluate: `batch_size`"), arrays
    assert "2 devices" in arrays and "drop 1 of the 101" in arrays, arrays
    assert dataset is not None and dataset.startswith("ValueError: evaluate: `batch_size`"), \
        dataset
    assert "a batch of 1 examples" in dataset, dataset
    assert result["max_difference"] == 0.0  # the same weights, the same program
    assert result["loss"][1] == result["loss"][0]


#: The JAX process of :func:`on_batch_errors`.
JAX_ON_BATCH = JAX_EVALUATE.replace("ensemble_evaluations", "on_batch_errors")


def on_batch_errors(_folder):
    """``train_on_batch`` and ``test_on_batch`` under ``DataParallel`` over 2
    devices: of 51 rows (not split evenly), then of 50.

    Returns:
        dict: ``errors`` (type and message of the two calls on 51 rows) and
        ``steps`` (the sampler's step count after them, then after one
        ``train_on_batch`` of 50).
    """
    x, y, net = _sampled_mlp(51)
    errors = [_error_of(lambda: net.train_on_batch(x, y)),
              _error_of(lambda: net.test_on_batch(x, y))]
    steps = [int(net.optimizer.iterations.numpy())]
    net.train_on_batch(x[:50], y[:50])
    steps.append(int(net.optimizer.iterations.numpy()))
    return {"errors": errors, "steps": steps}


def test_on_batch_methods_refuse_a_batch_that_does_not_split_naming_its_length(tmp_path):
    """Under DataParallel over 2 devices, ``train_on_batch`` and
    ``test_on_batch`` of 51 rows are refused before any step with a
    ``ValueError`` naming ``len(x)`` and the device count, as ``fit`` names
    ``batch_size``; 50 rows then train one step. Before, both raised JAX's
    bare ``IndivisibleError`` from inside the step."""
    from test_jax_user import _jax_process

    result = _jax_process(JAX_ON_BATCH, str(tmp_path),
                          XLA_FLAGS="--xla_force_host_platform_device_count=2")
    for owner, error in zip(("train_on_batch", "test_on_batch"), result["errors"]):
        assert error is not None and error.startswith(f"ValueError: {owner}: `len(x)`"), error
        assert "2 devices" in error and "len(x)=51" in error, error
    assert result["steps"] == [0, 1]
