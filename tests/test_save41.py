"""Evaluation under new priors, and what a refused save leaves at its path (session 41).

Keras' ``keras.saving.save_model`` asks nothing of the model before it opens the
target file (``keras/src/saving/saving_lib.py``: it reads ``model.built``, then
``open(filepath, "wb")``, then ``_serialize_model_as_json``; ``legacy_h5_format.
save_model_to_hdf5``: ``h5py.File(filepath, mode="w")``, then ``model.get_config()``):
no hook of the model runs before the file is emptied. ``BayesianModel.save`` checks first.
"""

import keras
import pytest

import keras_bnn as kb
from test_bayes40b import N, _data, _dense

GOOD = b"a file that was there before" * 10


class _NoConfig(kb.priors.Prior):
    """A prior without ``get_config``: Keras cannot save it."""

    def log_prob(self, x):
        return -keras.ops.sum(keras.ops.square(x))


def test_evaluation_does_not_depend_on_the_priors_and_keeps_its_trace():
    """Checked 2026-12-01 (brief: "evaluate keeps logging the old prior"): it logs no
    ``prior``. ``compute_loss(training=False)`` leaves the layer losses out and
    ``evaluation_logs`` drops the sampling trackers; on TensorFlow the test step does not
    even call the priors (a counting prior: 0 calls in the first evaluate's trace), on JAX
    it computes them and drops them. After ``kb.bayesian`` set priors 100 times tighter
    (-log p(θ) 10.5 -> 20231, which the next ``fit`` logs), ``evaluate`` and ``val_nll``
    read the same 3.40663 as before: a new trace of the test step would change nothing,
    so it is kept."""
    x, y = _data()
    model = _dense()
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-12, seed=0), train_size=N, loss="mse")
    before = bnn.evaluate(x, y, batch_size=N, verbose=0, return_dict=True)
    traced = bnn.test_function
    tight = kb.priors.Normal(0.0, 0.01)
    kb.bayesian(model, kernel_prior=tight, bias_prior=tight)
    after = bnn.evaluate(x, y, batch_size=N, verbose=0, return_dict=True)
    assert set(after) == {"loss", "nll"}
    assert after == pytest.approx(before, rel=1e-6)
    assert bnn.test_function is traced
    history = bnn.fit(x, y, batch_size=N, epochs=1, verbose=0, validation_data=(x, y)).history
    now = float(sum(v.regularizer(v) for v in bnn.trainable_variables))
    assert history["prior"][0] == pytest.approx(now, rel=1e-4)
    assert not [key for key in history if key.startswith("val_") and "prior" in key]
    assert history["val_nll"][0] == pytest.approx(before["nll"], rel=1e-5)


def test_save_leaves_an_existing_file_when_a_prior_cannot_be_saved(tmp_path):
    """``bnn.save`` refuses an unsavable prior before Keras opens the file: a good file
    already at that path keeps its bytes."""
    path = tmp_path / "model.keras"
    path.write_bytes(GOOD)
    bnn = kb.bayesian(_dense(), kernel_prior=_NoConfig())
    with pytest.raises(ValueError, match=r"prior of weight 'out/kernel' \(_NoConfig\) cannot "
                                         r"be saved"):
        bnn.save(path)
    assert path.read_bytes() == GOOD


def test_get_config_names_the_weight_of_a_prior_without_get_config():
    """Found 2026-12-01: ``bnn.get_config()`` (so ``keras.saving.save_model``) raised
    Keras' bare "NotImplementedError: <_NoConfig object at 0x...> does not implement
    get_config()" from the Dense layer's config, before the priors were checked; now
    the priors go first: a ValueError naming the weight, as ``bnn.save`` gives."""
    bnn = kb.bayesian(_dense(), kernel_prior=_NoConfig())
    with pytest.raises(ValueError, match=r"prior of weight 'out/kernel' \(_NoConfig\) cannot "
                                         r"be saved"):
        bnn.get_config()


KERAS_REFUSALS = [(".keras", r"weight 'out/kernel' .* cannot be saved"),
                  (".h5", r"legacy HDF5 format")]


@pytest.mark.parametrize("suffix, refusal", KERAS_REFUSALS)
def test_keras_save_model_empties_its_target_before_it_asks_the_model(tmp_path, suffix, refusal):
    """What the README says of ``keras.saving.save_model``: it refuses (an unsavable prior
    in ``.keras``, the legacy format in ``.h5``), but only after Keras opened the target
    for writing, which is lost (measured: the ``.keras`` file 0 bytes, the ``.h5`` an
    800-byte HDF5 header). No method of the model runs before that open (module doc);
    should this fail, Keras asks first now: refuse there, and update the README."""
    path = tmp_path / f"model{suffix}"
    path.write_bytes(GOOD)
    bnn = kb.bayesian(_dense(), kernel_prior=_NoConfig())
    with pytest.raises(ValueError, match=refusal):
        keras.saving.save_model(bnn, path)
    assert path.read_bytes() != GOOD
