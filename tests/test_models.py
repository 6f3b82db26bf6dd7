"""Tests of the keras_bnn.models builders."""

import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from keras_bnn import models, priors
from keras_bnn.layers import ResNetPPBlock

RNG = np.random.default_rng(0)
FUZZ = settings(max_examples=40, deadline=None, derandomize=True)  # reproducible
IMAGES = RNG.normal(size=(4, 32, 32, 3)).astype("float32")

BUILDERS = {
    "resnet_pp": (lambda: models.resnet_pp((32, 32, 3), 10, depth=20, width=4), IMAGES),
    "resnet20_frn": (lambda: models.resnet20_frn((32, 32, 3), 10, width=4), IMAGES),
    "mlp": (
        lambda: models.mlp((6, 5), 3, hidden=(8, 8)),
        RNG.normal(size=(4, 6, 5)).astype("float32"),
    ),
    "cnn": (
        lambda: models.cnn((28, 28, 1), 10, filters=(4, 8), dense=16),
        RNG.normal(size=(4, 28, 28, 1)).astype("float32"),
    ),
    "cnn_lstm": (
        lambda: models.cnn_lstm(
            50, sequence_length=20, embedding_dim=8, filters=4, lstm_units=5
        ),
        RNG.integers(0, 50, size=(4, 20)).astype("int32"),
    ),
}


def _losses(model):
    return np.array([float(keras.ops.convert_to_numpy(loss)) for loss in model.losses])


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_gives_a_bayesian_model_with_a_prior_on_every_weight(name):
    make, x = BUILDERS[name]
    # Seeded: an unseeded cnn_lstm draw (it depends on the tests run before)
    # once gave 8 logits that were all positive.
    keras.utils.set_random_seed(0)
    model = make()
    assert isinstance(model, models.BayesianModel)
    assert model.trainable_weights
    for variable in model.trainable_weights:
        assert isinstance(variable.regularizer, priors.Prior), variable.path
    assert len(model.losses) == len(model.trainable_weights)
    logits = keras.ops.convert_to_numpy(model(x))
    assert logits.shape == (len(x), model.output_shape[-1])
    # Logits, not probabilities: some are negative.
    assert np.isfinite(logits).all() and (logits < 0).any()


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_model_saves_and_loads(name, tmp_path):
    make, x = BUILDERS[name]
    model = make()
    rng = np.random.default_rng(1)
    for variable in model.weights:  # move away from the initialisation
        noise = rng.normal(scale=0.05, size=variable.shape).astype(variable.dtype)
        variable.assign(variable + noise)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert isinstance(loaded, models.BayesianModel)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    np.testing.assert_array_equal(_losses(loaded), _losses(model))


def test_resnet_pp_forward_and_backward_pass():
    model = models.resnet_pp((32, 32, 3), 10, depth=20)
    labels = np.arange(4) % 10
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(IMAGES, training=True)) + tf.add_n(model.losses)
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(float(loss))
    for variable, grad in zip(model.trainable_variables, grads):
        assert grad is not None, variable.path
        grad = grad.numpy()
        assert np.isfinite(grad).all(), variable.path
    # Fixup-style init keeps every weight trainable: the likelihood gradient
    # (without the prior term) reaches the first convolution of every branch.
    with tf.GradientTape() as tape:
        nll = loss_fn(labels, model(IMAGES, training=True))
    first_convs = [v for v in model.trainable_variables if "conv1/direction" in v.path]
    assert len(first_convs) == 6
    for grad in tape.gradient(nll, first_convs):
        assert np.abs(grad.numpy()).max() > 0


_ANY_SIZE_SCRIPT = """
import numpy as np
from keras_bnn import models
for build in (models.resnet_pp, models.resnet20_frn):
    model = build((None, None, 3), 3, depth=8 if build is models.resnet20_frn else 11, width=1)
    for size in ((7, 5), (8, 8)):
        x = np.random.default_rng(0).normal(size=(2, *size, 3)).astype("float32")
        y = np.asarray(model(x))
        assert y.shape == (2, 3) and np.isfinite(y).all(), (build.__name__, size, y)
print("OK")
"""


@pytest.mark.slow  # for the default suite's 20 minutes on 2 cores
def test_resnets_of_any_height_and_width_build_under_jax():
    """``input_shape=(None, None, 3)`` (the builders' message: "height and width may
    be None") failed under JAX: tracing a stride-2 ResNetPPBlock gave the branch
    height ``ceil(H/2)`` and the projection ``(H-1)//2 + 1``, not known to be
    equal, and the sum raised. The block now gives its output shape."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", _ANY_SIZE_SCRIPT], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
    block = ResNetPPBlock(8, strides=2)
    assert block.compute_output_shape((None, 7, None, 4)) == (None, 4, None, 8)


def _pre_head_rms(depth, residual_scale_init):
    keras.utils.set_random_seed(depth)
    model = models.resnet_pp(
        (32, 32, 3), 10, depth=depth, width=8, residual_scale_init=residual_scale_init
    )
    features = keras.Model(model.input, model.get_layer("pool").input)
    return float(np.sqrt(np.mean(keras.ops.convert_to_numpy(features(IMAGES)) ** 2)))


def test_resnet_pp_activation_scale_stays_bounded_from_depth_20_to_56():
    # Depth 20 → 56 adds 12 blocks. Along the identity path each block applies
    # SELU, whose slope on positive inputs is λ ≈ 1.0507, so even with silent
    # branches the RMS may grow by up to λ^12 ≈ 1.81; Fixup branches
    # (φ_s = 0.1) add ~1% variance per block, a further factor ≤ 1.01^6 ≈ 1.06.
    # Bound: 2. Without Fixup (residual_scale_init = 1) it grows about 4x.
    shallow = _pre_head_rms(20, 0.1)
    deep = _pre_head_rms(56, 0.1)
    assert 0.3 < shallow < 3.0 and 0.3 < deep < 3.0
    assert deep / shallow < 2.0
    # The residual branches themselves add little at depth 56: within 10% of
    # a network whose branches are silent.
    assert deep / _pre_head_rms(56, 0.0) < 1.1


def test_resnet_pp_structure():
    model = models.resnet_pp((32, 32, 3), 10, depth=56, width=4)
    blocks = [layer for layer in model.layers if isinstance(layer, ResNetPPBlock)]
    assert len(blocks) == 18  # 3 stages of (56 - 2) / 9 = 6
    assert [b.strides for b in blocks].count(2) == 2
    assert model.get_layer("pool").input.shape[1:] == (8, 8, 64)


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: models.resnet_pp((32, 32, 3), 10, depth=21), "depth"),
        (lambda: models.resnet_pp((32, 32, 3), 10, depth=2), "depth"),
        (lambda: models.resnet20_frn((32, 32, 3), 10, depth=21), "depth"),
        (lambda: models.resnet_pp((32, 32, 3), 0), "num_classes"),
        (lambda: models.resnet20_frn((32, 32, 3), 10, width=-4), "width"),
        (lambda: models.mlp((3,), 2, hidden=(4, 0)), r"hidden\[1\]"),
        (lambda: models.cnn_lstm(0), "vocab_size"),
        (lambda: models.cnn((28, 28, 1), 10, filters=(8, 0)), r"filters\[1\]"),
        (lambda: models.cnn((784,), 10), "input_shape"),
        (lambda: models.mlp((3,), 2, kernel_prior="flat"), "kernel_prior"),
        (lambda: models.resnet_pp((32, 32, 3), 10, scale_prior="nope"), "scale_prior"),
        # The reviewer's cases, once TypeErrors or Keras' shape errors:
        (lambda: models.mlp(784, 10), "input_shape"),
        (lambda: models.mlp((784,), 10, hidden=128), "`hidden` must be a list of layer widths"),
        (lambda: models.resnet_pp((32, 32), 10), "input_shape"),
        (lambda: models.resnet20_frn((32, 32), 10), "input_shape"),
        # Its last stage 1x1, where FRN is a sign function:
        (lambda: models.resnet20_frn((4, 4, 3), 10), r"resnet20_frn: `input_shape` must have a "
                                                     r"height or width >= 5: .* here 1x1"),
        (lambda: models.cnn((3, 3, 1), 10), r"input_shape` must have a height and width >= "
                                            r"2\^len\(filters\) = 4"),
        (lambda: models.cnn_lstm(100, sequence_length=6), "`sequence_length` must be >= "
                                                          "kernel_size - 1 \\+ pool_size = 8"),
    ],
)
def test_builder_bad_arguments(build, argument):
    with pytest.raises(ValueError, match=argument):
        build()


def test_resnet20_frn_of_any_size_refuses_images_too_small_at_a_call():
    """Height and width None build; 4x4 images, whose last stage is 1x1 (FRN a
    sign function there), are refused by its first FRN, 6x4 ones are not."""
    model = models.resnet20_frn((None, None, 3), 3, depth=8, width=1)
    assert model(np.zeros((2, 6, 4, 3), "float32")).shape == (2, 3)
    with pytest.raises(ValueError, match=r"FRN 'stage3_block1_a_frn': `inputs` must have more "
                       r"than one spatial position"):
        model(np.zeros((2, 4, 4, 3), "float32"))


def _is_size(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _assert_names(error, builder, argument):
    """The one message form: "<builder>: `argument` must ...; got ...."."""
    assert re.fullmatch(rf"{builder}: `{re.escape(argument)}` must .+; got .+\.", str(error),
                        flags=re.DOTALL), str(error)


#: Image shapes of sizes 1..9 (height and width sometimes None), and bad shapes:
#: an int, a string, None, empty, sizes 0, -1, 2.5, "3", True, or another rank.
sizes = st.integers(1, 9)
images = st.tuples(sizes, sizes, st.integers(1, 3))
shapes = st.one_of(
    images, images.map(list), st.tuples(sizes | st.none(), sizes | st.none(), st.integers(1, 3)),
    st.lists(st.one_of(st.integers(-1, 9), st.none(), st.sampled_from([2.5, "3", True])),
             max_size=4),
    st.sampled_from([784, "28", None, (784,), (6, 5)]),
)
IMAGE_BUILDERS = {
    "mlp": lambda shape, pools: models.mlp(shape, 3, hidden=(2,)),
    "cnn": lambda shape, pools: models.cnn(shape, 3, filters=(2,) * pools, kernel_size=3,
                                           dense=2),
    "resnet_pp": lambda shape, pools: models.resnet_pp(shape, 3, depth=11, width=1),
    "resnet20_frn": lambda shape, pools: models.resnet20_frn(shape, 3, depth=8, width=1),
}


@pytest.mark.parametrize("builder", sorted(IMAGE_BUILDERS))
@settings(FUZZ, max_examples=25)
@given(shape=shapes, pools=st.integers(0, 2))
def test_fuzz_builder_input_shape(builder, shape, pools):
    """A builder takes an ``input_shape`` of its rank with sizes >= 1 (None
    for the ResNets' height and width; the cnn's poolings need sizes >= 2^pools)
    and refuses any other with a ValueError naming ``input_shape``; resnet20_frn
    also refuses height and width both <= 4, whose last stage would be 1x1."""
    fixed = isinstance(shape, (tuple, list)) and len(shape) > 0 and all(map(_is_size, shape))
    if builder == "mlp":
        usable = fixed
    elif builder == "cnn":
        usable = fixed and len(shape) == 3 and min(shape[:2]) >= 2**pools
    else:
        usable = (isinstance(shape, (tuple, list)) and len(shape) == 3 and _is_size(shape[2])
                  and all(size is None or _is_size(size) for size in shape[:2]))
        if builder == "resnet20_frn":  # a last stage (1/4 of the size) of 1x1 is refused
            usable = usable and (None in shape[:2] or max(shape[:2]) > 4)
    try:
        model = IMAGE_BUILDERS[builder](shape, pools)
    except ValueError as error:
        _assert_names(error, builder, "input_shape")
        assert not usable
        return
    assert usable
    assert model.input_shape == (None, *shape) and model.output_shape == (None, 3)


@FUZZ
@given(sequence_length=st.integers(1, 12), kernel_size=st.integers(1, 6),
       pool_size=st.integers(1, 6))
def test_fuzz_cnn_lstm_sequence_length(sequence_length, kernel_size, pool_size):
    """The convolution leaves L - k + 1 steps and the pooling needs p of them:
    L < k - 1 + p is refused naming ``sequence_length`` and the minimum."""
    shortest = kernel_size - 1 + pool_size
    try:
        model = models.cnn_lstm(10, sequence_length=sequence_length, embedding_dim=2,
                                filters=2, kernel_size=kernel_size, pool_size=pool_size,
                                lstm_units=2)
    except ValueError as error:
        _assert_names(error, "cnn_lstm", "sequence_length")
        assert f"= {shortest} " in str(error)
        assert sequence_length < shortest
        return
    assert sequence_length >= shortest
    tokens = np.random.default_rng(0).integers(0, 10, size=(2, sequence_length)).astype("int32")
    assert tuple(model(tokens).shape) == (2, 2)


@FUZZ
@given(hidden=st.one_of(st.lists(st.integers(-1, 3), max_size=3),
                        st.lists(st.integers(1, 3), max_size=3).map(tuple),
                        st.integers(-1, 128), st.sampled_from(["8", None, 2.0, True, {4: 4}])))
def test_fuzz_mlp_hidden(hidden):
    """``hidden`` is a tuple or list of widths >= 1 (an int such as 128 is refused,
    naming ``hidden`` and what it must be, not a TypeError)."""
    try:
        model = models.mlp((3,), 2, hidden=hidden)
    except ValueError as error:
        widths = isinstance(hidden, (tuple, list))
        _assert_names(error, "mlp", "hidden" + (f"[{[_is_size(w) for w in hidden].index(False)}]"
                                                if widths else ""))
        assert not widths or not all(map(_is_size, hidden))
        return
    assert isinstance(hidden, (tuple, list)) and all(map(_is_size, hidden))
    assert [layer.units for layer in model.layers[1:]] == [*hidden, 2]


def test_builder_prior_arguments_reach_every_layer():
    model = models.resnet20_frn(
        (16, 16, 3),
        5,
        width=4,
        kernel_prior=priors.Normal(0.0, 2.0),
        bias_prior=priors.Laplace(0.5),
    )
    kernels = [v for v in model.trainable_weights if v.path.endswith("/kernel")]
    biases = [v for v in model.trainable_weights if v.path.endswith("/bias")]
    assert len(kernels) == len(biases) == 19 + 2 + 1  # 19 convs, 2 projections, 1 dense
    assert {(type(v.regularizer), v.regularizer.stddev) for v in kernels} == {(priors.Normal, 2.0)}
    assert {(type(v.regularizer), v.regularizer.scale) for v in biases} == {(priors.Laplace, 0.5)}


@pytest.mark.parametrize("order", ["keras_bnn first",
                                   pytest.param("keras first", marks=pytest.mark.slow)])
def test_a_saved_model_loads_in_a_fresh_process_after_import_keras_bnn(order, tmp_path):
    """``import keras_bnn`` imports no Keras (the CLI answers without
    TensorFlow), yet the package's classes must be registered by the time
    ``keras.saving.load_model`` runs, whichever is imported first."""
    import subprocess
    import sys

    model = models.mlp((4,), 3, hidden=(5,))
    model.compile(loss="mse", train_size=10)
    model.save(tmp_path / "model.keras")
    imports = "import keras_bnn, keras" if order == "keras_bnn first" else \
        "import keras, keras_bnn"
    code = (f"{imports}; m = keras.saving.load_model({str(tmp_path / 'model.keras')!r}); "
            "print(type(m).__name__, len(m.losses))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["BayesianModel", "4"]


@pytest.mark.parametrize("first", ["kb.priors.HeNormal()", "kb.samplers.ATMC",
                                   "kb.callbacks.CollectSamples",
                                   "__import__('keras_bnn.priors').priors.StudentT()"])
def test_any_submodule_can_be_the_first_name_used(first, tmp_path):
    """The submodule that imports Keras first is half-executed when Keras
    finishes loading; registration must wait until it is complete (it used to
    raise ``AttributeError: partially initialized module``), and still
    register every class before ``load_model``."""
    import subprocess
    import sys

    model = models.mlp((4,), 3, hidden=(5,))
    model.compile(loss="mse", train_size=10)
    model.save(tmp_path / "model.keras")
    code = (f"import keras_bnn as kb; {first}; import keras; "
            f"m = keras.saving.load_model({str(tmp_path / 'model.keras')!r}); "
            "print(type(m).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "BayesianModel"
