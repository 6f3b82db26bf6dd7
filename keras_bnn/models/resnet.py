"""Residual networks for 32x32 images: ResNet++ (ATMC) and ResNet-20-FRN.

Both have a stem convolution, three stages at full, half and quarter
resolution (the first block of stages 2 and 3 downsamples with stride 2 and
doubles the width), global average pooling and a linear head producing
logits.
"""

import keras

from keras_bnn import layers
from keras_bnn.models.bayesian_model import BayesianModel
from keras_bnn.validation import argument_error, check_int, check_shape

_STAGES = 3


def _blocks_per_stage(depth, layers_per_block, num_classes, width, builder):
    """Checks a builder's sizes.

    Returns:
        ``(k, num_classes, width)`` as ints, ``k`` in
        ``depth = layers_per_block · 3 · k + 2``.

    Raises:
        ValueError: naming ``depth``, ``num_classes`` or ``width``.
    """
    num_classes = check_int(num_classes, "num_classes", 1, owner=builder)
    width = check_int(width, "width", 1, owner=builder)
    per_depth = layers_per_block * _STAGES
    blocks, remainder = divmod(check_int(depth, "depth", owner=builder) - 2, per_depth)
    if remainder or blocks < 1:
        examples = ", ".join(str(per_depth * k + 2) for k in (1, 2, 3, 6))
        raise argument_error("depth", f"be {per_depth}k+2 with k >= 1 ({examples}, ...)", depth,
                             builder)
    return blocks, num_classes, width


def _image_shape(input_shape, builder):
    """``input_shape`` as a tuple ``(H, W, C)``; H and W may be None (any size).

    Raises:
        ValueError: naming ``input_shape`` for anything else.
    """
    return check_shape(input_shape, "input_shape", 3, "(height, width, channels), channels "
                       "last, of ints >= 1 (height and width may be None: any size)", builder,
                       open_axes=(0, 1))


def _check_frn_resolution(input_shape, builder):
    """Refuses an ``input_shape`` whose last stage would be 1x1 (FRN there is a sign function).

    Stages 2 and 3 each halve the size ("same" padding), so the last stage is
    ``ceil(H/4) x ceil(W/4)``; a size None (any) is accepted.

    Raises:
        ValueError: naming ``input_shape`` and the smallest allowed size.
    """
    factor = 2 ** (_STAGES - 1)
    if None not in input_shape[:2] and max(input_shape[:2]) <= factor:
        raise argument_error(
            "input_shape", f"have a height or width >= {factor + 1}: the last stage works at "
            f"ceil(H/{factor}) x ceil(W/{factor}), here 1x1, where FRN normalises over a "
            "single position and its output is γ·sign(x) + β", input_shape, builder)


def _stage_blocks(width, blocks):
    """(name prefix, filters, strides) of every block: stage s has ``width·2^s``
    filters and its first block (stages 2 and 3) downsamples with stride 2."""
    for stage in range(_STAGES):
        for block in range(blocks):
            yield (f"stage{stage + 1}_block{block + 1}", width * 2**stage,
                   2 if stage > 0 and block == 0 else 1)


def resnet_pp(
    input_shape,
    num_classes,
    depth=20,
    width=16,
    residual_scale_init=0.1,
    direction_prior="unit_norm_direction",
    scale_prior="group_laplace",
    bias_prior="normal",
    name=None,
):
    """Builds ResNet++ (Heek & Kalchbrenner, 2019): BatchNorm-free, SELU.

    Stem ``WeightNormConv2D(width, 3x3)`` + SELU, then three stages of ``k``
    :class:`~keras_bnn.layers.ResNetPPBlock` bottleneck blocks (1x1–3x3–1x1,
    three weight layers each) with bottleneck widths ``width·(1, 2, 4)`` and
    outputs four times that, global average pooling and a
    :class:`~keras_bnn.layers.WeightNormDense` head. Counting the stem and the
    head, ``depth = 9k + 2``: 20 (k=2), 29, 38, 47, 56 (k=6), 110, 164, ...
    (the ResNet-164 layout of He et al.'s bottleneck CIFAR ResNets). Every
    weight is weight-normalised and carries the direction, scale and bias
    priors.

    The default priors' prior predictive is degenerate, by the prior, not by
    its sampler: a scale is Laplace(0, 5) (each ``φ_s`` is a group of one),
    of RMS 5·√2 ≈ 7.1, so each weight layer multiplies the activations' RMS
    by about 7. ``kb.prior_predictive(resnet_pp((16, 16, 3), 10, width=4), x,
    20)`` (x: 128 standard normal images, ``np.random.default_rng(0)``) gives
    draws that put on average 0.89 of their mass on one class (0.55 of them
    over 0.99), with logits of RMS ~1e12. Over 20 other draws, the scales
    drawn by ``GroupLaplace.sample`` give 0.93 and numpy's
    ``laplace(scale=5)`` 0.94: the same. ``scale_prior=GroupLaplace(0.2)``
    gives 0.32 (uniform: 0.1).

    Args:
        input_shape: ``(H, W, C)``, channels last (e.g. ``(32, 32, 3)``).
        num_classes: number of output logits.
        depth: ``9k + 2`` weight layers.
        width: bottleneck width of the first stage (and the stem's channels).
            The paper's CIFAR-10 ResNet-56 doubles the usual 16 to 32.
        residual_scale_init: initial scale of each branch's last convolution
            (Fixup-style; see :class:`~keras_bnn.layers.ResNetPPBlock`).
        direction_prior: prior on every direction ``φ_d`` (default
            ``UnitNormDirection``).
        scale_prior: prior on every scale ``φ_s`` (default ``GroupLaplace(5)``).
        bias_prior: prior on every bias (default ``Normal(0, 1)``).
        name: model name (default ``"resnet_pp<depth>"``).

    Returns:
        A :class:`keras_bnn.BayesianModel` whose outputs are logits (no
        softmax): compile it with a ``from_logits=True`` loss.

    Raises:
        ValueError: naming the argument, for a depth that is not 9k+2, a
            non-positive ``num_classes``/``width``, an ``input_shape`` that
            is not ``(H, W, C)``, or an unknown prior.
    """
    blocks, num_classes, width = _blocks_per_stage(depth, 3, num_classes, width, "resnet_pp")
    input_shape = _image_shape(input_shape, "resnet_pp")
    priors = dict(
        direction_prior=direction_prior, scale_prior=scale_prior, bias_prior=bias_prior
    )
    inputs = keras.Input(shape=input_shape, name="images")
    x = layers.WeightNormConv2D(
        width, 3, padding="same", activation="selu", name="stem", **priors
    )(inputs)
    for prefix, bottleneck, strides in _stage_blocks(width, blocks):
        x = layers.ResNetPPBlock(
            4 * bottleneck,
            bottleneck_filters=bottleneck,
            strides=strides,
            residual_scale_init=residual_scale_init,
            name=prefix,
            **priors,
        )(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    logits = layers.WeightNormDense(num_classes, name="logits", **priors)(x)
    return BayesianModel(inputs, logits, name=name or f"resnet_pp{depth}")


def resnet20_frn(
    input_shape,
    num_classes,
    width=16,
    depth=20,
    kernel_prior="he_normal",
    bias_prior="normal",
    name=None,
):
    """Builds the cold-posterior ResNet-20 with FRN instead of BatchNorm.

    ResNet v1 (He et al., 2016) with basic blocks, every BatchNorm replaced by
    :class:`~keras_bnn.layers.FRN` and every ReLU by a TLU (Wenzel et al.,
    2020): stem ``conv3x3–FRN+TLU``; blocks
    ``conv3x3–FRN+TLU–conv3x3–FRN (+ shortcut) – TLU``, the shortcut being a
    strided ``conv1x1–FRN`` projection where a stage starts; global average
    pooling; dense head. Widths ``width·(1, 2, 4)``; ``depth = 6k + 2``
    (20, 32, 44, 56, ...).

    Args:
        input_shape: ``(H, W, C)``, channels last.
        num_classes: number of output logits.
        width: channels of the first stage.
        depth: ``6k + 2`` weight layers (default 20).
        kernel_prior: prior on every conv and dense kernel (default
            ``HeNormal(1.0)``; ``Normal(0, 1)`` is the paper's prior whose
            prior predictive collapses, see :func:`keras_bnn.prior_predictive`).
        bias_prior: prior on every bias (default ``Normal(0, 1)``).
        name: model name (default ``"resnet<depth>_frn"``).

    FRN parameters keep the layer's default priors (``γ ~ N(1, 1)``,
    ``β, τ ~ N(0, 1)``).

    Returns:
        A logits :class:`keras_bnn.BayesianModel`, as :func:`resnet_pp`.

    Raises:
        ValueError: as :func:`resnet_pp`, with ``depth = 6k + 2``; and for
            an ``input_shape`` of height and width both <= 4, whose last
            stage would be 1x1 (FRN over one position is a sign function).
            With height or width None, such images are refused at a call,
            by the first :class:`~keras_bnn.layers.FRN` that gets 1x1.
    """
    blocks, num_classes, width = _blocks_per_stage(depth, 2, num_classes, width,
                                                   "resnet20_frn")
    input_shape = _image_shape(input_shape, "resnet20_frn")
    _check_frn_resolution(input_shape, "resnet20_frn")
    priors = dict(kernel_prior=kernel_prior, bias_prior=bias_prior)

    def conv_frn(x, filters, kernel_size, strides, use_tlu, name):
        x = layers.Conv2D(
            filters,
            kernel_size,
            strides=strides,
            padding="same",
            kernel_initializer="he_normal",
            name=f"{name}_conv",
            **priors,
        )(x)
        return layers.FRN(use_tlu=use_tlu, name=f"{name}_frn")(x)

    inputs = keras.Input(shape=input_shape, name="images")
    x = conv_frn(inputs, width, 3, 1, True, "stem")
    for prefix, filters, strides in _stage_blocks(width, blocks):
        y = conv_frn(x, filters, 3, strides, True, f"{prefix}_a")
        y = conv_frn(y, filters, 3, 1, False, f"{prefix}_b")
        if strides != 1:
            x = conv_frn(x, filters, 1, strides, False, f"{prefix}_shortcut")
        x = keras.layers.Add(name=f"{prefix}_add")([x, y])
        x = layers.TLU(name=f"{prefix}_tlu")(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    logits = layers.Dense(num_classes, name="logits", **priors)(x)
    return BayesianModel(inputs, logits, name=name or f"resnet{depth}_frn")
