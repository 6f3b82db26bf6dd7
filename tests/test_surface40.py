"""What a Keras user assigns on a sampler after compile/fit (surface40).

Before: ``sampler.step_size = 1e-3`` set a plain attribute (h stayed 1e-3 after
``step_size = 1.0``, ``learning_rate`` read 0.001); on HMC it replaced the
``step_size()`` method and the next transition failed with "'float' object is
not callable"; ``warmup_steps``/``target_noise_ratio``/``friction``/``noise``/
``mass``/... assignments were ignored by the traced step or half-applied at the
next trace, while ``get_config`` recorded them; ``seed``/``train_size`` after the
first step were ignored inside a traced step (a second ``fit`` honoured a new
seed: weights moved by 3.2e-4); ``sampler.temperature = T`` raised
"property 'temperature' of 'SGLD' object has no setter".
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import samplers

_X = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
_Y = (_X[:, 0] > 0).astype("int32")


def _fitted(sampler, epochs=1):
    keras.utils.set_random_seed(0)
    model = kb.bayesian(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
    model.compile(sampler=sampler, train_size=64,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(_X, _Y, batch_size=64 if isinstance(sampler, samplers.HMC) else 32,
              epochs=epochs, verbose=0)
    return model


_FIXED = [
    (samplers.SGLD, "step_size"), (samplers.SGLD, "warmup_steps"),
    (samplers.SGLD, "target_noise_ratio"), (samplers.SGLD, "noise_estimate_decay"),
    (samplers.SGLD, "preconditioner"), (samplers.SGLD, "rho"), (samplers.SGLD, "epsilon"),
    (samplers.SGHMC, "friction"), (samplers.SGHMC, "mass"), (samplers.SGHMC, "integrator"),
    (samplers.SGHMC, "preconditioner"), (samplers.SGNHT, "noise"),
    (samplers.SGNHT, "noise_level"), (samplers.ATMC, "thermostat_mass"),
    (samplers.ATMC, "mass"), (samplers.ATMC, "momentum"), (samplers.ATMC, "speed_limit"),
    (samplers.HMC, "step_size"), (samplers.HMC, "num_leapfrog_steps"),
    (samplers.HMC, "num_adaptation_steps"), (samplers.HMC, "target_accept_rate"),
]


@pytest.mark.parametrize("cls, name", _FIXED)
def test_constructor_argument_assignment_raises_unbuilt(cls, name):
    """Before: each assignment passed silently (a plain attribute, or one read at the
    next trace without the constructor's checks)."""
    sampler = cls(step_size=1e-3)
    before = sampler.get_config()
    argument = "noise" if name == "noise_level" else name
    with pytest.raises(TypeError, match=f"`{name}`.*new sampler.*{argument}=|`{name}`.*"
                       "cannot be set"):
        setattr(sampler, name, 0.5)
    assert sampler.get_config() == before


@pytest.mark.parametrize("cls, name, owners", [
    (samplers.SGLD, "friction", "SGHMC\\)"), (samplers.SGLD, "noise", "ATMC, SGNHT\\)"),
    (samplers.SGHMC, "noise", "ATMC, SGNHT"),
    (samplers.SGHMC, "thermostat_mass", "ATMC, SGNHT"),
    (samplers.HMC, "warmup_steps", "ATMC, SGHMC, SGLD, SGNHT\\)"),
    (samplers.ATMC, "integrator", "SGHMC"), (samplers.SGNHT, "num_leapfrog_steps", "HMC")])
def test_another_sampler_s_argument_raises(cls, name, owners):
    """Before: ``SGLD(...).friction = 0.5`` set an attribute that nothing reads;
    ``SGLD(...).noise = 0.5`` replaced the ``noise()`` method the step calls."""
    sampler = cls(step_size=1e-3)
    with pytest.raises(TypeError, match=f"{cls.__name__} has no `{name}` \\(an argument of "
                       f"{owners}"):
        setattr(sampler, name, 0.5)
    assert name not in vars(sampler)


@pytest.mark.parametrize("cls", [samplers.SGLD, samplers.SGHMC, samplers.ATMC, samplers.HMC])
def test_step_size_after_fit_raises_and_keeps_h(cls):
    """Before: SGLD's ``step_size = 1.0`` passed and ``learning_rate`` stayed 0.001;
    HMC's replaced its ``step_size()`` method ("'float' object is not callable")."""
    sampler = cls(step_size=1e-3)
    model = _fitted(sampler)
    with pytest.raises(TypeError, match="`step_size`.*cannot be set"):
        sampler.step_size = 1.0
    assert float(sampler.learning_rate) == pytest.approx(1e-3)
    model.fit(_X, _Y, batch_size=64, epochs=1, verbose=0)  # HMC's step_size() intact


def test_friction_after_fit_raises_and_config_keeps_the_chain_s():
    """Before: ``friction = 2.0`` after fit passed; get_config said 2.0 while the
    traced step kept γ = 0.1/h = 100."""
    sampler = samplers.SGHMC(step_size=1e-3)
    _fitted(sampler)
    with pytest.raises(TypeError, match=r"`friction`.*SGHMC\(friction=\.\.\.\)"):
        sampler.friction = 2.0
    assert sampler.get_config()["friction"] == pytest.approx(100.0)


@pytest.mark.parametrize("name, value", [("seed", 3), ("train_size", 10)])
def test_seed_and_train_size_after_first_step_raise(name, value):
    """Before: both passed silently; the traced step kept the old value."""
    sampler = samplers.ATMC(step_size=1e-3)
    _fitted(sampler)
    with pytest.raises(TypeError, match=f"`{name}` cannot be assigned after the sampler's "
                       "first step"):
        setattr(sampler, name, value)
    assert sampler.get_config()[name] == {"seed": 0, "train_size": 64}[name]


def test_seed_and_train_size_before_first_step_are_checked_and_kept():
    sampler = samplers.SGLD(step_size=1e-3)
    sampler.seed, sampler.train_size = 7, 50
    assert (sampler.seed, sampler.train_size) == (7, 50)
    assert sampler.get_config()["seed"] == 7
    with pytest.raises(ValueError, match="train_size"):
        sampler.train_size = 0
    with pytest.raises(ValueError, match="seed"):
        sampler.seed = 1.5


def test_compile_train_size_still_sets_a_built_sampler():
    sampler = samplers.SGLD(step_size=1e-3)
    _fitted(sampler)
    sampler.configure(train_size=128)
    assert sampler.train_size == 128


@pytest.mark.parametrize("built", [False, True])
def test_temperature_assignment_sets_it(built):
    """Before: "property 'temperature' of 'SGNHT' object has no setter"."""
    sampler = samplers.SGNHT(step_size=1e-3)
    if built:
        _fitted(sampler)
    sampler.temperature = 0.25
    assert sampler.temperature == 0.25
    assert sampler.get_config()["temperature"] == 0.25
    with pytest.raises(ValueError, match="temperature"):
        sampler.temperature = -1.0


@pytest.mark.filterwarnings("ignore::keras_bnn.samplers.warmup.ShortWarmupWarning")
def test_config_after_warmup_holds_the_chosen_step():
    """Issue 20: the warm-up's h is stored in the sampler's config (held before too)."""
    sampler = samplers.SGLD(warmup_steps=20)
    _fitted(sampler, epochs=12)
    config = sampler.get_config()
    assert config["step_size"] == "auto" and config["warmup_steps"] == 20
    assert config["step_size_value"] == sampler.step_size_value > 0
    assert len(config["step_size_factors"]) == 2  # kernel and bias
    assert samplers.SGLD.from_config(config).get_config()["warmup_steps"] == 20
