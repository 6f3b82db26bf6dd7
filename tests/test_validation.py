"""Bad input through the shared checks, public constructors and fit, and
property-based fuzzing with hypothesis: every hostile value is accepted as a
usable number or refused with a ValueError that names the argument in the
one wording "<owner>: `name` must be <requirement>; got <value>.", never
another exception type or a silently wrong value."""

import math
import re
import tempfile
import warnings

import keras
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import keras_bnn as kb
from keras_bnn import priors, validation
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


def _real(value):
    """float(value) for a real number (not a bool, string, list or None), else None."""
    if isinstance(value, (bool, str, list, type(None))):
        return None
    return float(value)


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_count(value):
    """An integer >= 1, or a float with an integral value >= 1 (not a bool)."""
    if _is_int(value):
        return value >= 1
    return (isinstance(value, (float, np.floating)) and math.isfinite(value)
            and float(value).is_integer() and value >= 1)


def _assert_wording(error, name, owner):
    """The one message form: "<owner>: `name` must ...; got ...."."""
    prefix = re.escape(f"{owner}: ") if owner else ""
    assert re.fullmatch(f"{prefix}`{re.escape(name)}` must .+; got .+\\.", str(error),
                        flags=re.DOTALL), str(error)


# ------------------------------------------- the shared checks, one by one
#: helper name -> (call(value, name, owner), oracle: is `value` acceptable?).
CHECKS = {
    "check_positive": (validation.check_positive,
                       lambda v: _real(v) is not None and FLOAT32_TINY <= _real(v) <= FLOAT32_MAX),
    "check_finite": (validation.check_finite,
                     lambda v: _real(v) is not None and abs(_real(v)) <= FLOAT32_MAX),
    "check_fraction": (validation.check_fraction,
                       lambda v: _real(v) is not None and 0 < _real(v) < 1),
    "check_int": (lambda v, name, owner: validation.check_int(v, name, 1, 10, owner=owner),
                  lambda v: _is_int(v) and 1 <= v <= 10),
    "check_positive_int": (validation.check_positive_int, lambda v: _is_count(v)),
    "check_seed": (lambda v, name, owner: validation.check_seed(v, name, owner=owner),
                   lambda v: _is_int(v) and 0 <= v <= 2**31 - 1),
    "check_bool": (validation.check_bool, lambda v: isinstance(v, (bool, np.bool_))),
    "check_choice": (lambda v, name, owner: validation.check_choice(v, name, (None, "", "euler"),
                                                                    owner=owner),
                     lambda v: v is None or v in ("", "euler") and isinstance(v, str)),
}
argument_names = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
owners = st.none() | st.sampled_from(["SGLD", "RunConfig", "mlp"])


@settings(max_examples=400, deadline=None, derandomize=True)  # ~0.1 ms per example
@given(helper=st.sampled_from(sorted(CHECKS)),
       value=hostile | st.integers(-3, 12).map(np.int64) | st.sampled_from(["euler", 0.5]),
       name=argument_names, owner=owners)
def test_fuzz_every_check_accepts_exactly_the_valid_values(helper, value, name, owner):
    check, valid = CHECKS[helper]
    try:
        result = check(value, name, owner)
    except ValueError as error:
        _assert_wording(error, name, owner)
        assert not valid(value), f"{helper} refused the valid {value!r}"
        return
    assert valid(value), f"{helper} accepted {value!r}"
    # The float checks return float(value), the others the value itself.
    float_checks = ("check_positive", "check_finite", "check_fraction")
    assert result == (float(value) if helper in float_checks else value)
    if helper in float_checks or helper in ("check_int", "check_positive_int", "check_seed"):
        assert type(result) is (float if helper in float_checks else int)  # not numpy


@pytest.mark.parametrize("call, message", [
    (lambda: validation.check_positive(0.0, "step_size", "SGHMC"),
     "SGHMC: `step_size` must be a positive finite number; got 0.0."),
    (lambda: validation.check_positive(1e-46, "step_size"),
     "`step_size` must lie in float32's normal range"),
    (lambda: validation.check_fraction(1.0, "rho", "SGHMC"),
     "SGHMC: `rho` must be a number in (0, 1); got 1.0."),
    (lambda: validation.check_choice("x", "integrator", ("euler", "baoab")),
     "`integrator` must be one of 'euler', 'baoab'; got 'x'."),
    (lambda: validation.check_int(0, "epochs", 1), "`epochs` must be an int >= 1; got 0."),
    (lambda: validation.check_int(11, "version", 1, maximum=10),
     "`version` must be an int in [1, 10]; got 11."),
    (lambda: validation.check_int(11, "k", maximum=10), "`k` must be an int <= 10; got 11."),
    (lambda: validation.check_int(1.0, "k"), "`k` must be an int; got 1.0."),
    (lambda: validation.check_positive_int(1.5, "train_size", "BayesianModel.compile"),
     "BayesianModel.compile: `train_size` must be an integer >= 1; got 1.5."),
    (lambda: validation.check_positive_int(0, "train_size"),
     "`train_size` must be an integer >= 1; got 0."),
    (lambda: validation.check_seed(-1, owner="ATMC"),
     "ATMC: `seed` must be an int in [0, 2147483647]; got -1."),
    (lambda: validation.check_seed(1.5, owner="RunConfig"), "RunConfig: `seed` must be an int"),
    (lambda: validation.check_bool("no", "allow_flat", "bayesian"),
     "bayesian: `allow_flat` must be True or False; got 'no'."),
    # Found by a user of the README's first sections (they named only 'auto', or StudentT):
    (lambda: kb.samplers.ATMC(step_size="fast"),
     "ATMC: `step_size` must be 'auto' (a warm-up chooses it) or a number > 0; got 'fast'."),
    (lambda: kb.callbacks.CollectSamples(kb.SampleStore(tempfile.mkdtemp()),
                                         start_epoch="first"),
     "CollectSamples: `start_epoch` must be 'auto' (at equilibrium) or an int >= 0"),
    (lambda: kb.callbacks.CollectSamples("runs/x/samples"),
     "CollectSamples: `store` must be a keras_bnn.SampleStore (kb.SampleStore(path)); got str."),
    (lambda: priors.Cauchy(-1.0), "Cauchy: `scale` must be a positive finite number"),
    (lambda: kb.data.dataset_labels(np.zeros(3)),
     "dataset_labels: `ds` must be a finite tf.data.Dataset of (inputs, labels) or "
     "(inputs, labels, sample_weight) batches; got ndarray."),
])
def test_messages_name_the_argument_owner_and_allowed_values(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value).startswith(message)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(value=hostile | st.floats(min_value=-5.0, max_value=1e6) | st.integers(-5, 5).map(np.int64)
       | st.integers(-5, 5).map(np.float64))
def test_fuzz_check_positive_int_refuses_every_non_count(value):
    """A count (an integer >= 1, also as the float 2.0 a JSON config gives)
    comes back as that int; everything else (1.5, 0, -3, True, "3", None,
    NaN, inf) is refused, naming the argument and saying "an integer >= 1"."""
    if _is_count(value):
        result = validation.check_positive_int(value, "train_size")
        assert type(result) is int and result == value
        return
    with pytest.raises(ValueError, match=r"^`train_size` must be an integer >= 1; got "):
        validation.check_positive_int(value, "train_size")


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
    if not softmax:  # compile refuses a probability head (test_likelihoods)
        model.compile(sampler="sgld", train_size=10,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("x, y, message", [
    (np.zeros((0, 4), "float32"), np.zeros(0, "int32"),
     r"fit: `x` must be at least one example; got shape \(0, 4\)\."),
    (np.zeros((6, 4), "float32"), np.array([0, 1, 2, 0.5, 1, 0]),
     r"`y` must be integer class indices; got values such as \[0.5\]"),
    (np.zeros((6, 4), "float32"), np.array([0, 1, 2, 3, 1, 0]),
     r"`y` must be class indices in \[0, 2\] .*; got class indices in \[0, 3\]"),
    (np.zeros((6, 4), "float32"), np.array([0, -1, 2, 1, 1, 0]),
     r"`y` must be class indices in \[0, 2\] .*; got class indices in \[-1, 2\]"),
    (np.zeros((6, 4), "float32"), np.eye(3)[[0, 1, 2, 0, 1, 2]], "one-hot.*; got shape"),
    (np.zeros((6, 4), "float32"), np.array(["a"] * 6), "; got dtype <U1"),
])
def test_fit_names_the_bad_argument(x, y, message):
    model = _classifier()
    before = int(model.optimizer.iterations)
    with pytest.raises(ValueError, match=message):
        model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == before


def test_fit_checks_validation_data_and_the_input_shape_and_compile():
    """Found by a user of the Python API: validation labels 0.5 were truncated
    (val_nll is the early-stopping key) and 5 gave a raw TensorFlow error; a
    wrong feature width a "Matrix size-incompatible" error; fit before compile
    said "`loss` must be given to compile"."""
    model = _classifier()
    x, y = np.zeros((6, 4), "float32"), np.array([0, 1, 2, 0, 1, 2])
    for bad in (y + 0.5, y + 5):
        with pytest.raises(ValueError, match=r"fit\(validation_data\): `y` must be"):
            model.fit(x, y, validation_data=(x, bad), epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"fit: `x` must hold examples of shape \(4,\) \(the "
                                         r"model's input\); got examples of shape \(3,\)"):
        model.fit(x[:, :3], y, epochs=1, verbose=0)
    plain = kb.models.mlp((4,), 3, hidden=(8,))
    with pytest.raises(ValueError, match="fit: the model is not compiled: call model.compile"):
        plain.fit(x, y, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 0


def test_fit_refuses_an_empty_dataset():
    import tensorflow as tf

    empty = tf.data.Dataset.from_tensor_slices((np.zeros((0, 4), "float32"),
                                                np.zeros(0, "int32"))).batch(2)
    with pytest.raises(ValueError, match="`x` must be a dataset of at least one batch; got an"):
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


def test_a_file_or_a_path_below_one_is_refused_as_a_directory(tmp_path):
    """SampleStore("a_file/sub") raised NotADirectoryError and export("a_file")
    FileExistsError, though both document ValueError."""
    (tmp_path / "a_file").write_text("x")
    for path in (tmp_path / "a_file", tmp_path / "a_file" / "sub" / "deeper"):
        with pytest.raises(ValueError, match="SampleStore: `path` must be a directory, or a path "
                                             "where one can be made; got .* is a file"):
            kb.SampleStore(path)
        with pytest.raises(ValueError, match="`model_dir` must be a directory"):
            kb.export.check_model_dir(path)
    assert validation.check_directory_path(tmp_path / "new" / "dir", "path") == \
        tmp_path / "new" / "dir"


def test_fit_warns_when_train_size_is_not_the_number_of_examples():
    """compile(train_size=20) with 2000 rows trained silently: the data then
    weigh 100 times too little against the prior."""
    model = _classifier()  # train_size=10
    x, y = np.zeros((12, 4), "float32"), np.zeros(12, "int32")
    with pytest.warns(UserWarning, match=r"fit trains on 12 examples but compile\(train_size=10\)"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*fit trains on")
        model.fit(x[:10], y[:10], batch_size=5, epochs=1, verbose=0)
        model.fit(x, y, batch_size=5, epochs=1, verbose=0, validation_split=1 / 6)  # 10 left
