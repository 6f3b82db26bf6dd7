"""Golden one-step tests of the update rules and of the samplers that hold them.

In the style of Keras' ``sgd_test.py``: fixed small inputs (the noise too),
and the expected output written out in numpy, in float64, from the
equations, never by calling the code under test. First every integrator of
:mod:`keras_bnn.samplers.integrators`, then one ``apply`` step of every
sampler class on two variables with known gradients, its noise reproduced
from ``backend.stateless_normal`` keyed on (seed, variable index, step 0).
Only ``keras.ops`` is used, so the file also runs under JAX (last test).
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

from keras_bnn import backend, samplers
from keras_bnn.samplers import integrators

RTOL = 2e-6  # float32 round-off of a few operations


def _t(values):
    return ops.convert_to_tensor(np.asarray(values, np.float32))


def _close(actual, expected, rtol=RTOL, atol=1e-7):
    np.testing.assert_allclose(ops.convert_to_numpy(actual).astype(np.float64), expected,
                               rtol=rtol, atol=atol)


# Fixed inputs shared by the integrator tests.
THETA = np.array([0.5, -1.0, 2.0, 0.0])
G = np.array([1.0, -2.0, 0.5, 3.0])  # the minibatch ∇U
ETA = np.array([0.3, -0.7, 1.2, -1.5])  # the noise
MOMENTUM = np.array([0.1, -0.2, 0.3, 0.05])
H, T = 0.01, 0.5


# ---------------------------------------------------- numpy references
def np_sgld(theta, g, eta, h, t, p=1.0):
    """θ - h·P·G + sqrt(2hTP)·η."""
    return theta - h * p * g + np.sqrt(2 * h * t * p) * eta


def np_rmsprop(v, g, rho, eps, layerwise):
    """v ← ρv + (1-ρ)·G² (or mean G²); M = sqrt(v) + ε."""
    square = np.mean(g**2) if layerwise else g**2
    v = rho * v + (1 - rho) * square
    return v, np.sqrt(v) + eps


def np_symplectic_euler(theta, m, g, eta, h, t, gamma, mass):
    """m' = (1-hγ)m - hG + sqrt(2γhTM)η; θ' = θ + h·m'/M; kinetic from (m+m')/2."""
    injected = 2 * gamma * h * t * mass
    m1 = (1 - h * gamma) * m - h * g + np.sqrt(injected) * eta
    return theta + h * m1 / mass, m1, (m + m1) / 2, injected


def np_baoab(theta, m, g, eta, h, t, gamma, mass):
    """B: m - hG; A: θ + (h/2)m/M; O: c·m + sqrt(TM(1-c²))η; A: θ + (h/2)m/M."""
    kicked = m - h * g
    half = theta + 0.5 * h * kicked / mass
    c = np.exp(-gamma * h)
    injected = t * mass * (1 - c**2)
    m1 = c * kicked + np.sqrt(injected) * eta
    return half + 0.5 * h * m1 / mass, m1, m1, injected


def np_thermostat(theta, p, xi, g, eta, h, t, d, mass, q, c, b, adaptive):
    """ATMC α = max(D-ξ-b̂, 0) / SGNHT α = max(D-b̂, 0), β = α + ξ + b̂; OU step of p."""
    alpha = np.maximum(d - xi - b, 0) if adaptive else np.maximum(d - b, 0) * np.ones_like(xi)
    beta = alpha + xi + b
    decay = np.exp(-beta * h)
    drift = (1 - np.exp(-beta * h)) / beta
    variance = (1 - np.exp(-2 * beta * h)) / beta
    p1 = decay * p - drift * g + np.sqrt(t * alpha * mass * variance) * eta
    v = p1 / mass if c is None else p1 / (mass * np.sqrt(p1**2 / (mass**2 * c**2) + 1))
    xi1 = xi + h / q * (p1 * v / t - 1)
    return theta + h * v, p1, xi1, p1 * v


# -------------------------------------------------------- integrators
def test_sgld_integrator():
    new = integrators.sgld(_t(THETA), _t(G), _t(ETA), H, T)
    _close(new.position, np_sgld(THETA, G, ETA, H, T))


@pytest.mark.parametrize("layerwise", [False, True])
def test_preconditioned_sgld_integrator(layerwise):
    v0 = 0.7 if layerwise else np.array([0.2, 1.0, 4.0, 0.5])
    v, mass = integrators.rmsprop_mass(_t(v0), _t(G), 0.9, 1e-3, layerwise=layerwise)
    v_want, mass_want = np_rmsprop(v0, G, 0.9, 1e-3, layerwise)
    _close(v, v_want)
    _close(mass, mass_want)
    new = integrators.sgld(_t(THETA), _t(G), _t(ETA), H, T, 1.0 / mass)
    _close(new.position, np_sgld(THETA, G, ETA, H, T, 1.0 / mass_want))


@pytest.mark.parametrize("mass", [0.5, np.array([0.5, 1.0, 2.0, 4.0])], ids=["scalar", "diagonal"])
@pytest.mark.parametrize("scheme", ["symplectic_euler", "baoab"])
def test_sghmc_integrators(scheme, mass):
    function = {"symplectic_euler": integrators.sghmc_symplectic_euler,
                "baoab": integrators.sghmc_baoab}[scheme]
    reference = {"symplectic_euler": np_symplectic_euler, "baoab": np_baoab}[scheme]
    gamma = 3.0
    new = function(_t(THETA), _t(MOMENTUM), _t(G), _t(ETA), H, T, gamma, _t(mass))
    for got, want in zip(new, reference(THETA, MOMENTUM, G, ETA, H, T, gamma, mass)):
        _close(got, want * np.ones(1))


def test_rescale_momentum_keeps_the_kinetic_energy():
    mass, new_mass = np.array([0.5, 1.0, 2.0, 4.0]), np.array([1.0, 0.25, 2.0, 9.0])
    rescaled = integrators.rescale_momentum(_t(MOMENTUM), _t(mass), _t(new_mass))
    _close(rescaled, MOMENTUM * np.sqrt(new_mass / mass))
    _close(ops.square(rescaled) / _t(new_mass), MOMENTUM**2 / mass)


# D, ξ and b̂ cover α > 0, α = 0 (ξ + b̂ ≥ D, or b̂ ≥ D), and for SGNHT β < 0.
XI = np.array([0.2, -1.6, 1.5, 0.4])
NOISE_FRICTION = np.array([0.0, 0.1, 0.3, 2.0])
D, MASS, Q = 1.0, 0.5, 2.0


@pytest.mark.parametrize("speed_limit", [None, 0.8], ids=["gaussian", "relativistic"])
@pytest.mark.parametrize("name", ["sgnht", "atmc"])
def test_thermostat_integrators(name, speed_limit):
    function = getattr(integrators, name)
    new = function(_t(THETA), _t(MOMENTUM), _t(XI), _t(G), _t(ETA), H, T, noise_level=D,
                   mass=MASS, thermostat_mass=Q, speed_limit=speed_limit,
                   noise_friction=_t(NOISE_FRICTION))
    want = np_thermostat(THETA, MOMENTUM, XI, G, ETA, H, T, D, MASS, Q, speed_limit,
                         NOISE_FRICTION, adaptive=name == "atmc")
    for got, value in zip(new, want):
        _close(got, value, rtol=1e-5)


def test_gradient_noise_update():
    previous, v0 = np.array([0.5, -1.0, 0.0, 3.5]), np.array([1.0, 0.0, 2.0, 0.1])
    got = integrators.gradient_noise_update(_t(G), _t(previous), _t(v0), 0.9)
    _close(got, 0.9 * v0 + 0.1 * 0.5 * (G - previous) ** 2)


# ------------------------------------------------------ sampler classes
N = 4  # train_size: the samplers step with G = n·gradient
A0, B0 = np.array([0.5, -1.0, 2.0]), np.array([[0.1, 0.2], [-0.3, 0.4]])
GRADS = [np.array([0.25, -0.5, 0.125]), np.array([[0.75, -0.25], [0.5, 1.0]])]
V0 = [np.array([2.0, 0.5, 1.0]), np.array([[0.1, 3.0], [0.0, 1.5]])]  # V̂ before the step
SEED = 7


def _one_step(sampler, **state):
    """Builds the sampler on two variables, sets their V̂ and ``state``, applies one step.

    Returns ``(variables, inputs)``: ``inputs[i]`` holds θ, G, η, V̂ and the
    state before the step of variable ``i``, in float64.
    """
    variables = [keras.Variable(A0.astype(np.float32)), keras.Variable(B0.astype(np.float32))]
    sampler.build(variables)
    inputs = []
    for i, variable in enumerate(variables):
        slots = sampler.state(variable)
        slots["gradient_noise"].assign(V0[i].astype(np.float32))
        for name, values in state.items():
            slots[name].assign(np.asarray(values[i], np.float32))
        noise = backend.stateless_normal(variable.shape, SEED, i, 0, "float32")
        inputs.append(dict(theta=(A0, B0)[i], g=N * GRADS[i], v=V0[i],
                           eta=ops.convert_to_numpy(noise).astype(np.float64),
                           **{k: np.asarray(v[i], np.float64) for k, v in state.items()}))
    sampler.apply([_t(g) for g in GRADS], variables)
    return variables, inputs


def _check_common(sampler, variable, x):
    """The bookkeeping every sampler does: Σθ·G, the last G and V̂ (kept at step 0)."""
    state = sampler.state(variable)
    _close(state["virial"], np.sum(x["theta"] * x["g"]))
    _close(state["previous_gradient"], x["g"])
    _close(state["gradient_noise"], x["v"])


@pytest.mark.parametrize("preconditioner", [None, "rmsprop", "rmsprop_layerwise"])
def test_sgld_class_one_step(preconditioner):
    eps = 1e-3
    sampler = samplers.SGLD(0.01, preconditioner=preconditioner, rho=0.9, epsilon=eps,
                            temperature=T, train_size=N, seed=SEED)
    variables, inputs = _one_step(sampler)
    for variable, x in zip(variables, inputs):
        p = 1.0
        if preconditioner:  # ρ is 0 at the first step: v = G²
            v, mass = np_rmsprop(0.0, x["g"], 0.0, eps, preconditioner == "rmsprop_layerwise")
            _close(sampler.state(variable)["second_moment"], v)
            p = 1.0 / mass
        _close(variable, np_sgld(x["theta"], x["g"], x["eta"], 0.01, T, p))
        _close(sampler.state(variable)["noise_ratio"], 0.01 * np.mean(p * x["v"]) / (2 * T))
        _check_common(sampler, variable, x)


@pytest.mark.parametrize("preconditioner", [None, "rmsprop", "rmsprop_layerwise"])
@pytest.mark.parametrize("scheme", ["symplectic_euler", "baoab"])
def test_sghmc_class_one_step(scheme, preconditioner):
    h, gamma, mass0, eps = 0.01, 3.0, 2.0, 1e-3
    sampler = samplers.SGHMC(h, friction=gamma, mass=mass0, preconditioner=preconditioner,
                             rho=0.9, epsilon=eps, integrator=scheme, temperature=T,
                             train_size=N, seed=SEED)
    m0 = [np.array([0.1, -0.2, 0.3]), np.array([[0.05, 0.0], [-0.4, 0.2]])]
    variables, inputs = _one_step(sampler, momentum=m0)
    reference = {"symplectic_euler": np_symplectic_euler, "baoab": np_baoab}[scheme]
    for variable, x in zip(variables, inputs):
        state = sampler.state(variable)
        mass, m = mass0, x["momentum"]
        if preconditioner:  # ρ is 0 at the first step; m keeps m²/M
            _, mass = np_rmsprop(0.0, x["g"], 0.0, eps, preconditioner == "rmsprop_layerwise")
            m = m * np.sqrt(mass / mass0)
        theta, m1, kinetic_m, injected = reference(x["theta"], m, x["g"], x["eta"], h, T, gamma,
                                                   mass)
        _close(variable, theta)
        _close(state["momentum"], m1)
        _close(state["mass"], mass)
        _close(state["kinetic"], np.sum(kinetic_m**2 / mass), rtol=1e-5)
        _close(state["noise_ratio"], h**2 * np.mean(x["v"] / injected), rtol=1e-5)
        _check_common(sampler, variable, x)


@pytest.mark.parametrize("speed_limit", [None, 0.8], ids=["gaussian", "relativistic"])
@pytest.mark.parametrize("cls", [samplers.SGNHT, samplers.ATMC], ids=lambda c: c.__name__)
def test_thermostat_class_one_step(cls, speed_limit):
    h = 0.01
    sampler = cls(h, noise=D, mass=MASS, thermostat_mass=Q,
                  momentum="gaussian" if speed_limit is None else "relativistic",
                  speed_limit=speed_limit, temperature=T, train_size=N, seed=SEED)
    p0 = [np.array([0.1, -0.2, 0.3]), np.array([[0.05, 0.0], [-0.4, 0.2]])]
    xi0 = [np.array([0.2, -1.6, 1.5]), np.array([[0.4, 0.0], [-0.3, 2.0]])]
    variables, inputs = _one_step(sampler, momentum=p0, thermostat=xi0)
    for variable, x in zip(variables, inputs):
        state = sampler.state(variable)
        b = h * x["v"] / (2 * T * MASS)  # the noise friction b̂ of V̂
        theta, p1, xi1, kinetic = np_thermostat(
            x["theta"], x["momentum"], x["thermostat"], x["g"], x["eta"], h, T, D, MASS, Q,
            speed_limit, b, adaptive=cls is samplers.ATMC)
        _close(variable, theta, rtol=1e-5)
        _close(state["momentum"], p1, rtol=1e-5)
        _close(state["thermostat"], xi1, rtol=1e-5)
        _close(state["kinetic"], np.sum(kinetic), rtol=1e-5)
        _close(state["noise_ratio"], np.mean(b) / D, rtol=1e-5)
        _check_common(sampler, variable, x)


def test_state_accessor_names_its_slots():
    sampler = samplers.ATMC(0.01, train_size=N)
    with pytest.raises(ValueError, match="first step"):
        sampler.slots("momentum")
    variable = keras.Variable(A0.astype(np.float32))
    sampler.build([variable])
    assert set(sampler.state(variable)) == {
        "virial", "virial_total", "virial_carry", "noise_ratio", "previous_gradient",
        "gradient_noise", "kinetic", "momentum", "thermostat"}
    assert sampler.slots("thermostat") == [sampler.state(variable)["thermostat"]]
    with pytest.raises(ValueError, match="'momentum'"):
        sampler.slots("mass")


@pytest.mark.slow  # a JAX process: 21 s
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="runs JAX from TensorFlow")
def test_golden_steps_under_jax():
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", "not under_jax"],
        capture_output=True, text=True, timeout=600, env=env, cwd=os.path.dirname(__file__))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
