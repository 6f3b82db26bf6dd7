"""The prior predictive check of Wenzel et al. (2020), section 5.

For draws ``θ_s ~ p(θ)`` it computes the class distribution the network
predicts on average over inputs, ``E_x[p(y|x, θ_s)]``. A sensible prior gives
draws that spread their mass over the classes; the paper's ``N(0, I)`` prior
on a ResNet-20 gives draws that each put almost all mass on one class.
A categorical head (K logits) gives K classes, a Bernoulli head (one logit,
p(y=1) = sigmoid) the two outcomes [p(y=0), p(y=1)]; a per-position head
(a tagger's ``[N, T, K]``) averages over its (unmasked) positions.
"""

import keras
import numpy as np
from keras import ops

from keras_bnn import loss_checks
from keras_bnn import priors as priors_lib
from keras_bnn.keras_private import get_keras_mask  # as Keras' losses read it
from keras_bnn.likelihoods import LIKELIHOODS, check_units, from_loss
from keras_bnn.validation import argument_error, check_choice, check_int, check_seed

_OWNER = "prior_predictive"


def _draw_seeds(seed, draw):
    """A seed generator whose state is a pure function of (seed, draw)."""
    state = np.random.SeedSequence([seed, draw]).generate_state(1)
    return keras.random.SeedGenerator(int(state[0] & 0x7FFFFFFF))


def prior_predictive(model, x, num_samples, seed=0, batch_size=256, likelihood=None,
                     mask=None):
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

        P[s, c] = (1/M) Σ_m p(y_m = c | x, θ_s),

    the mean over the M scored positions m: the N examples of a head
    ``(batch, units)``, or their positions of a per-position head
    ``(batch, ..., units)`` (a tagger's tokens) where ``mask`` (else the
    output's Keras mask, as after ``Embedding(mask_zero=True)``) is True.
    ``p = softmax(logits)`` for a categorical head; for a Bernoulli head (one
    logit) ``[p(y=0), p(y=1)] = [sigmoid(−f), sigmoid(f)]``. For
    weight-normalised layers the scale ``φ_s`` and direction ``φ_d`` are
    drawn from their priors and the effective weight ``φ_s·φ_d/‖φ_d‖``
    follows from them. The model's weights are restored afterwards, also
    when an error is raised.

    Args:
        model: a built Keras model whose output is logits ``(batch, ..., units)``.
        x: inputs, an array (or nested structure of arrays) with the examples
            along the first axis.
        num_samples: S >= 1, the number of prior draws.
        seed: int; equal seeds give equal results.
        batch_size: examples per forward pass.
        likelihood: ``"categorical"`` (K >= 2 logits) or ``"bernoulli"``
            (one logit); None reads it from the model's compiled loss
            (:func:`keras_bnn.likelihoods.from_loss`), else from the units:
            ``"bernoulli"`` for one, ``"categorical"`` otherwise.
        mask: None, or booleans (or 0/1) of the output's positions' shape
            ``(N, ...)`` (``x != 0`` for a padded tagger): the positions
            averaged over. None takes the output's Keras mask, else every
            position.

    Returns:
        ``np.ndarray`` of shape ``(S, K)`` (``(S, 2)`` for a Bernoulli head,
        columns p(y=0), p(y=1)); each row sums to 1.

    Raises:
        ValueError: if ``num_samples`` or ``batch_size`` is not a positive
            integer, ``seed`` is not an int in [0, 2³¹ − 1], ``x`` is not
            arrays or holds no examples, the model has no trainable weight
            with a prior, it has more than one output, ``likelihood`` is not
            one of those above or does not fit the output's units (a
            Gaussian head, given or compiled, has no class distribution),
            ``mask`` is not booleans of the output's positions' shape or
            selects no position, the model outputs probabilities (a softmax
            or sigmoid head) instead of logits, or a draw's logits are NaN
            or +Inf (its forward pass overflowed: no class distribution to
            report).
    """
    num_samples = check_int(num_samples, "num_samples", 1, owner=_OWNER)
    batch_size = check_int(batch_size, "batch_size", 1, owner=_OWNER)
    seed = check_seed(seed, owner=_OWNER)
    leaves = keras.tree.flatten(x)
    if not leaves or min(np.ndim(leaf) for leaf in leaves) < 1:
        raise argument_error("x", "be an array (or a nested structure of arrays) with the "
                             "examples along the first axis", x, _OWNER,
                             got=type(x).__name__)
    num_examples = len(leaves[0])
    if num_examples == 0:
        raise ValueError("`x` must hold at least one example.")
    likelihood = _class_likelihood(model, likelihood)
    mask = _checked_mask(mask, num_examples)
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
    head = (likelihood, mask)
    try:
        for draw in range(num_samples):
            seeds = _draw_seeds(seed, draw)
            for variable, prior in prior_variables:
                value = prior.sample(tuple(variable.shape), seed=seeds)
                variable.assign(ops.cast(value, variable.dtype))
            results.append(_mean_probabilities(model, x, num_examples, batch_size, head))
            _refuse_non_finite(results[-1], draw, model)
    finally:
        for (variable, _), value in zip(prior_variables, saved):
            variable.assign(value)
    return np.stack(results)


def _class_likelihood(model, likelihood):
    """The likelihood given, else the compiled loss's (None: read from the units later)."""
    if likelihood is None:
        likelihood = from_loss(getattr(model, "loss", None))
        got = f"'gaussian' (from model {model.name!r}'s compiled loss)"
    else:
        likelihood = check_choice(likelihood, "likelihood", LIKELIHOODS, owner=_OWNER)
        got = repr(likelihood)
    if likelihood == "gaussian":
        raise argument_error(
            "likelihood", "be 'categorical' or 'bernoulli' (or None): prior_predictive "
            "reports class distributions, and a Gaussian head [mean, log variance] has "
            "none; pass likelihood= if the compiled loss misnames the head", None, _OWNER,
            got=got)
    return likelihood


def _checked_mask(mask, num_examples):
    """``mask`` as a boolean array of ``num_examples`` rows, or None."""
    if mask is None:
        return None
    values = np.asarray(mask)
    if values.ndim < 1 or len(values) != num_examples:
        raise argument_error("mask", f"have the output's positions' shape (N, ...), N = "
                             f"{num_examples} examples of `x`", None, _OWNER,
                             got=f"shape {values.shape}")
    if values.dtype != bool:
        if not np.isin(values, (0, 1)).all():
            raise argument_error("mask", "be booleans (True = averaged over), or numbers 0/1",
                                 None, _OWNER, got=f"values {np.unique(values)[:5]}")
        values = values.astype(bool)
    if not values.any():
        raise argument_error("mask", "select at least one position", None, _OWNER,
                             got="no True entry")
    return values


def _mean_probabilities(model, x, num_examples, batch_size, head):
    """``(1/M) Σ_m p(y_m | x, θ)`` over the scored positions, in float64."""
    likelihood, mask = head
    total, count = None, 0
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
        units = logits.shape[-1] if len(logits.shape) >= 2 else None
        kind = likelihood or ("bernoulli" if units == 1 else "categorical")
        if units is None or units < 1:
            raise ValueError(
                "prior_predictive needs a model whose output is logits of shape "
                f"(batch, ..., units); got output shape {tuple(logits.shape)}.")
        check_units(kind, units)
        if total is None:
            _refuse_squashed(model, logits, kind)
        selected = _selected(logits, mask, start)
        if kind == "bernoulli":
            logits = ops.concatenate([-logits, logits], axis=-1)
            probabilities = ops.sigmoid(ops.cast(logits, "float32"))
        else:
            probabilities = ops.softmax(ops.cast(logits, "float32"), axis=-1)
        probabilities = ops.convert_to_numpy(probabilities)
        rows = probabilities.reshape(-1, probabilities.shape[-1])
        if selected is not None:
            rows, count = rows[selected.reshape(-1)], count + int(selected.sum())
        else:
            count += len(rows)
        batch_sum = rows.astype(np.float64).sum(axis=0)
        total = batch_sum if total is None else total + batch_sum
    if count == 0:
        raise argument_error("x", "leave at least one position unmasked (the output's Keras "
                             "mask is False everywhere)", None, _OWNER,
                             got="inputs of padding only")
    return total / count


def _selected(logits, mask, start):
    """The batch's scored positions (booleans of ``logits``' shape without units), or None."""
    positions = tuple(logits.shape[:-1])
    if mask is None:
        keras_mask = get_keras_mask(logits)
        return None if keras_mask is None else ops.convert_to_numpy(keras_mask).astype(bool)
    selected = mask[start:start + positions[0]]
    if selected.shape != positions:
        raise argument_error("mask", "have the output's positions' shape (N, ...): "
                             f"{(len(mask),) + positions[1:]}", None, _OWNER,
                             got=f"shape {mask.shape}")
    return selected


def _refuse_squashed(model, logits, likelihood):
    """Raises for an output of probabilities: softmax or sigmoid would be applied twice."""
    if likelihood == "categorical":
        _refuse_probabilities(ops.convert_to_numpy(logits))
    for layer in loss_checks.output_layers(model):
        loss_checks.check_logit_layer(model, layer, _OWNER, ("softmax", "sigmoid"))


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
