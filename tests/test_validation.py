"""Bad input through public constructors and fit (issue item 9), and
property-based fuzzing of the constructors with hypothesis: every hostile
value is accepted as a usable number or refused with a ValueError that names
the argument, never another exception type or a silently wrong value."""

import math

import keras
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import keras_bnn as kb
from keras_bnn import priors
from keras_bnn.serving import ServingClient

FLOAT32_TINY = float(np.finfo(np.float32).tiny)
FLOAT32_MAX = float(np.finfo(np.float32).max)
SAMPLERS = ("sgld", "sghmc", "sgnht", "atmc")

#: NaN, inf, huge, tiny (0 in float32), subnormal, negative, wrong types.
hostile = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-46, 1e-320, 1e-40, 1e300, 3.5e38, -1.0, 1.9, 1e-3]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.floats(), max_size=2),
)
FUZZ = settings(max_examples=60, deadline=None, derandomize=True)  # reproducible


def _usable_positive(value):
    return (not isinstance(value, (bool, str, list, type(None)))
            and FLOAT32_TINY <= float(value) <= FLOAT32_MAX)


# ------------------------------------------------------ float32 awareness
@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("argument, value", [
    ("step_size", 1e-46),      # 0 in float32: the chain would freeze
    ("step_size", 1e300),      # inf in float32: ATMC's noise would be 0
    ("temperature", 1e-320),   # T = 0 in float32
    ("temperature", float("inf")),
])
def test_values_that_are_zero_or_inf_in_float32_are_refused(name, argument, value):
    kwargs = {"step_size": 1e-3, argument: value}
    with pytest.raises(ValueError, match=f"`{argument}`"):
        kb.samplers.get(name, **kwargs)


@pytest.mark.parametrize("seed", [1.9, True, -1, 2**31, "3", None])
def test_seed_must_be_an_int(seed):
    with pytest.raises(ValueError, match="`seed` must be an int"):
        kb.samplers.get("atmc", step_size=1e-3, seed=seed)
    assert kb.samplers.get("atmc", step_size=1e-3, seed=np.int64(7)).seed == 7


@pytest.mark.parametrize("make, argument", [
    (lambda v: priors.Normal(mean=v), "mean"),
    (lambda v: priors.Laplace(loc=v), "loc"),
    (lambda v: priors.StudentT(loc=v), "loc"),
])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1e300])
def test_prior_locations_must_be_finite(make, argument, value):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        make(value)


# ------------------------------------------------------------ fit data
def _classifier(classes=3, softmax=False):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(classes, kernel_regularizer=priors.Normal(0, 1),
                                 activation="softmax" if softmax else None)(inputs)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(sampler="sgld", train_size=10,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax))
    return model


@pytest.mark.parametrize("x, y, message", [
    (np.zeros((0, 4), "float32"), np.zeros(0, "int32"), "`x` holds no examples"),
    (np.zeros((6, 4), "float32"), np.array([0, 1, 2, 0.5, 1, 0]), "`y` must hold integer"),
    (np.zeros((6, 4), "float32"), np.array([0, 1, 2, 3, 1, 0]), r"`y` holds class indices in \[0, 3\]"),
    (np.zeros((6, 4), "float32"), np.array([0, -1, 2, 1, 1, 0]), "must lie in \\[0, 2\\]"),
    (np.zeros((6, 4), "float32"), np.eye(3)[[0, 1, 2, 0, 1, 2]], "one-hot"),
    (np.zeros((6, 4), "float32"), np.array(["a"] * 6), "dtype"),
])
def test_fit_names_the_bad_argument(x, y, message):
    model = _classifier()
    before = int(model.optimizer.iterations)
    with pytest.raises(ValueError, match=message):
        model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == before


def test_fit_refuses_an_empty_dataset():
    import tensorflow as tf

    empty = tf.data.Dataset.from_tensor_slices((np.zeros((0, 4), "float32"),
                                                np.zeros(0, "int32"))).batch(2)
    with pytest.raises(ValueError, match="`x` is an empty dataset"):
        _classifier().fit(empty, epochs=1, verbose=0)


def test_prior_predictive_detects_a_model_that_outputs_probabilities():
    x = np.random.default_rng(0).normal(size=(8, 4)).astype("float32")
    with pytest.raises(ValueError, match="outputs probabilities"):
        kb.prior_predictive(_classifier(softmax=True), x, num_samples=2)
    assert kb.prior_predictive(_classifier(), x, num_samples=2).shape == (2, 3)


# --------------------------------------------------------------- fuzzing
@FUZZ
@given(name=st.sampled_from(SAMPLERS), step_size=hostile, temperature=hostile)
def test_fuzz_sampler_constructors(name, step_size, temperature):
    try:
        sampler = kb.samplers.get(name, step_size=step_size, temperature=temperature)
    except ValueError as error:
        assert "step_size" in str(error) or "temperature" in str(error)
        assert not (_usable_positive(step_size) and _usable_positive(temperature))
        return
    assert _usable_positive(step_size) and _usable_positive(temperature)
    assert 0 < np.float32(sampler.temperature) < np.inf


@FUZZ
@given(seed=hostile)
def test_fuzz_sampler_seed(seed):
    try:
        sampler = kb.samplers.get("sghmc", step_size=1e-3, seed=seed)
    except ValueError as error:
        assert "`seed`" in str(error)
        return
    assert isinstance(sampler.seed, int) and sampler.seed == seed and not isinstance(seed, bool)


@FUZZ
@given(location=hostile, scale=hostile,
       family=st.sampled_from(["Normal", "Laplace", "StudentT", "HeNormal", "GroupLaplace"]))
def test_fuzz_prior_constructors(location, scale, family):
    kwargs = {"Normal": dict(mean=location, stddev=scale),
              "Laplace": dict(loc=location, scale=scale),
              "StudentT": dict(loc=location, scale=scale),
              "HeNormal": dict(scale=scale),
              "GroupLaplace": dict(scale=scale)}[family]
    try:
        prior = getattr(priors, family)(**kwargs)
    except ValueError as error:
        assert any(f"`{k}`" in str(error) for k in kwargs)
        return
    value = prior(keras.ops.ones((3, 2)))
    assert math.isfinite(float(value))


@FUZZ
@given(start=hostile, every=hostile, chain=hostile, cycle=hostile, ramp=hostile)
def test_fuzz_callback_constructors(tmp_path_factory, start, every, chain, cycle, ramp):
    store = kb.SampleStore(tmp_path_factory.mktemp("fuzz"))
    for make in (lambda: kb.callbacks.CollectSamples(store, start_epoch=start, every=every,
                                                     chain=chain),
                 lambda: kb.callbacks.CyclicalSchedule(cycle, burn_in_epochs=start),
                 lambda: kb.callbacks.TemperatureRamp(ramp, 1.0, ramp_epochs=every)):
        try:
            make()
        except ValueError as error:
            assert "`" in str(error)  # names the argument


@FUZZ
@given(model_name=hostile | st.text(max_size=8), url=hostile | st.sampled_from(
    ["http://h:1", "http://h:99999", "ftp://h", "http://", "http://h:1/x", "http://h:1?q"]),
    timeout=hostile, version=hostile)
def test_fuzz_serving_client_constructor(model_name, url, timeout, version):
    try:
        client = ServingClient(model_name, url=url, timeout=timeout, version=version)
    except ValueError:
        return
    assert _usable_positive(timeout) and client.predict_url.endswith(":predict")


@FUZZ
@given(path=st.one_of(st.none(), st.integers(), st.floats(), st.lists(st.text(), max_size=2),
                      st.just("")))
def test_fuzz_sample_store_path(path):
    with pytest.raises(ValueError, match="`path`"):
        kb.SampleStore(path)
