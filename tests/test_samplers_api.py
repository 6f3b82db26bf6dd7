"""Sampler API: step bounds, non-finite gradients, argument checks,
serialisation, noise purity and the temperature diagnostics."""

import json
import math

import keras
import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from keras_bnn import samplers, schedules
from keras_bnn.samplers import integrators
from sampler_harness import total_ess

ALL = [samplers.SGLD, samplers.SGHMC, samplers.SGNHT, samplers.ATMC]


def _build(sampler, *arrays):
    variables = [keras.Variable(np.asarray(a, np.float32)) for a in arrays]
    sampler.build(variables)
    return variables


# --------------------------------------------------------------------------
# Relativistic momentum: no step longer than h·c
# --------------------------------------------------------------------------


def test_relativistic_step_never_exceeds_h_times_c():
    h, c = 0.01, 0.5
    sampler = samplers.ATMC(
        step_size=h, momentum="relativistic", speed_limit=c, mass=2.0,
        train_size=50_000, seed=1,
    )
    (theta,) = _build(sampler, np.zeros(256))
    rng = np.random.default_rng(0)
    largest = []
    for step in range(30):
        # |gradient| = 1e12 (1e12·n = 5e16 on U) with random signs per step,
        # also after the thermostat has reacted to the first kicks.
        grad = (1e12 * rng.choice([-1.0, 1.0], size=256)).astype(np.float32)
        before = theta.numpy().astype(np.float64)
        sampler.apply([tf.constant(grad)], [theta])
        moved = np.abs(theta.numpy().astype(np.float64) - before)
        assert np.all(np.isfinite(theta.numpy()))
        # Bound h·c, plus float32 round-off of θ + h·v (|θ| < 0.2 → ulp ≤ 1.5e-8).
        assert moved.max() <= h * c * (1 + 1e-5), (step, moved.max())
        largest.append(moved.max())
    # The speed saturates at c on the first kick (velocity p/(m·sqrt(p²/(m²c²)+1))
    # with |p| ≈ h·5e16): the bound is reached, not merely respected.
    assert largest[0] > 0.999 * h * c


def test_gaussian_momentum_has_no_speed_limit():
    """Contrast for the test above: with Gaussian momentum the same kick moves θ by ≫ h·c."""
    h = 0.01
    sampler = samplers.ATMC(step_size=h, mass=2.0, train_size=50_000, seed=1)
    (theta,) = _build(sampler, np.zeros(8))
    sampler.apply([tf.fill([8], 1e12)], [theta])
    assert np.all(np.abs(theta.numpy()) > 1e6 * h)


# --------------------------------------------------------------------------
# Non-finite gradients
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("cls", ALL)
def test_non_finite_gradient_raises_and_changes_nothing(cls, traced, bad):
    sampler = cls(step_size=1e-3, train_size=100, seed=0)
    first, second = _build(sampler, np.ones(3), np.ones((2, 2)))
    good = tf.constant([1.0, -2.0, 3.0])
    sampler.apply([good, tf.ones((2, 2))], [first, second])  # one normal step first
    before = [v.numpy().copy() for v in [first, second] + list(sampler.variables)]
    # The bad value sits in the *second* variable: the first must not move either.
    poisoned = tf.constant([[0.5, bad], [0.0, 1.0]], tf.float32)

    def step():
        sampler.apply([good, poisoned], [first, second])

    if traced:
        step = tf.function(step)
    with pytest.raises(tf.errors.InvalidArgumentError, match="non-finite potential or gradient"):
        step()
    after = [v.numpy() for v in [first, second] + list(sampler.variables)]
    for a, b in zip(before, after):  # weights, momenta, thermostats, iterations
        np.testing.assert_array_equal(a, b)
    assert int(sampler.iterations.numpy()) == 1


@pytest.mark.parametrize("traced", [False, True])
def test_huge_finite_gradients_whose_sum_overflows_are_accepted(traced):
    # The guard's fast path sums each gradient; 2 × 3e38 overflows float32,
    # which must fall back to the exact check, not raise.
    sampler = samplers.SGLD(step_size=1e-3, train_size=1, seed=0)
    (theta,) = _build(sampler, np.zeros(4))
    grad = tf.constant([3e38, 3e38, -1.0, 0.0], tf.float32)
    step = (lambda: sampler.apply([grad], [theta]))
    (tf.function(step) if traced else step)()
    assert int(sampler.iterations.numpy()) == 1
    assert np.all(np.isfinite(theta.numpy())) and theta.numpy()[0] < -1e35


def test_non_finite_gradient_error_names_the_variable():
    sampler = samplers.ATMC(step_size=1e-3, train_size=100)
    weights = keras.Variable(np.ones(3, np.float32), name="my_kernel")
    sampler.build([weights])
    with pytest.raises(tf.errors.InvalidArgumentError, match="my_kernel"):
        sampler.apply([tf.constant([0.0, np.nan, 0.0])], [weights])


# --------------------------------------------------------------------------
# Bad arguments
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
        ({"step_size": 0.0}, "step_size"),
        ({"step_size": -1e-3}, "step_size"),
        ({"step_size": "big"}, "step_size"),
        ({"train_size": 0}, "train_size"),
        ({"train_size": -50}, "train_size"),
    ],
)
def test_bad_constructor_arguments_are_named(cls, kwargs, argument):
    arguments = {"step_size": 1e-3, "train_size": 100, **kwargs}
    with pytest.raises(ValueError, match=f"`{argument}`"):
        cls(**arguments)


@pytest.mark.parametrize("cls", ALL)
def test_missing_train_size_fails_at_build_and_first_step(cls):
    sampler = cls(step_size=1e-3)
    variable = keras.Variable(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="train_size"):
        sampler.build([variable])
    with pytest.raises(ValueError, match="train_size"):
        sampler.apply([tf.zeros(2)], [variable])
    np.testing.assert_array_equal(variable.numpy(), 0.0)


@pytest.mark.parametrize("cls", ALL)
def test_configure_and_set_temperature_reject_non_positive_values(cls):
    sampler = cls(step_size=1e-3)
    with pytest.raises(ValueError, match="train_size"):
        sampler.configure(train_size=0)
    with pytest.raises(ValueError, match="train_size"):
        sampler.configure(train_size=-3)
    with pytest.raises(ValueError, match="temperature"):
        sampler.configure(train_size=10, temperature=0.0)
    sampler.configure(train_size=10, temperature=0.5)
    _build(sampler, np.zeros(2))
    with pytest.raises(ValueError, match="temperature"):
        sampler.set_temperature(-1.0)
    assert sampler.temperature == 0.5  # unchanged by the failed call
    sampler.set_temperature(0.25)
    assert sampler.temperature == 0.25


@pytest.mark.parametrize("identifier", ["foo", "adam", "", 42, None])
def test_unknown_sampler_name(identifier):
    with pytest.raises(ValueError, match="sampler"):
        samplers.get(identifier)


def test_get_resolves_names_and_instances():
    for name, cls in [("sgld", samplers.SGLD), ("SGHMC", samplers.SGHMC),
                      ("sgnht", samplers.SGNHT), ("Atmc", samplers.ATMC)]:
        assert type(samplers.get(name, step_size=1e-3)) is cls
    instance = samplers.ATMC(step_size=1e-3)
    assert samplers.get(instance) is instance


@pytest.mark.parametrize(
    "cls, kwargs, argument",
    [
        (samplers.ATMC, {"momentum": "newtonian"}, "momentum"),
        (samplers.SGNHT, {"momentum": "hyperbolic"}, "momentum"),
        (samplers.ATMC, {"momentum": "relativistic"}, "speed_limit"),
        (samplers.SGNHT, {"momentum": "relativistic"}, "speed_limit"),
        (samplers.ATMC, {"momentum": "relativistic", "speed_limit": 0.0}, "speed_limit"),
        (samplers.ATMC, {"momentum": "relativistic", "speed_limit": -1.0}, "speed_limit"),
        (samplers.ATMC, {"speed_limit": 1.0}, "speed_limit"),  # Gaussian momentum
        (samplers.ATMC, {"noise": 0.0}, "noise"),
        (samplers.ATMC, {"mass": -1.0}, "mass"),
        (samplers.SGHMC, {"friction": 0.0}, "friction"),
        (samplers.SGHMC, {"friction": 1e4}, "friction"),  # h·γ = 10 ≥ 1
        (samplers.SGHMC, {"mass": 0.0}, "mass"),
        (samplers.SGHMC, {"preconditioner": "adam"}, "preconditioner"),
        (samplers.SGLD, {"preconditioner": "adagrad"}, "preconditioner"),
        (samplers.SGLD, {"rho": 1.0}, "rho"),
        (samplers.SGLD, {"epsilon": 0.0}, "epsilon"),
    ],
)
def test_bad_sampler_specific_arguments_are_named(cls, kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        cls(step_size=1e-3, **kwargs)


# --------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------

CYCLICAL = schedules.CyclicalCosine(2e-3, cycle_steps=100, burn_in_steps=30)


@pytest.mark.parametrize(
    "sampler",
    [
        samplers.SGLD(step_size=1e-3, preconditioner="rmsprop", rho=0.9, epsilon=1e-6,
                      temperature=0.5, train_size=1000, seed=3),
        samplers.SGLD(step_size=CYCLICAL, train_size=10),
        samplers.SGHMC(step_size=1e-3, friction=5.0, mass=2.0, preconditioner="rmsprop",
                       temperature=0.1, train_size=1000, seed=4),
        samplers.SGHMC(step_size=CYCLICAL),
        samplers.SGNHT(step_size=1e-3, noise=3.0, mass=0.5, train_size=10, seed=5),
        samplers.ATMC(step_size=CYCLICAL, momentum="relativistic", speed_limit=1.0,
                      mass=11.0, temperature=0.3, train_size=50_000, seed=6),
        samplers.ATMC(step_size=1e-3),
    ],
    ids=lambda s: type(s).__name__,
)
def test_serialize_round_trip(sampler):
    config = keras.optimizers.serialize(sampler)
    restored = keras.optimizers.deserialize(json.loads(json.dumps(config)))
    assert type(restored) is type(sampler)
    assert restored.get_config() == sampler.get_config()
    assert samplers.get(config).get_config() == sampler.get_config()
    for step in [0, 29, 30, 80, 129, 1000]:
        assert float(restored.schedule(step)) == float(sampler.schedule(step))


def test_serialize_keeps_the_current_temperature_and_schedule_type():
    sampler = samplers.ATMC(step_size=CYCLICAL, train_size=100)
    _build(sampler, np.zeros(3))
    sampler.set_temperature(0.2)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(sampler))
    assert restored.temperature == pytest.approx(0.2)
    assert isinstance(restored.schedule, schedules.CyclicalCosine)
    assert restored.schedule.get_config() == CYCLICAL.get_config()


# --------------------------------------------------------------------------
# Noise purity: a function of (seed, variable index, step) only
# --------------------------------------------------------------------------


def _gradient(values, step):
    # A deterministic, state-dependent gradient (U = Σ θ²/2 + Σ sin θ).
    return [v + tf.sin(v) + 0.01 * tf.cast(step, tf.float32) for v in values]


def _trajectory(cls, seed, steps=40, start=None):
    sampler = cls(step_size=1e-2, train_size=10, seed=seed, temperature=0.7)
    start = start if start is not None else [np.zeros(5), np.zeros((2, 3))]
    variables = _build(sampler, *start)

    @tf.function
    def step(i):
        sampler.apply(_gradient([v.value for v in variables], i), variables)

    path = []
    for i in range(steps):
        step(tf.constant(i))
        path.append(np.concatenate([v.numpy().ravel() for v in variables]))
    return np.array(path), sampler, variables


@pytest.mark.parametrize("cls", ALL)
def test_equal_seeds_give_bit_identical_trajectories(cls):
    a, _, _ = _trajectory(cls, seed=11)
    b, _, _ = _trajectory(cls, seed=11)
    c, _, _ = _trajectory(cls, seed=12)
    np.testing.assert_array_equal(a, b)
    assert np.all(np.abs(a - c).max(axis=1) > 1e-4)  # every step differs


@pytest.mark.parametrize("cls", ALL)
def test_noise_at_step_k_does_not_depend_on_history(cls):
    """A fresh sampler put in the state of step k takes exactly the same step."""
    k = 23
    path, original, variables = _trajectory(cls, seed=5, steps=k)
    fresh = cls(step_size=1e-2, train_size=10, seed=5, temperature=0.7)
    copies = _build(fresh, *[v.numpy() for v in variables])
    for target, source in zip(fresh.variables, original.variables):
        target.assign(source)  # iterations = k, momenta, thermostats, temperature
    assert int(fresh.iterations.numpy()) == k
    grads = _gradient([v.value for v in variables], k)
    # The noise itself: same (seed, index, step) → same draw; index matters.
    for index, (v, w) in enumerate(zip(variables, copies)):
        np.testing.assert_array_equal(original.noise(v).numpy(), fresh.noise(w).numpy())
    assert not np.allclose(original.noise(variables[0]).numpy()[:5],
                           original.noise(variables[1]).numpy().ravel()[:5])
    # ... and the step matters: a fresh draw at k + 1.
    at_k = fresh.noise(copies[0]).numpy()
    fresh.iterations.assign(k + 1)
    assert np.all(fresh.noise(copies[0]).numpy() != at_k)
    fresh.iterations.assign(k)
    original.apply(grads, variables)
    fresh.apply(grads, copies)
    for v, w in zip(variables, copies):
        np.testing.assert_array_equal(v.numpy(), w.numpy())
    for v, w in zip(original.variables, fresh.variables):
        np.testing.assert_array_equal(v.numpy(), w.numpy())


def _ancestors(op):
    """Every op that ``op`` depends on, through data and control edges."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen


@pytest.mark.parametrize("cls", ALL)
def test_noise_does_not_wait_for_the_gradients(cls):
    """In a traced step the draw depends on the step counter only, so it can
    run while the gradients are computed; the variable update still waits
    for the gradient check."""
    sampler = cls(step_size=1e-3, train_size=10, seed=0)
    (theta,) = _build(sampler, np.zeros((4, 3)))

    @tf.function
    def step(grad):
        sampler.apply([grad], [theta])

    graph = step.get_concrete_function(tf.TensorSpec((4, 3), tf.float32)).graph
    (grad_input,) = [op for op in graph.get_operations() if op.type == "Placeholder"
                     and op.outputs[0].dtype == tf.float32]
    # The draw is one call of the XLA-compiled `keras_bnn.backend.threefry.normal`.
    draws = [op for op in graph.get_operations()
             if op.type in ("PartitionedCall", "StatefulPartitionedCall")
             and op.get_attr("f").name.startswith("__inference_normal_")]
    updates = [op for op in graph.get_operations()
               if op.type.startswith("AssignAddVariableOp") or op.type == "AssignVariableOp"]
    assert len(draws) == 1 and updates
    assert grad_input not in _ancestors(draws[0])
    assert any(grad_input in _ancestors(op) and any(a.type in ("If", "StatelessIf")
                                                    for a in _ancestors(op)) for op in updates)


def test_rmsprop_preconditioners_follow_their_equations():
    """Two steps at T ≈ 0 (noise scale ~1e-10, below float32 resolution of θ):
    pSGLD: v₁ = G₁² (the average starts at its first value), v₂ = ρv₁+(1-ρ)G₂²,
    Δθ = -h·G/(ε+√v). SGHMC layer-wise: M = √(mean G²)+ε, momentum rescaled
    by √(M₂/M₁)."""
    n, h, rho, eps = 10, 1e-2, 0.9, 1e-6
    g1 = np.array([0.3, -2.0, 0.05], np.float32)  # mean-form gradients; G = n·g
    g2 = np.array([-0.1, 1.0, 0.2], np.float32)
    G1, G2 = n * g1.astype(np.float64), n * g2.astype(np.float64)

    sgld = samplers.SGLD(h, preconditioner="rmsprop", rho=rho, epsilon=eps,
                         train_size=n, temperature=1e-20)
    (theta,) = _build(sgld, np.zeros(3))
    sgld.apply([tf.constant(g1)], [theta])
    v1 = G1**2
    expected = -h * G1 / (eps + np.sqrt(v1))
    np.testing.assert_allclose(theta.numpy(), expected, rtol=1e-5)
    sgld.apply([tf.constant(g2)], [theta])
    v2 = rho * v1 + (1 - rho) * G2**2
    expected = expected - h * G2 / (eps + np.sqrt(v2))
    np.testing.assert_allclose(theta.numpy(), expected, rtol=1e-5)

    sghmc = samplers.SGHMC(h, friction=10.0, preconditioner="rmsprop_layerwise", rho=rho,
                           epsilon=eps, train_size=n, temperature=1e-20)
    (theta,) = _build(sghmc, np.zeros(3))
    sghmc.apply([tf.constant(g1)], [theta])
    v1 = np.mean(G1**2)
    mass1 = np.sqrt(v1) + eps
    m1 = -h * G1  # from m = 0
    state = sghmc.state(theta)
    np.testing.assert_allclose(float(state["mass"].numpy()), mass1, rtol=1e-6)
    np.testing.assert_allclose(theta.numpy(), h * m1 / mass1, rtol=1e-5)
    sghmc.apply([tf.constant(g2)], [theta])
    mass2 = np.sqrt(rho * v1 + (1 - rho) * np.mean(G2**2)) + eps
    m2 = (1 - h * 10.0) * np.sqrt(mass2 / mass1) * m1 - h * G2
    np.testing.assert_allclose(float(state["mass"].numpy()), mass2, rtol=1e-5)
    np.testing.assert_allclose(state["momentum"].numpy(), m2, rtol=1e-5)
    np.testing.assert_allclose(theta.numpy(), h * m1 / mass1 + h * m2 / mass2, rtol=1e-5)


# --------------------------------------------------------------------------
# Kinetic and configurational temperatures
# --------------------------------------------------------------------------

SIZES = [10, 100, 1000]
N = 10  # train_size: the mean-form gradient is ∇U/n and the sampler scales by n
TEMPERATURE = 0.5
BURN_IN = 2_000
RECORD = 6_000
CONFIG = {
    # h·γ = 0.02: SGHMC's momenta run hot by 1/(1 - hγ/2) ≈ 1.01 (exact
    # Lyapunov value 1.0105 at mass 0.25), position bias 0.04 %.
    samplers.SGHMC: dict(step_size=0.02, friction=1.0, mass=0.25),
    samplers.SGNHT: dict(step_size=0.02, noise=1.0, mass=0.25),
    samplers.ATMC: dict(step_size=0.02, noise=1.0, mass=0.25),
    # SGLD's positions run hot by 1/(1 - h/2) = 1.0025 at h = 0.005.
    samplers.SGLD: dict(step_size=0.005),
}


def _equilibrate(cls):
    """Chains on U = Σ θ²/2 (unit Gaussian, three variables); returns the
    sampler, its variables and the configurational-temperature series."""
    sampler = cls(train_size=N, temperature=TEMPERATURE, seed=21, **CONFIG[cls])
    variables = _build(sampler, *[np.zeros(d) for d in SIZES])

    def grads():
        return [v.value / N for v in variables]

    @tf.function(jit_compile=True)
    def run():
        for _ in tf.range(BURN_IN):
            sampler.apply(grads(), variables)
        series = tf.TensorArray(tf.float32, size=RECORD)
        for i in tf.range(RECORD):
            sampler.apply(grads(), variables)
            series = series.write(i, sampler.configurational_temperature())
        return series.stack()

    return sampler, variables, run().numpy().astype(np.float64)


@pytest.mark.parametrize("cls", ALL)
def test_kinetic_and_configurational_temperatures(cls):
    sampler, variables, series = _equilibrate(cls)

    # Configurational temperature Σθ·∇U/Σd: E = T at equilibrium. SE from the
    # ESS of the series; discretisation bias ≤ 0.25 % (see CONFIG) vs SE ≈ 1 %.
    ess = float(total_ess(series[:, None])[()])
    se = series.std() / math.sqrt(ess)
    assert ess > 20
    assert abs(series.mean() - TEMPERATURE) < 4.5 * se, (series.mean(), se, ess)
    assert 4.5 * se < 0.1 * TEMPERATURE  # power: a 10 % temperature error fails

    kinetic = sampler.kinetic_temperatures()
    if not cls.has_momentum:
        assert kinetic == [] and sampler.kinetic_temperature() is None
        return
    assert [d for _, _, d in kinetic] == SIZES
    assert [path for path, _, _ in kinetic] == [v.path for v in variables]
    # With momenta p ~ N(0, m·T), d·T_kin/T ~ χ²_d. Central 99.9 % band per
    # variable (three variables: joint coverage ≥ 99.7 %). SGHMC's 1 %
    # discretisation heating barely moves these bands (±15 % at d = 1000).
    for path, value, d in kinetic:
        low, high = TEMPERATURE * scipy.stats.chi2.ppf([0.0005, 0.9995], d) / d
        assert low < float(value) < high, (path, float(value), low, high)
    total = float(sampler.kinetic_temperature())
    d_all = sum(SIZES)
    low, high = TEMPERATURE * scipy.stats.chi2.ppf([0.0005, 0.9995], d_all) / d_all
    assert low < total < high, (total, low, high)


# --------------------------------------------------------------------------
# The ATMC/SGNHT Ornstein–Uhlenbeck coefficients
# --------------------------------------------------------------------------


@pytest.mark.parametrize("positive", [False, True])
def test_ou_coefficients_match_float64_reference(positive):
    # ATMC: β ≥ D > 0 (β·h must stay a normal float32, i.e. D·h > 1e-38).
    betas = [1e-9, 1e-3, 0.1, 1.0, 2.107, 55.0, 1e4, 1e8]
    if not positive:  # SGNHT's β = D + ξ can be 0, tiny or negative
        betas += [0.0, 1e-30, -1e-30, -1e-9, -0.3, -5.0]
    hs = [0.0, 6.5e-12, 1e-6, 1e-3, 0.05, 0.5]
    beta, h = np.meshgrid(np.array(betas), np.array(hs))
    got = [
        np.asarray(c, np.float64)
        for c in integrators.ornstein_uhlenbeck_coefficients(
            tf.constant(beta, tf.float32), tf.constant(h, tf.float32), positive)
    ]
    b, t = beta.astype(np.float32).astype(np.float64), h.astype(np.float32).astype(np.float64)
    x = b * t
    safe = np.where(b == 0, 1.0, b)
    want = [
        np.exp(-x),
        np.where(b == 0, t, -np.expm1(-x) / safe),
        np.where(b == 0, 2 * t, -np.expm1(-2 * x) / safe),
    ]
    for g in got:
        assert np.all(np.isfinite(g))
    # decay = 1 + expm1(-βh) ∈ [0, 1] is accurate to ~1 ulp of 1 (absolute),
    # the size of the float32 rounding of p it multiplies.
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=2e-7)
    # drift and variance: a few ulps relative (plus the 1e-6 series switch of SGNHT).
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-37)


def test_relativistic_velocity_saturates_at_the_speed_limit_without_overflow():
    """∇K(p) = p/(m·sqrt(p²/(m²c²)+1)); |∇K| → c as |p| → ∞, never NaN or 0."""
    sampler = samplers.ATMC(1e-3, momentum="relativistic", speed_limit=2.0, mass=3.0)
    p = np.array([0.0, 1e-3, -0.5, 6.0, -6.0, 1e20, -1e30, np.inf, -np.inf], "float32")
    velocity = np.asarray(sampler.velocity(tf.constant(p)))
    finite = p[:5].astype("float64")
    expected = (finite / 3.0) / np.sqrt((finite / 6.0) ** 2 + 1.0)
    np.testing.assert_allclose(velocity[:5], expected, rtol=1e-6, atol=1e-9)  # float32 round-off
    np.testing.assert_array_equal(velocity[5:], [2.0, -2.0, 2.0, -2.0])


@pytest.mark.parametrize("cls", [samplers.SGNHT, samplers.ATMC])
def test_the_step_starts_from_the_thermostat_rescaled_by_the_step_change(cls, monkeypatch):
    """ξ is a rate ∝ 1/h_v, so when h_v changes by 1/c the step starts from
    ξ·c (``step_change``, applied before the fused step): a chain holding ξ
    with c = 0.5 takes exactly the step of one holding ξ/2 with c = 1."""
    weights = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    gradient = np.linspace(0.5, -0.7, 6, dtype=np.float32).reshape(2, 3)
    thermostat = np.linspace(0.2, 1.2, 6, dtype=np.float32).reshape(2, 3)
    results = []
    for change, held in ((0.5, thermostat), (1.0, 0.5 * thermostat)):
        monkeypatch.setattr(cls, "step_change", lambda self, variable: 1.0)
        sampler = cls(train_size=10, seed=4)  # step_size="auto": D follows h_v
        (variable,) = _build(sampler, weights)
        for _ in range(3):  # the same three steps in both chains
            sampler.apply([tf.constant(gradient)], [variable])
        sampler.state(variable)["thermostat"].assign(held)
        monkeypatch.setattr(cls, "step_change", lambda self, variable, c=change: c)
        sampler.apply([tf.constant(gradient)], [variable])
        results.append([variable.numpy(), *(sampler.state(variable)[name].numpy()
                                            for name in ("momentum", "thermostat"))])
    for got, expected in zip(*results):
        np.testing.assert_array_equal(got, expected)
