"""Tests of keras_bnn.priors: densities, normalisation, sampling, bad input.

Statistical tolerances: a sample statistic is compared with its exact value
within 4 standard errors (SE derived per check below). Under a correct
sampler each check fails with probability ~6e-5 (two-sided normal tail at
4σ, CLT), well below 1e-3 for the whole file; the seeds are fixed, so the
outcome is reproducible.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow_probability as tfp
from hypothesis import given, settings, strategies as st
from scipy import integrate, special, stats

from keras_bnn import priors

RNG = np.random.default_rng(1234)
X = RNG.normal(scale=3.0, size=(6, 7))  # float64 inputs
N_SIGMA = 4.0


def _log_prob(prior, x):
    return float(keras.ops.convert_to_numpy(prior.log_prob(keras.ops.convert_to_tensor(x))))


# --- log_prob against scipy.stats and closed forms ---------------------------

SCIPY_CASES = [
    (priors.Normal(mean=0.7, stddev=2.5), stats.norm(loc=0.7, scale=2.5)),
    (priors.Laplace(scale=1.7, loc=-0.4), stats.laplace(loc=-0.4, scale=1.7)),
    (priors.StudentT(df=3.5, scale=0.8, loc=0.3), stats.t(df=3.5, loc=0.3, scale=0.8)),
    (priors.Cauchy(scale=2.0, loc=1.0), stats.cauchy(loc=1.0, scale=2.0)),
    # d = 1 groups (a rank-1 weight): the ordinary Laplace density.
    (priors.GroupLaplace(scale=5.0), stats.laplace(scale=5.0)),
]


@pytest.mark.parametrize("prior, reference", SCIPY_CASES, ids=lambda case: type(case).__name__)
def test_log_prob_matches_scipy(prior, reference):
    x = X[0] if isinstance(prior, priors.GroupLaplace) else X
    np.testing.assert_allclose(_log_prob(prior, x), reference.logpdf(x).sum(), rtol=1e-5)


def test_he_normal_log_prob_uses_fan_in():
    kernel = RNG.normal(size=(3, 3, 4, 5))  # conv kernel: fan_in = 3·3·4
    sigma = 1.5 * math.sqrt(2.0 / 36)
    expected = stats.norm(scale=sigma).logpdf(kernel).sum()
    np.testing.assert_allclose(_log_prob(priors.HeNormal(1.5), kernel), expected, rtol=1e-5)


def test_he_student_t_log_prob_uses_fan_in():
    kernel = RNG.normal(size=(3, 3, 4, 5))  # conv kernel: fan_in = 3·3·4
    scale = 0.6 * math.sqrt(2.0 / 36)
    expected = stats.t(df=3.0, scale=scale).logpdf(kernel).sum()
    np.testing.assert_allclose(_log_prob(priors.HeStudentT(3.0, 0.6), kernel), expected,
                               rtol=1e-5)


@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((3, 2, 5), 0), ((2, 3, 4, 5), -1)])
def test_group_laplace_log_prob_closed_form(shape, axis):
    b = 2.5
    x = RNG.normal(size=shape)
    groups = np.moveaxis(x, axis, 0).reshape(shape[axis], -1)
    d = groups.shape[1]
    # Normaliser of exp(-‖θ‖/b) on R^d: surface of the unit sphere times Γ(d)·b^d.
    log_z = math.log(2 * math.pi ** (d / 2) / special.gamma(d / 2) * special.gamma(d) * b**d)
    expected = (-np.linalg.norm(groups, axis=1) / b - log_z).sum()
    actual = _log_prob(priors.GroupLaplace(b, axis=axis), x)
    np.testing.assert_allclose(actual, expected, rtol=1e-5)


def test_unit_norm_direction_log_prob_closed_form():
    x = RNG.normal(size=(3, 3, 2, 4))
    d = 18
    sq = (x**2).reshape(-1, 4).sum(axis=0)
    expected = -0.5 * d * ((sq - 1.0) ** 2).sum()
    np.testing.assert_allclose(_log_prob(priors.UnitNormDirection(), x), expected, rtol=1e-5)


@pytest.mark.parametrize(
    "prior, reference",
    [
        (priors.Normal(mean=-1.0, stddev=0.6), tfp.distributions.Normal(-1.0, 0.6)),
        (priors.Laplace(scale=2.2, loc=0.5), tfp.distributions.Laplace(0.5, 2.2)),
        (priors.StudentT(df=4.0, scale=1.3, loc=-0.2), tfp.distributions.StudentT(4.0, -0.2, 1.3)),
    ],
    ids=["Normal", "Laplace", "StudentT"],
)
def test_log_prob_matches_tensorflow_probability(prior, reference):
    expected = float(np.sum(reference.log_prob(X.astype(np.float32)).numpy()))
    np.testing.assert_allclose(_log_prob(prior, X.astype(np.float32)), expected, rtol=1e-5)


def test_regularizer_value_is_the_negative_log_prob():
    prior = priors.Normal(stddev=2.0)
    value = float(keras.ops.convert_to_numpy(prior(keras.ops.convert_to_tensor(X))))
    np.testing.assert_allclose(value, -stats.norm(scale=2.0).logpdf(X).sum(), rtol=1e-6)


# --- densities integrate to one -----------------------------------------------


def _density_1d(prior):
    return lambda t: math.exp(_log_prob(prior, np.array([[t]])))


@pytest.mark.parametrize(
    "prior",
    [
        priors.Normal(0.3, 0.7),
        priors.Laplace(1.5, 0.2),
        priors.StudentT(2.5, 1.2),
        priors.Cauchy(0.9),
        priors.HeNormal(0.8),  # fan_in 1 for a (1, 1) kernel
        priors.HeStudentT(2.5, 0.8),  # fan_in 1
        priors.GroupLaplace(5.0),  # d = 1
    ],
    ids=lambda p: type(p).__name__,
)
def test_one_dimensional_density_integrates_to_one(prior):
    total, _ = integrate.quad(_density_1d(prior), -np.inf, np.inf, epsabs=1e-9, limit=200)
    assert total == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("d", [2, 3])
def test_group_laplace_integrates_to_one_in_d_dimensions(d):
    # Radial integration of the density along one direction u, after checking
    # that it is radially symmetric (equal on random directions at several
    # radii): ∫ p = |S^{d-1}| ∫_0^∞ p(r·u) r^{d-1} dr, |S^1| = 2π, |S^2| = 4π.
    prior = priors.GroupLaplace(scale=1.5)
    directions = RNG.normal(size=(4, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    u = directions[0]
    for r in (0.1, 1.0, 7.0):
        values = [_log_prob(prior, r * v[:, None]) for v in directions]
        np.testing.assert_allclose(values, values[0], rtol=1e-10)
    sphere = {2: 2 * math.pi, 3: 4 * math.pi}[d]
    radial, _ = integrate.quad(
        lambda r: math.exp(_log_prob(prior, r * u[:, None])) * r ** (d - 1), 0, np.inf
    )
    assert sphere * radial == pytest.approx(1.0, abs=1e-5)


# --- sampling moments -----------------------------------------------------------

N_SAMPLES = 40_000


def _draw(prior, shape=(200, 200), seed=7):
    return np.asarray(keras.ops.convert_to_numpy(prior.sample(shape, seed=seed)), np.float64)


@pytest.mark.parametrize(
    "prior, mean, var, kurtosis",
    [
        # (prior, exact mean, exact variance, exact fourth central moment / var²)
        (priors.Normal(0.5, 2.0), 0.5, 4.0, 3.0),
        (priors.Laplace(1.5, -1.0), -1.0, 2 * 1.5**2, 6.0),
        (priors.StudentT(10.0, 0.7, 0.2), 0.2, 0.49 * 10 / 8, 3 + 6 / (10 - 4)),
        (priors.GroupLaplace(2.0, axis=-1), 0.0, 2 * 2.0**2, 6.0),  # on a rank-1 weight: Laplace
    ],
    ids=["Normal", "Laplace", "StudentT", "GroupLaplace-d1"],
)
def test_sample_mean_and_variance(prior, mean, var, kurtosis):
    shape = (N_SAMPLES,) if isinstance(prior, priors.GroupLaplace) else (200, 200)
    w = _draw(prior, shape)
    n = w.size
    # SE of the mean: σ/√n; SE of the sample variance: σ²·sqrt((κ - 1)/n),
    # κ = μ4/σ⁴ (3 Normal, 6 Laplace, 3 + 6/(ν-4) Student-t).
    assert abs(w.mean() - mean) < N_SIGMA * math.sqrt(var / n)
    assert abs(w.var() - var) < N_SIGMA * var * math.sqrt((kurtosis - 1) / n)


def test_cauchy_sample_quartiles():
    # Cauchy has no moments: check median (= loc) and quartiles (= loc ± s).
    # SE of the p-quantile: sqrt(p(1-p)/n) / f(q), with f(loc) = 1/(π s) and
    # f(loc ± s) = 1/(2π s).
    loc, s = 0.5, 2.0
    w = _draw(priors.Cauchy(s, loc))
    n = w.size
    q1, q2, q3 = np.quantile(w, [0.25, 0.5, 0.75])
    assert abs(q2 - loc) < N_SIGMA * math.sqrt(0.25 / n) * math.pi * s
    quartile_se = math.sqrt(0.1875 / n) * 2 * math.pi * s
    assert abs(q1 - (loc - s)) < N_SIGMA * quartile_se
    assert abs(q3 - (loc + s)) < N_SIGMA * quartile_se


def test_he_student_t_errors_name_the_class():
    with pytest.raises(ValueError, match="HeStudentT.*`df`"):
        priors.HeStudentT(df=0.0)


def test_he_student_t_sample_variance_uses_fan_in():
    df = 10.0
    w = _draw(priors.HeStudentT(df, 1.0), (200, 200))  # fan_in 200, n = 40000
    var = 2.0 / 200 * df / (df - 2)
    kurtosis = 3 + 6 / (df - 4)  # SE of the variance as in test_sample_mean_and_variance
    assert abs(w.mean()) < N_SIGMA * math.sqrt(var / w.size)
    assert abs(w.var() - var) < N_SIGMA * var * math.sqrt((kurtosis - 1) / w.size)


def test_he_normal_sample_variance_uses_fan_in():
    w = _draw(priors.HeNormal(1.0), (5, 5, 8, 200))  # fan_in 200, n = 40000
    var = 2.0 / 200
    assert abs(w.mean()) < N_SIGMA * math.sqrt(var / w.size)
    assert abs(w.var() - var) < N_SIGMA * var * math.sqrt(2 / w.size)


def test_group_laplace_sample_norms_are_gamma_and_directions_uniform():
    d, groups, b = 3, 20_000, 1.5
    w = _draw(priors.GroupLaplace(b), (d, groups))
    norms = np.linalg.norm(w, axis=0)
    # ‖θ_g‖ ~ Gamma(d, b): mean d·b, variance d·b².
    assert abs(norms.mean() - d * b) < N_SIGMA * math.sqrt(d) * b / math.sqrt(groups)
    # Uniform directions: each coordinate has mean 0 and variance E[r²]/d = (d+1)·b².
    coord_sd = math.sqrt((d + 1) * b * b)
    assert np.all(np.abs(w.mean(axis=1)) < N_SIGMA * coord_sd / math.sqrt(groups))


@pytest.mark.parametrize("fan, groups", [((2, 2), 20_000), ((48, 48), 400), ((128, 128), 200)])
def test_unit_norm_direction_sample_radius_distribution(fan, groups):
    """The radii of draws against the radial density's moments, for group
    sizes d = 4, 2 304 and 16 384 (above d ≈ 2 240 the sampler's grid used to
    end below the density's mode: every radius sat at the grid's top)."""
    d = math.prod(fan)
    w = _draw(priors.UnitNormDirection(), (*fan, groups))
    norms = np.linalg.norm(w.reshape(d, groups), axis=0)
    # Radial density ∝ r^{d-1}·exp(-d/2·(r²-1)²); its moments on a fine grid,
    # in log space (r^{d-1} overflows for large d).
    r = np.linspace(1e-6, 10.0, 2_000_001)
    log_density = (d - 1) * np.log(r) - 0.5 * d * (r * r - 1) ** 2
    density = np.exp(log_density - log_density.max())
    mean = np.sum(r * density) / np.sum(density)
    sd = math.sqrt(np.sum((r - mean) ** 2 * density) / np.sum(density))
    # The sampler's grid resolution, (r_max - r_min)/4096 ≤ 1.3e-3 (d = 4), is
    # allowed on the mean and the sd.
    assert abs(norms.mean() - mean) < N_SIGMA * sd / math.sqrt(groups) + 1.3e-3
    assert abs(norms.std() - sd) < N_SIGMA * sd / math.sqrt(2 * groups) + 1.3e-3


def test_sample_is_deterministic_in_seed():
    prior = priors.StudentT(3.0)
    np.testing.assert_array_equal(_draw(prior, (50,), seed=3), _draw(prior, (50,), seed=3))
    assert not np.array_equal(_draw(prior, (50,), seed=3), _draw(prior, (50,), seed=4))


# --- resolution, serialisation and bad input --------------------------------------


@pytest.mark.parametrize("seed", [-1, 1.5, "a", True])
def test_sample_names_a_bad_seed(seed):
    """``seed=1.5`` drew as seed 1 and ``"a"`` gave int()'s error."""
    with pytest.raises(ValueError, match="StudentT: `seed` must be an int"):
        priors.StudentT(3.0).sample((5,), seed=seed)


@pytest.mark.parametrize("build", [lambda a: priors.GroupLaplace(5.0, axis=a),
                                   lambda a: priors.UnitNormDirection(axis=a)])
@pytest.mark.parametrize("axis", [1.5, "a", True])
def test_group_priors_name_a_bad_axis(build, axis):
    """``axis=1.5`` became 1 and ``axis=True`` became 1."""
    with pytest.raises(ValueError, match="`axis` must be an int"):
        build(axis)


def test_get_resolves_names_configs_and_instances():
    assert isinstance(priors.get("he_normal"), priors.HeNormal)
    assert priors.get(None) is None
    original = priors.StudentT(df=2.0, scale=0.5, loc=1.0)
    assert priors.get(original) is original
    restored = priors.get(priors.serialize(original))
    assert type(restored) is priors.StudentT
    assert restored.get_config() == original.get_config()


def test_unknown_prior_name_is_a_value_error_naming_the_argument():
    with pytest.raises(ValueError, match="kernel_prior.*gaussian"):
        priors.get("gaussian", argument="kernel_prior")
    with pytest.raises(ValueError, match="bias_prior"):
        priors.get(3.0, argument="bias_prior")


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda v: priors.Normal(stddev=v), "stddev"),
        (lambda v: priors.Laplace(scale=v), "scale"),
        (lambda v: priors.StudentT(df=v), "df"),
        (lambda v: priors.StudentT(scale=v), "scale"),
        (lambda v: priors.Cauchy(scale=v), "scale"),
        (lambda v: priors.HeNormal(scale=v), "scale"),
        (lambda v: priors.HeStudentT(df=v), "df"),
        (lambda v: priors.HeStudentT(scale=v), "scale"),
        (lambda v: priors.GroupLaplace(scale=v), "scale"),
    ],
)
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_non_positive_scale_is_a_value_error_naming_the_argument(make, argument, value):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        make(value)


@pytest.mark.parametrize(
    "prior, shape",
    [
        (priors.HeNormal(), (5,)),
        (priors.HeStudentT(), (5,)),
        (priors.UnitNormDirection(), (5,)),
        (priors.GroupLaplace(axis=2), (3, 4)),
        (priors.GroupLaplace(), ()),
    ],
)
def test_prior_on_wrong_rank_is_a_value_error_naming_the_argument(prior, shape):
    with pytest.raises(ValueError, match="`kernel_prior`"):
        prior.validate_shape(shape, "kernel_prior")


def test_glorot_normal_log_prob_and_samples_use_fan_in_plus_fan_out():
    kernel = RNG.normal(size=(3, 3, 4, 5))  # fan_in = 9·4, fan_out = 9·5
    sigma = 0.7 * math.sqrt(2.0 / (36 + 45))
    expected = stats.norm(scale=sigma).logpdf(kernel).sum()
    np.testing.assert_allclose(_log_prob(priors.GlorotNormal(0.7), kernel), expected, rtol=1e-5)
    w = _draw(priors.GlorotNormal(1.0), (200, 200))  # var 2/400, n = 40000
    var = 2.0 / 400
    assert abs(w.var() - var) < N_SIGMA * var * math.sqrt(2 / w.size)
    assert isinstance(priors.get("glorot_normal"), priors.GlorotNormal)
    with pytest.raises(ValueError, match="GlorotNormal"):
        priors.GlorotNormal(scale=0.0)


@pytest.mark.parametrize("name", ["normal", "he_normal", "glorot_normal", "laplace", "student_t",
                                  "he_student_t", "group_laplace", "unit_norm_direction"])
def test_serialized_priors_record_the_public_module(name):
    """Stores hash the serialized priors into their architecture fingerprint:
    the classes live in submodules but must keep reporting
    ``keras_bnn.priors`` so that stores written before the split still match."""
    config = priors.serialize(priors.get(name))
    assert config["module"] == "keras_bnn.priors"
    assert type(priors.get(config)) is type(priors.get(name))


# --- fan arguments (kb.bayesian passes an EinsumDense kernel's) -----------------

FAN_PRIORS = pytest.mark.parametrize("make, sigma", [
    # (a prior with given fans, the scale σ of its density by their rule)
    (lambda: priors.HeNormal(1.5, fan_in=16), 1.5 * math.sqrt(2.0 / 16)),
    (lambda: priors.HeStudentT(3.0, 0.6, fan_in=16), 0.6 * math.sqrt(2.0 / 16)),
    (lambda: priors.GlorotNormal(0.7, fan_in=16, fan_out=32), 0.7 * math.sqrt(2.0 / 48)),
], ids=["HeNormal", "HeStudentT", "GlorotNormal"])
QUERY = RNG.normal(size=(16, 4, 8))  # an attention query kernel (d_model, heads, head_dim)


@FAN_PRIORS
def test_given_fans_replace_those_of_the_shape(make, sigma):
    """From the shape (16, 4, 8) the fan-in would be 16·4 (and Glorot's fan-out 16·8)."""
    prior = make()
    reference = (stats.t(df=3.0, scale=sigma) if isinstance(prior, priors.HeStudentT)
                 else stats.norm(scale=sigma))
    np.testing.assert_allclose(_log_prob(prior, QUERY), reference.logpdf(QUERY).sum(), rtol=1e-5)
    if not isinstance(prior, priors.HeStudentT):  # a t of 3 df has no fourth moment: no SE
        w = _draw(prior, (16, 50, 50))  # n = 40000, SE of the variance as above
        assert abs(w.var() - sigma**2) < N_SIGMA * sigma**2 * math.sqrt(2 / w.size)


@FAN_PRIORS
def test_given_fans_survive_the_config_round_trip(make, sigma):
    prior = make()
    restored = priors.get(priors.serialize(prior))
    assert type(restored) is type(prior)
    assert restored.get_config() == prior.get_config()
    assert _log_prob(restored, QUERY) == pytest.approx(_log_prob(prior, QUERY), rel=1e-6)
    assert restored.get_config()["fan_in"] == 16
    # Without fans the config reads as before (stores hash it into their fingerprint).
    assert "fan_in" not in type(prior)().get_config()


@settings(max_examples=60, deadline=None, derandomize=True)  # reproducible
@given(value=st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
                       st.sampled_from([True, False, "16", [16], 16.5, 0, -3, 2.0])),
       make=st.sampled_from([lambda v: priors.HeNormal(fan_in=v),
                             lambda v: priors.HeStudentT(fan_in=v),
                             lambda v: priors.GlorotNormal(fan_in=v),
                             lambda v: priors.GlorotNormal(fan_out=v)]))
def test_a_fan_is_a_count_or_refused_naming_it(value, make):
    """A fan is an integer >= 1 (also 2.0, as a JSON config gives it back);
    anything else is refused with the argument named, never used."""
    count = (not isinstance(value, (bool, str, list)) and math.isfinite(value)
             and float(value).is_integer() and value >= 1)
    if count:
        prior = make(value)
        fans = {k: v for k, v in prior.get_config().items() if k.startswith("fan_")}
        assert list(fans.values()) == [value] and type(fans.popitem()[1]) is int
        return
    with pytest.raises(ValueError, match=r": `fan_(in|out)` must be an integer >= 1; got "):
        make(value)


def test_with_fans_copies_only_where_the_scale_changes():
    prior = priors.HeNormal(2.0)
    assert prior.with_fans((16, 4, 8), 64, 8) is prior  # the shape's fan-in already
    fitted = prior.with_fans((16, 4, 8), 16, 32)
    assert fitted.get_config() == {"scale": 2.0, "fan_in": 16} and "fan_in" not in \
        prior.get_config()
    given = priors.HeNormal(2.0, fan_in=7)
    assert given.with_fans((16, 4, 8), 16, 32) is given
    glorot = priors.GlorotNormal(fan_out=5).with_fans((16, 4, 8), 16, 32)
    assert glorot.get_config() == {"scale": 1.0, "fan_in": 16, "fan_out": 5}


@pytest.mark.parametrize("call, says", [
    (lambda: priors.HeStudentT().sample((3,), seed=0),
     "`shape`: HeStudentT needs a weight of rank"),
    (lambda: priors.Normal().sample(3, seed=0), "`shape` must be a tuple of ints >= 1; got 3"),
    (lambda: priors.HeNormal().sample((0, 3), seed=0), "`shape` must be a tuple of ints >= 1"),
    (lambda: priors.UnitNormDirection().sample((0, 3)), "`shape` must be a tuple of ints >= 1"),
    (lambda: priors.Laplace().sample((2, True)), "`shape` must be a tuple of ints >= 1"),
    (lambda: priors.GroupLaplace(axis=3).log_prob(np.ones((4, 5), "float32")),
     r"GroupLaplace\(axis=3\) does not fit a weight of shape \(4, 5\)"),
    (lambda: priors.GroupLaplace().log_prob(np.float32(1.0)), "needs a weight of rank >= 1"),
])
def test_a_bad_shape_is_named(call, says):
    """A sample's ``shape`` and a group prior's weight are checked, naming them
    (they gave ``x``, ZeroDivisionError, TF errors, or a wrapped axis's value)."""
    with pytest.raises(ValueError, match=says):
        call()
