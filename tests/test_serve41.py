"""serve41: a pinned models.config's warning made an error publishes nothing, and
``sampler.learning_rate.assign`` is refused by name (as ``learning_rate =`` is).

The JAX half of the learning-rate test runs in a subprocess (the Keras backend is
fixed at import): :func:`test_jax_user._jax_process` runs :func:`jax_assign_refusal`
(TensorFlow and test_jax_user are imported in the tests only, so that process
imports neither).
"""

import os
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import tiny_ensemble
from keras_bnn import durable, export
from keras_bnn.models_config import UnservedVersionWarning

#: A models.config whose entry for the model "tiny" serves version 1 only.
PINNED = """model_config_list {
  config {
    name: "tiny"
    base_path: "/models/tiny"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 } }
  }
}
"""


def _pinned_model_dir(tmp_path):
    """(ensemble, model_dir) with version 1 exported and :data:`PINNED` written."""
    ensemble, model_dir = tiny_ensemble(count=2), tmp_path / "tiny"
    ensemble.export(model_dir)
    (model_dir / export.MODELS_CONFIG).write_text(PINNED)
    return ensemble, model_dir


@pytest.mark.parametrize("version", [None, 2])
def test_a_warning_made_an_error_publishes_nothing(tmp_path, version):
    """Under ``-W error`` the UnservedVersionWarning is an exception. Until 2026-12-01
    it was raised after the rename, so the export failed and its version landed
    anyway ("assert ['1', '2', 'models.config'] == ['1', 'models.config']"); now the
    pin is checked before publishing: the export fails and leaves the directory as
    it was (no version, no staging directory, the file as the user wrote it)."""
    ensemble, model_dir = _pinned_model_dir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnservedVersionWarning)
        with pytest.raises(UnservedVersionWarning, match="new version 2"):
            ensemble.export(model_dir, version=version)
    assert sorted(os.listdir(model_dir)) == ["1", "models.config"]
    assert (model_dir / export.MODELS_CONFIG).read_text() == PINNED


def test_without_error_the_unserved_version_is_published_and_warned_once(tmp_path):
    """Warnings not made errors: version 2 is published and one warning names it."""
    ensemble, model_dir = _pinned_model_dir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = ensemble.export(model_dir)
    assert path == os.path.join(str(model_dir), "2")
    unserved = [w for w in caught if w.category is UnservedVersionWarning]
    assert len(unserved) == 1 and "new version 2." in str(unserved[0].message)
    # the line that called export_ensemble, as before: PosteriorEnsemble.export's
    assert unserved[0].filename == kb.ensemble.__file__


def test_a_version_moved_by_a_race_is_warned_about_before_it_is_published(
        tmp_path, monkeypatch):
    """Another export publishes version 2 between this one's choice and its rename:
    it publishes 3, warned about before that rename too (the warning for 2, the
    version it was about to publish, came first)."""
    ensemble, model_dir = _pinned_model_dir(tmp_path)
    publish = durable.publish_directory
    published = []

    def racing(staging, target):  # another export publishes `target` first
        if os.path.basename(target) == "2" and not os.path.exists(target):
            os.mkdir(target)
        published.append((os.path.basename(target), len(caught)))
        return publish(staging, target)

    monkeypatch.setattr(durable, "publish_directory", racing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ensemble.export(model_dir) == os.path.join(str(model_dir), "3")
    assert [str(w.message).rsplit("new version ", 1)[1][:2] for w in caught
            if w.category is UnservedVersionWarning] == ["2.", "3."]
    assert published == [("2", 1), ("3", 2)]  # each warned about before its rename


# ------------------------------------------------------------ learning_rate.assign

def _fitted_sampler():
    """An SGLD sampler after one epoch of a tiny model (its step frozen by the warm-up)."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype("float32")
    inputs = keras.Input((3,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
    model.compile(sampler=kb.samplers.SGLD(warmup_steps=2), train_size=16,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, (x[:, 0] > 0).astype("int32"), batch_size=8, epochs=1, verbose=0)
    return model.optimizer


def _assign_refusal(sampler, method="assign"):
    """What ``sampler.learning_rate.<method>(0.5)`` raises: (type name, message)."""
    try:
        getattr(sampler.learning_rate, method)(0.5)
    except Exception as error:  # noqa: BLE001 - the refusal is what is measured
        return type(error).__name__, str(error)
    return None, None


def jax_assign_refusal():
    """:func:`_assign_refusal` under JAX, the type and value read, and the jaxprs
    of reading ``learning_rate`` and of the step-size computation (run by
    :func:`test_learning_rate_assign_is_refused_by_name_under_jax`)."""
    import jax  # noqa: PLC0415 - the JAX process only

    sampler = _fitted_sampler()
    value = sampler.learning_rate
    name, message = _assign_refusal(sampler)
    traced = [str(jax.make_jaxpr(read)()) for read in
              (lambda: sampler.learning_rate, sampler._get_current_learning_rate)]
    return {"type": type(value).__name__, "value": float(value), "name": name,
            "message": message, "h": sampler.step_size_value, "traced": traced}


@pytest.mark.parametrize("method", ["assign", "assign_add", "assign_sub"])
def test_learning_rate_assign_is_refused_by_name(method):
    """``sampler.learning_rate.assign(h)`` (a Keras optimizer's rate is a variable):
    until 2026-12-01 "AttributeError: 'tensorflow.python.framework.ops.EagerTensor'
    object has no attribute 'assign'"; now the TypeError that ``learning_rate = h``
    raises, naming ``learning_rate`` and the ways that work. What is read is
    unchanged: the same tensor type and value."""
    sampler = _fitted_sampler()
    value = sampler.learning_rate
    assert type(value).__name__ == "EagerTensor"
    assert float(value) == pytest.approx(sampler.step_size_value)
    name, message = _assign_refusal(sampler, method)
    assert name == "TypeError", message
    assert "SGLD: the step size (`learning_rate`) of a sampler cannot be set (got 0.5)" \
        in message and "LearningRateSchedule" in message
    assert float(sampler.learning_rate) == pytest.approx(sampler.step_size_value)


@pytest.mark.slow  # a JAX process: the default suite keeps one (test_jax_collect)
def test_learning_rate_assign_is_refused_by_name_under_jax():
    """:func:`test_learning_rate_assign_is_refused_by_name` under ``KERAS_BACKEND=jax``
    (until 2026-12-01 "AttributeError: 'ArrayImpl' object has no attribute 'assign'");
    a jitted read traces the same jaxpr as the step-size computation."""
    from test_jax_user import _jax_process  # noqa: PLC0415 - imports TensorFlow and JAX

    result = _jax_process("import json, sys; sys.path.insert(0, sys.argv[1]); "
                          "import test_serve41; "
                          "print('RESULT ' + json.dumps(test_serve41.jax_assign_refusal()))")
    assert result["type"] == "ArrayImpl"
    assert result["value"] == pytest.approx(result["h"])
    assert result["name"] == "TypeError", result["message"]
    assert "SGLD: the step size (`learning_rate`)" in result["message"]
    assert result["traced"][0] == result["traced"][1]  # the step's ops, nothing added


def test_reading_learning_rate_in_a_traced_step_adds_nothing():
    """Inside a ``tf.function`` the property traces the very ops of the step-size
    computation (``_get_current_learning_rate``): no op is added to the step."""
    import tensorflow as tf  # noqa: PLC0415 - not in the JAX process

    sampler = _fitted_sampler()

    def ops_of(read):
        graph = tf.function(read).get_concrete_function().graph
        return [op.type for op in graph.get_operations()]

    assert ops_of(lambda: sampler.learning_rate) == \
        ops_of(sampler._get_current_learning_rate)
