"""``predict`` of a ``tf.data.Dataset`` of single examples is refused naming ``x``,
as ``fit`` and ``evaluate`` refuse it: by the model and by every predict
method of a ``PosteriorEnsemble``. Until 2026-11-30 it failed inside the
graph with Keras' "Exception encountered when calling BayesianModel.call()"
(the model) or a graph ``InvalidArgumentError`` (the ensemble)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb

X = np.random.default_rng(0).normal(size=(20, 5)).astype("float32")
Y = (X[:, 0] > 0).astype("int32")


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """A 5-8-2 MLP compiled with SGLD and the ensemble of its one sample."""
    net = kb.models.mlp((5,), 2, hidden=(8,))
    net.compile(sampler=kb.samplers.SGLD(1e-3), train_size=20,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(str(tmp_path_factory.mktemp("unbatched") / "samples"))
    store.append(net)
    return net, kb.PosteriorEnsemble.from_store(store)


UNBATCHED = {"x": lambda: tf.data.Dataset.from_tensor_slices(X),
             "(x,)": lambda: tf.data.Dataset.from_tensor_slices((X,)),
             "(x, y)": lambda: tf.data.Dataset.from_tensor_slices((X, Y))}


@pytest.mark.parametrize("form", sorted(UNBATCHED))
@pytest.mark.parametrize("owner", ["model.predict", "predict", "predict_uncertainty",
                                   "predict_members"])
def test_a_dataset_of_single_examples_is_refused_naming_x(sampled, form, owner):
    net, ensemble = sampled
    method = net.predict if owner == "model.predict" else getattr(ensemble, owner)
    with pytest.raises(ValueError) as raised:
        method(UNBATCHED[form](), verbose=0)
    name = "predict" if owner == "model.predict" else owner
    assert str(raised.value).startswith(
        f"{name}: `x` must yield batches of examples of shape (5,)"), raised.value
    assert "dataset.batch(batch_size)" in str(raised.value)


def test_batched_and_unknown_rank_datasets_predict_as_arrays(sampled):
    """A batched dataset predicts what the arrays do; one whose element shape is
    unknown (a generator without a signature's shapes) is left to Keras."""
    net, ensemble = sampled
    batched = tf.data.Dataset.from_tensor_slices((X, Y)).batch(8)
    np.testing.assert_allclose(net.predict(batched, verbose=0), net.predict(X, verbose=0))
    np.testing.assert_allclose(ensemble.predict(batched, verbose=0),
                               ensemble.predict(X, verbose=0), rtol=1e-6)
    unknown = tf.data.Dataset.from_generator(
        lambda: iter([X[:8], X[8:]]),
        output_signature=tf.TensorSpec(shape=None, dtype=tf.float32))
    np.testing.assert_allclose(net.predict(unknown, verbose=0), net.predict(X, verbose=0))
