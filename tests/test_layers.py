"""Tests of keras_bnn.layers: priors as losses, serialisation, weight norm,
ResNet++ block, FRN/TLU, and bad input."""

import re

import keras
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

import keras_bnn as kb
from keras_bnn import layers, priors

RNG = np.random.default_rng(0)
_np = keras.ops.convert_to_numpy
FUZZ = settings(max_examples=60, deadline=None, derandomize=True)  # reproducible


def _randomise(model, seed=0):
    """Random weights, so a load that silently re-initialises would be seen."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(scale=0.5, size=variable.shape).astype(variable.dtype))


def _losses(model):
    return np.array([float(_np(loss)) for loss in model.losses])


# (layer factory, input shape, input dtype); priors deliberately non-default
# in places, so that their parameters must survive serialisation.
F32 = "float32"
LAYER_CASES = {
    "Dense": (lambda: layers.Dense(4, kernel_prior=priors.Laplace(0.3)), (5,), F32),
    "Conv1D": (lambda: layers.Conv1D(3, 2, bias_prior=priors.StudentT(4.0, 0.5)), (6, 2), F32),
    "Conv2D": (
        lambda: layers.Conv2D(3, 3, padding="same", kernel_prior="normal"), (5, 5, 2), F32
    ),
    "Embedding": (
        lambda: layers.Embedding(7, 3, embeddings_prior=priors.Normal(0, 0.5)), (4,), "int32"
    ),
    "LSTM": (
        lambda: layers.LSTM(3, recurrent_kernel_prior=priors.Normal(0.0, 0.3)), (4, 2), F32
    ),
    "WeightNormDense": (lambda: layers.WeightNormDense(4, activation="selu"), (5,), F32),
    "WeightNormConv2D": (
        lambda: layers.WeightNormConv2D(
            3, 3, strides=2, padding="same", scale_prior=priors.Laplace(2.0)
        ),
        (6, 6, 2),
        F32,
    ),
    "ResNetPPBlock": (lambda: layers.ResNetPPBlock(8, bottleneck_filters=2), (4, 4, 8), F32),
    "ResNetPPBlockDown": (lambda: layers.ResNetPPBlock(8, strides=2), (4, 4, 4), F32),
    "FRN": (lambda: layers.FRN(), (4, 4, 3), F32),
    "FRN-no-TLU": (lambda: layers.FRN(use_tlu=False, epsilon=1e-3), (4, 4, 3), F32),
    "TLU": (lambda: layers.TLU(tau_prior=priors.Laplace(1.0)), (4, 4, 3), F32),
}


def _inputs(shape, dtype, batch=3):
    if dtype == "int32":
        return RNG.integers(0, 7, size=(batch, *shape)).astype("int32")
    return RNG.normal(size=(batch, *shape)).astype("float32")


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
def test_layer_saves_and_loads_with_identical_outputs_and_prior_losses(case, tmp_path):
    make, shape, dtype = LAYER_CASES[case]
    inputs = keras.Input(shape=shape, dtype=dtype)
    model = keras.Model(inputs, make()(inputs))
    _randomise(model)
    x = _inputs(shape, dtype)
    path = tmp_path / f"{case}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)

    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert len(model.losses) == len(model.trainable_weights) > 0  # every weight has a prior
    np.testing.assert_array_equal(_losses(loaded), _losses(model))
    for original, restored in zip(model.weights, loaded.weights):
        assert type(restored.regularizer) is type(original.regularizer)
        assert restored.regularizer.get_config() == original.regularizer.get_config()


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
def test_get_config_round_trip(case):
    layer = LAYER_CASES[case][0]()
    config = layer.get_config()
    assert type(layer).from_config(config).get_config() == config
    regularizers = [key for key in config if key.endswith("_regularizer")]
    assert regularizers in ([], ["activity_regularizer"])


def test_prior_loss_is_the_negative_log_density():
    layer = layers.Dense(3, kernel_prior=priors.Normal(0.0, 2.0), bias_prior=priors.Laplace(0.5))
    layer.build((None, 4))
    _randomise(layer, seed=1)
    kernel, bias = (_np(v) for v in (layer.kernel, layer.bias))
    expected = -(
        stats.norm(scale=2.0).logpdf(kernel).sum() + stats.laplace(scale=0.5).logpdf(bias).sum()
    )
    np.testing.assert_allclose(_losses(layer).sum(), expected, rtol=1e-5)


def test_default_priors():
    dense = layers.Dense(2)
    assert isinstance(dense.kernel_prior, priors.HeNormal) and dense.kernel_prior.scale == 1.0
    assert isinstance(dense.bias_prior, priors.Normal) and dense.bias_prior.stddev == 1.0
    assert isinstance(layers.Embedding(3, 2).embeddings_prior, priors.Normal)
    lstm = layers.LSTM(2)
    assert isinstance(lstm.recurrent_kernel_prior, priors.HeNormal)
    wn = layers.WeightNormDense(2)
    assert isinstance(wn.direction_prior, priors.UnitNormDirection)
    assert isinstance(wn.scale_prior, priors.GroupLaplace) and wn.scale_prior.scale == 5.0
    frn = layers.FRN()
    assert frn.gamma_prior.mean == 1.0 and frn.beta_prior.mean == 0.0


def test_a_shared_prior_is_not_changed_by_the_model_it_sits_in():
    # BayesianModel scales layer losses by 1/n itself: compiling with one n
    # must not change what the prior gives in another model.
    shared = priors.Normal(0.0, 0.1)
    inputs = keras.Input((3,))
    model = kb.BayesianModel(inputs, layers.Dense(2, kernel_prior=shared)(inputs))
    model.compile(sampler="sgld", loss="mse", train_size=7)
    layer = layers.Dense(2, kernel_prior=shared, bias_prior=shared)
    layer.build((None, 3))
    assert layer.kernel.regularizer is shared
    kernel = _np(layer.kernel)
    np.testing.assert_allclose(float(shared(layer.kernel.value)),
                               -stats.norm(scale=0.1).logpdf(kernel).sum(), rtol=1e-5)


def test_none_prior_leaves_the_weight_unregularised():
    layer = layers.Dense(2, bias_prior=None)
    layer.build((None, 3))
    assert layer.bias.regularizer is None and len(layer.losses) == 1
    assert layers.Dense.from_config(layer.get_config()).bias_prior is None


# --- weight normalisation --------------------------------------------------------


@pytest.mark.parametrize(
    "layer, shape",
    [
        (layers.WeightNormDense(4), (3, 6)),
        (layers.WeightNormConv2D(4, 3, padding="same"), (2, 5, 5, 3)),
    ],
    ids=["dense", "conv2d"],
)
def test_weight_norm_output_is_invariant_to_direction_scale(layer, shape):
    x = RNG.normal(size=shape).astype("float32")
    layer.build(shape)
    _randomise(layer, seed=2)
    before = _np(layer(x))
    direction = _np(layer.direction)
    # A different positive factor per output feature, spanning 4 decades.
    factors = np.logspace(-2, 2, direction.shape[-1]).astype("float32")
    layer.direction.assign(direction * factors)
    np.testing.assert_allclose(_np(layer(x)), before, rtol=1e-5, atol=1e-6)
    # ... and the effective weight has per-feature norm |φ_s|.
    kernel = _np(layer.kernel).reshape(-1, direction.shape[-1])
    np.testing.assert_allclose(
        np.linalg.norm(kernel, axis=0), np.abs(_np(layer.scale)), rtol=1e-5
    )


def test_weight_norm_dense_matches_explicit_formula():
    layer = layers.WeightNormDense(3, activation="tanh")
    layer.build((None, 4))
    _randomise(layer, seed=3)
    d, s, b = (_np(v) for v in (layer.direction, layer.scale, layer.bias))
    x = RNG.normal(size=(5, 4)).astype("float32")
    expected = np.tanh(x @ (s * d / np.linalg.norm(d, axis=0)) + b)
    np.testing.assert_allclose(_np(layer(x)), expected, rtol=1e-5, atol=1e-6)


def test_weight_norm_initial_effective_weight_has_unit_feature_norms():
    layer = layers.WeightNormConv2D(16, 3)
    layer.build((None, 8, 8, 32))
    kernel = _np(layer.kernel).reshape(-1, 16)
    np.testing.assert_allclose(np.linalg.norm(kernel, axis=0), 1.0, rtol=1e-5)
    # lecun_normal directions already have norm close to 1 (d = 288).
    norms = np.linalg.norm(_np(layer.direction).reshape(-1, 16), axis=0)
    assert np.all(np.abs(norms - 1.0) < 0.25)


def _is_size(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _is_size_or_pair(value):
    pair = value if isinstance(value, (tuple, list)) else (value, value)
    return len(pair) == 2 and all(_is_size(size) for size in pair)


#: Good sizes (1..3, also as pairs and NumPy ints), three times as likely as bad ones:
#: 0, negatives, floats, strings, bools, None, pairs of the wrong length or a bad entry.
good_sizes = st.one_of(st.integers(1, 3), st.integers(1, 3).map(np.int64),
                       st.tuples(st.integers(1, 3), st.integers(1, 3)),
                       st.lists(st.integers(1, 3), min_size=2, max_size=2))
bad_sizes = st.one_of(
    st.integers(-2, 0), st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(
        lambda sizes: not _is_size_or_pair(sizes)),
    st.sampled_from([2.0, 2.5, "3", "33", True, None, (1.0, 2), (True, 1), (2, 0)]),
)
conv_sizes = st.one_of(good_sizes, good_sizes, good_sizes, bad_sizes)
paddings = st.sampled_from(["valid", "same", "SAME", "Valid"] * 3
                           + ["full", "causal", "", 1, None])


@FUZZ
@given(kernel_size=conv_sizes, strides=conv_sizes, padding=paddings, dilation_rate=conv_sizes)
def test_fuzz_weight_norm_conv2d_arguments(kernel_size, strides, padding, dilation_rate):
    """Every argument is accepted and convolves as keras.layers.Conv2D would, or
    refused at construction with a ValueError naming one of the bad arguments."""
    arguments = dict(kernel_size=kernel_size, strides=strides, padding=padding,
                     dilation_rate=dilation_rate)
    bad = {name for name in ("kernel_size", "strides", "dilation_rate")
           if not _is_size_or_pair(arguments[name])}
    if not (isinstance(padding, str) and padding.lower() in ("valid", "same")):
        bad.add("padding")
    if not bad and np.max(strides) > 1 and np.max(dilation_rate) > 1:
        bad.add("dilation_rate")  # the convolution does not take both
    try:
        layer = layers.WeightNormConv2D(2, **arguments)
    except ValueError as error:
        assert re.fullmatch(r"WeightNormConv2D: `(\w+)` must .+; got .+\.", str(error))
        assert re.match(r"WeightNormConv2D: `(\w+)`", str(error))[1] in bad, str(error)
        return
    assert not bad
    pairs = {name: tuple(int(size) for size in (value if isinstance(value, (tuple, list))
                                                 else (value, value)))
             for name, value in arguments.items() if name != "padding"}
    assert {name: getattr(layer, name) for name in pairs} == pairs
    x = np.random.default_rng(0).normal(size=(1, 8, 8, 3)).astype("float32")
    expected = keras.layers.Conv2D(2, padding=padding, **pairs).compute_output_shape(x.shape)
    assert tuple(layer(x).shape) == tuple(expected)


@pytest.mark.parametrize("shape", [(None, 8), (None, 8, 3), (None, 2, 8, 8, 3)])
def test_weight_norm_conv2d_refuses_inputs_that_are_not_rank_4_at_build(shape):
    layer = layers.WeightNormConv2D(2, 3, name="conv")
    message = re.escape(f"WeightNormConv2D 'conv': `inputs` must be images of shape (batch, "
                        f"height, width, channels); got shape {shape}.")
    with pytest.raises(ValueError, match=message):
        layer.build(shape)


# --- ResNet++ block -------------------------------------------------------------


def test_resnet_pp_block_structure_and_fixup_init():
    block = layers.ResNetPPBlock(8, strides=2, residual_scale_init=0.1)
    y = block(RNG.normal(size=(2, 6, 6, 4)).astype("float32"))
    assert tuple(y.shape) == (2, 3, 3, 8)
    assert block.conv1.kernel_size == (1, 1) and block.conv2.kernel_size == (3, 3)
    assert block.conv3.kernel_size == (1, 1) and block.conv2.strides == (2, 2)
    assert isinstance(block.shortcut, layers.WeightNormConv2D) and block.shortcut.strides == (2, 2)
    np.testing.assert_allclose(_np(block.conv3.scale), 0.1)
    np.testing.assert_allclose(_np(block.conv1.scale), 1.0)
    identity = layers.ResNetPPBlock(8)
    identity.build((None, 6, 6, 8))
    assert identity.shortcut is None


def test_resnet_pp_block_with_silent_branch_is_selu_of_input():
    block = layers.ResNetPPBlock(4, residual_scale_init=0.0)
    x = RNG.normal(size=(2, 5, 5, 4)).astype("float32")
    np.testing.assert_allclose(
        _np(block(x)),
        _np(keras.activations.selu(x)),
        rtol=1e-6,
    )


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"filters": 0}, "filters"),
        ({"filters": 8, "strides": 3}, "strides"),
        ({"filters": 8, "residual_scale_init": -0.1}, "residual_scale_init"),
    ],
)
def test_resnet_pp_block_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        layers.ResNetPPBlock(**kwargs)


# --- FRN / TLU ------------------------------------------------------------------


def test_frn_matches_explicit_formula():
    layer = layers.FRN(epsilon=1e-6)
    x = RNG.normal(size=(2, 4, 5, 3)).astype("float32") * 3.0
    layer.build(x.shape)
    _randomise(layer, seed=4)
    gamma, beta, tau = (_np(v) for v in (layer.gamma, layer.beta, layer.tau))
    nu2 = (x**2).mean(axis=(1, 2), keepdims=True)
    expected = np.maximum(gamma * x / np.sqrt(nu2 + 1e-6) + beta, tau)
    np.testing.assert_allclose(_np(layer(x)), expected, rtol=1e-5, atol=1e-6)


def test_frn_is_invariant_to_input_scale_per_example():
    """``FRN(s·x) = FRN(x)`` per example, up to float32 rounding only.

    The scales are powers of two, so ``s·x``, ``s²·ν²`` and ``rsqrt`` scale
    exactly in float32; ε (which does not scale: the output is
    ``x / sqrt(ν² + ε/s²)``) is set below the rounding of ``s²·ν²``. What is
    left is a few ulps of ``rsqrt``: rtol = 4 float32 eps (the old test, at
    the default ε = 1e-6 and s = 0.1, failed for draws with a small ν²)."""
    layer = layers.FRN(epsilon=1e-30)
    x = np.random.default_rng(11).normal(size=(2, 4, 4, 3)).astype("float32")
    scaled = x * np.array([8.0, 0.125], "float32")[:, None, None, None]
    np.testing.assert_allclose(_np(layer(scaled)), _np(layer(x)),
                               rtol=4 * np.finfo(np.float32).eps, atol=0.0)


def test_frn_refuses_a_single_spatial_position_and_accepts_unknown_sizes():
    """Over one position (1x1) ν² = x² and FRN is γ·sign(x) + β: refused at build,
    naming the layer and the shape. Unknown sizes (None) are built as before, and
    an input found 1x1 at a call is refused there."""
    for shape in [(2, 1, 1, 3), (None, 1, 1, 3), (None, 1, 3)]:
        with pytest.raises(ValueError, match=r"FRN 'frn': `inputs` must have more than one "
                           r"spatial position: .*sign.*" + re.escape(f"got shape {shape}.")):
            layers.FRN(name="frn").build(shape)
    for shape in [(None, None, None, 3), (None, 1, None, 3), (None, 1, 2, 3)]:
        layer = layers.FRN(name="frn")
        layer.build(shape)
        assert [v.name for v in layer.weights] == ["gamma", "beta", "tau"]
    x = np.random.default_rng(1).normal(size=(2, 1, 2, 3)).astype("float32")
    assert _np(layer(x)).shape == x.shape
    with pytest.raises(ValueError, match=r"more than one spatial position.*"
                       + re.escape("got shape (2, 1, 1, 3).")):
        layer(x[:, :, :1])  # built for (None, 1, 2, 3) above: refused at the call


def test_frn_without_tlu_has_no_tau():
    layer = layers.FRN(use_tlu=False)
    layer.build((None, 3, 3, 2))
    assert [v.name for v in layer.weights] == ["gamma", "beta"]


@FUZZ
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=5), use_tlu=st.booleans())
def test_fuzz_frn_input_rank(shape, use_tlu):
    """FRN needs a spatial axis: inputs of rank < 3 are refused at build, naming
    the layer and the shape (there ν² = x² and the output is γ·sign(x) + β), and
    so are inputs whose spatial axes all have size 1, for the same reason."""
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    layer = layers.FRN(use_tlu=use_tlu, name="frn")
    if len(shape) < 3 or set(shape[1:-1]) == {1}:
        requirement = "have rank >= 3" if len(shape) < 3 else "have more than one spatial"
        with pytest.raises(ValueError, match=rf"FRN 'frn': `inputs` must {requirement}.*"
                           + re.escape(f"got shape {tuple(shape)}.")):
            layer(x)
        return
    nu2 = (x**2).mean(axis=tuple(range(1, len(shape) - 1)), keepdims=True)
    expected = x / np.sqrt(nu2 + 1e-6)  # γ = 1, β = τ = 0 at initialisation
    expected = np.maximum(expected, 0.0) if use_tlu else expected
    np.testing.assert_allclose(_np(layer(x)), expected, rtol=1e-5, atol=1e-6)


def test_bad_frn_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        layers.FRN(epsilon=0.0)


# --- bad priors -----------------------------------------------------------------


def test_unknown_prior_name_names_the_argument():
    with pytest.raises(ValueError, match="kernel_prior"):
        layers.Dense(3, kernel_prior="gaussian")
    with pytest.raises(ValueError, match="scale_prior"):
        layers.WeightNormDense(3, scale_prior="nope")
    with pytest.raises(ValueError, match="embeddings_prior"):
        layers.Embedding(3, 2, embeddings_prior=1.0)


def test_non_positive_prior_scale_is_rejected_by_name():
    with pytest.raises(ValueError, match="`stddev`"):
        config = {"class_name": "keras_bnn>Normal", "config": {"stddev": -1.0}}
        layers.Dense(3, kernel_prior=config)


def test_regularizer_argument_is_rejected_in_favour_of_the_prior():
    with pytest.raises(ValueError, match="kernel_prior"):
        layers.Dense(3, kernel_regularizer="l2")
    with pytest.raises(ValueError, match="recurrent_kernel_prior"):
        layers.LSTM(3, recurrent_regularizer="l2")


@pytest.mark.parametrize(
    "cls, args, argument, prior, shape",
    [
        (layers.Dense, (3,), "bias_prior", priors.HeNormal(), (None, 4)),
        (layers.Conv2D, (3, 3), "kernel_prior", priors.GroupLaplace(axis=5), (None, 5, 5, 2)),
        (layers.Embedding, (5, 2), "embeddings_prior", priors.GroupLaplace(axis=2), (None, 3)),
        (layers.LSTM, (2,), "bias_prior", priors.UnitNormDirection(), (None, 3, 2)),
        (layers.WeightNormDense, (3,), "scale_prior", priors.UnitNormDirection(), (None, 4)),
        (layers.WeightNormConv2D, (3, 1), "direction_prior", priors.GroupLaplace(axis=4),
         (None, 3, 3, 2)),
        (layers.FRN, (), "gamma_prior", priors.HeNormal(), (None, 3, 3, 2)),
        (layers.ResNetPPBlock, (4,), "bias_prior", priors.HeNormal(), (None, 3, 3, 4)),
    ],
)
def test_prior_of_wrong_rank_fails_at_build_naming_the_argument(cls, args, argument, prior, shape):
    layer = cls(*args, **{argument: prior})
    with pytest.raises(ValueError, match=f"`{argument}`"):
        layer.build(shape)
