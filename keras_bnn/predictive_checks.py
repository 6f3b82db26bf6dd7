"""The prior predictive check of Wenzel et al. (2020), section 5.

For draws ``θ_s ~ p(θ)`` it computes the class distribution the network
predicts on average over inputs, ``E_x[p(y|x, θ_s)]``. A sensible prior gives
draws that spread their mass over the classes; the paper's ``N(0, I)`` prior
on a ResNet-20 gives draws that each put almost all mass on one class.
"""

import keras
import numpy as np
from keras import ops

from keras_bnn import priors as priors_lib
from keras_bnn.validation import argument_error, check_int, check_seed


def _draw_seeds(seed, draw):
    """A seed generator whose state is a pure function of (seed, draw)."""
    state = np.random.SeedSequence([seed, draw]).generate_state(1)
    return keras.random.SeedGenerator(int(state[0] & 0x7FFFFFFF))


def prior_predictive(model, x, num_samples, seed=0, batch_size=256):
    """Average predicted class distribution of networks drawn from the prior.

    For ``s = 1..S`` every trainable weight that carries a prior (a
    :class:`keras_bnn.priors.Prior` as its regularizer,
    :func:`keras_bnn.priors.prior_variables`) is set to a draw
    ``prior.sample(shape, seed=g_s)``, in the order of
    ``model.trainable_weights``, from a seed generator ``g_s`` whose initial
    state is derived deterministically from ``(seed, s)``; weights without a
    prior keep their values, and so do frozen ones (``trainable=False``, a
    pretrained trunk under a sampled head: no part of θ, which ``fit`` leaves
    as they are and whose priors are not in the potential). Then

        P[s, c] = (1/N) Σ_n softmax(model(x_n))_c,

    i.e. ``E_x[p(y | x, θ_s)]`` over the given inputs. For weight-normalised
    layers the scale ``φ_s`` and direction ``φ_d`` are drawn from their priors
    and the effective weight ``φ_s·φ_d/‖φ_d‖`` follows from them. The model's
    weights are restored afterwards, also when an error is raised.

    Args:
        model: a built Keras model whose output is logits ``(batch, classes)``.
        x: inputs, an array (or nested structure of arrays) with the examples
            along the first axis.
        num_samples: S >= 1, the number of prior draws.
        seed: int; equal seeds give equal results.
        batch_size: examples per forward pass.

    Returns:
        ``np.ndarray`` of shape ``(S, num_classes)``; each row sums to 1.

    Raises:
        ValueError: if ``num_samples`` or ``batch_size`` is not a positive
            integer, ``seed`` is not an int in [0, 2³¹ − 1], ``x`` is not
            arrays or holds no examples, the model has no trainable weight
            with a prior, it has more than one output, its output is not
            ``(batch, classes ≥ 2)``, it outputs probabilities (a softmax
            head) instead of logits, or a draw's
            logits are NaN or +Inf (its forward pass overflowed: no class
            distribution to report).
    """
    num_samples = check_int(num_samples, "num_samples", 1, owner="prior_predictive")
    batch_size = check_int(batch_size, "batch_size", 1, owner="prior_predictive")
    seed = check_seed(seed, owner="prior_predictive")
    leaves = keras.tree.flatten(x)
    if not leaves or min(np.ndim(leaf) for leaf in leaves) < 1:
        raise argument_error("x", "be an array (or a nested structure of arrays) with the "
                             "examples along the first axis", x, "prior_predictive",
                             got=type(x).__name__)
    num_examples = len(leaves[0])
    if num_examples == 0:
        raise ValueError("`x` must hold at least one example.")
    prior_variables = priors_lib.prior_variables(model)
    if not prior_variables:
        raise ValueError(
            f"Model {model.name!r} has no weight with a keras_bnn prior: put one on every "
            "trainable weight with `model = kb.bayesian(model)`, or build it from "
            "keras_bnn.layers (and build it: call it once on inputs). Frozen weights "
            "(trainable=False) are no part of θ: they keep their values."
        )

    saved = [ops.convert_to_numpy(variable.value) for variable, _ in prior_variables]
    results = []
    try:
        for draw in range(num_samples):
            seeds = _draw_seeds(seed, draw)
            for variable, prior in prior_variables:
                value = prior.sample(tuple(variable.shape), seed=seeds)
                variable.assign(ops.cast(value, variable.dtype))
            results.append(_mean_probabilities(model, x, num_examples, batch_size))
            _refuse_non_finite(results[-1], draw, model)
    finally:
        for (variable, _), value in zip(prior_variables, saved):
            variable.assign(value)
    return np.stack(results)


def _mean_probabilities(model, x, num_examples, batch_size):
    """``(1/N) Σ_n softmax(model(x_n))`` in float64."""
    total = None
    for start in range(0, num_examples, batch_size):
        batch = keras.tree.map_structure(lambda leaf: leaf[start:start + batch_size], x)
        outputs = keras.tree.flatten(model(batch, training=False))
        if len(outputs) != 1:
            raise ValueError(
                f"prior_predictive needs a model of one output; `model` has {len(outputs)}. "
                "Check one head at a time: prior_predictive(keras.Model(model.input, "
                "model.outputs[i]), x, ...) (its weights and priors are the model's)."
            )
        logits = outputs[0]
        if len(logits.shape) != 2 or logits.shape[-1] < 2:
            raise ValueError(
                "prior_predictive needs a model whose output is logits of shape "
                f"(batch, classes), classes >= 2; got output shape {tuple(logits.shape)}."
            )
        if total is None:
            _refuse_probabilities(ops.convert_to_numpy(logits))
        probabilities = ops.convert_to_numpy(ops.softmax(ops.cast(logits, "float32"), axis=-1))
        batch_sum = probabilities.astype(np.float64).sum(axis=0)
        total = batch_sum if total is None else total + batch_sum
    return total / num_examples


def _refuse_non_finite(mean_probabilities, draw, model):
    """Raises if draw ``draw``'s average class distribution is NaN.

    Its logits were NaN or +Inf: the network drawn from the prior overflowed
    its compute dtype (a float16 one under ``mixed_float16`` at 65 504), and
    softmax of such logits is NaN, not a class distribution.
    """
    if not np.all(np.isfinite(mean_probabilities)):
        raise ValueError(
            f"prior_predictive: draw {draw} from the prior gives NaN or Inf logits on `x`: "
            f"model {model.name!r} overflows its compute dtype ({model.compute_dtype}) under "
            "weights of that draw's size. Use a prior of smaller scale, or run the check "
            "under a float32 dtype policy (not mixed_float16)."
        )


def _refuse_probabilities(outputs):
    """Raises if a batch of outputs looks like probabilities, not logits.

    softmax of probabilities would squash every draw towards uniform.
    Rows in [0, 1] summing to 1 (within 1e-4) are probabilities; logits
    do that only by coincidence (all K of them in [0, 1] with sum 1).
    """
    outputs = outputs.astype(np.float64)
    if outputs.shape[-1] > 1 and np.all((outputs >= 0) & (outputs <= 1)) and np.allclose(
            outputs.sum(axis=-1), 1.0, atol=1e-4):
        raise ValueError(
            "prior_predictive needs a model that outputs logits; `model` outputs "
            "probabilities (rows in [0, 1] summing to 1: a softmax head). Pass the "
            "model without its final softmax."
        )
