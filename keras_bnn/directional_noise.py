"""The minibatch gradient noise by direction: what the per-parameter ratio cannot see.

A sampler's ``gradient_noise_ratio`` (:meth:`keras_bnn.samplers.Sampler.gradient_noise_ratios`)
is a mean over parameters, ``r_v = mean_i c_v·V_i``: the variance ``V_i``
that minibatch noise adds to parameter i's gradient, times the variable's
coefficient ``c_v`` (``h_v²/(2·γ_v·h_v·T)`` and its kin: the added variance
per step over the injected one). The bias laws that the warm-up's target
``r*`` rests on (SGHMC's ``(1 + r)·T``, ATMC's ``sqrt(1 - r)``) hold per
*direction* u of weight space, with the ratio ``r_u = uᵀ·R·u`` of the matrix

    R = diag(√c)·C·diag(√c),    C = (n·(n - b)/b)·S,

``C`` the covariance of the minibatch gradient ``G = n·∇(mean-form
potential)`` of a batch of b drawn without replacement from n, and
``S = Σ_i (∇ℓ_i - ∇ℓ̄)(∇ℓ_i - ∇ℓ̄)ᵀ/(n - 1)`` the covariance over the
training examples of their gradients ``∇ℓ_i`` (the variance of a sum of b
draws without replacement is ``b·(n - b)/n·S``). The mean of R's diagonal is
the per-parameter ratio; R's largest eigenvalue is the ratio of the noisiest
direction. On a network the noise is concentrated in a few tens of
directions (per-example gradients share those the data determine: the Fisher
information), so the top eigenvalue
can be thousands of times the mean: on the CLI's breast_cancer seed-0
chain (13 301 weights, batch 100 of 400) at its last sample, a mean of
0.005 and a top direction at 25 (README, "Noise by direction"). Along a
direction with ``r_u ≫ 1`` the minibatch noise is far above the injected
noise, so the bias laws the warm-up's target rests on do not hold there.
Measured (README): the noise widens the chain where the data decide (on
digits the samples' training NLL is 0.046 nats a row above exact HMC's,
and the full batch at the same step removes it), and the noisiest
directions turn within tens of steps as the chain moves, so a
preconditioner fixed along them does not help.

:func:`directional_noise_ratios` estimates the top of R's spectrum at the
current weights from the per-example gradients of ``m`` training examples
(``S`` their sample covariance): the nonzero eigenvalues of the ``d×d``
matrix R are those of the ``m×m`` Gram matrix of the scaled, centred
gradients, so nothing of size ``d×d`` is formed. The prior's gradient is
the same in every example's and cancels in the centring.
:func:`top_directions` gives the directions themselves and
:func:`ratios_along` the ratio along any given ones (how much of the noise
an earlier set of directions still holds).
"""

import math

import numpy as np

from keras_bnn import backend
from keras_bnn.validation import argument_error, check_int

#: Largest number of per-example gradient entries held at once (float32):
#: ``m·d`` ≤ this, 256 MiB (and their centred float64 copy, 512 MiB).
MAX_GRADIENT_ENTRIES = 2 ** 26


def measurable(sampler):
    """Whether :func:`ratio_coefficients` can read ``sampler``: a built SG-MCMC
    sampler with gradient-noise state and one ratio coefficient per variable
    (not SGD, HMC or a per-parameter ``preconditioner="rmsprop"``).

    Args:
        sampler: the model's optimizer.

    Returns:
        bool.
    """
    if getattr(sampler, "preconditioner", None) == "rmsprop":
        return False
    try:
        sampler.slots("noise_ratio"), sampler.slots("gradient_noise")
    except (AttributeError, ValueError):
        return False
    return True


def ratio_coefficients(sampler):
    """The coefficients ``c_v`` of the sampler's per-parameter ratio, one per variable.

    Read from the sampler's own state at its last step, ``c_v = r_v/mean_i(V̂_i)``
    (``noise_ratio`` and ``gradient_noise`` slots), so every sampler's law
    (and the warm-up's step factors) is taken as the sampler applies it.
    ``V̂`` moved by one step of its average since ``r_v`` was taken (about
    1 % at the default decay 0.99).

    Args:
        sampler: a sampler for which :func:`measurable` holds.

    Returns:
        List of floats, in the order of the sampler's variables (0 where
        ``V̂`` is still 0).

    Raises:
        ValueError: when :func:`measurable` does not hold.
    """
    if not measurable(sampler):
        raise argument_error("sampler", "be a built SG-MCMC sampler (SGLD, SGHMC, SGNHT, ATMC) "
                             "that has taken a step, without a per-parameter preconditioner "
                             "(its ratio coefficient would vary within a variable)",
                             type(sampler).__name__, "directional_noise_ratios")
    coefficients = []
    for ratio, variance in zip(sampler.slots("noise_ratio"), sampler.slots("gradient_noise")):
        mean = float(np.mean(np.asarray(variance.value)))
        coefficients.append(float(np.asarray(ratio.value)) / mean if mean > 0 else 0.0)
    return coefficients


def per_example_gradients(model, x, y):
    """Gradients of the mean-form potential of each one-example batch, flattened.

    Row i is ``∇(ℓ_i + (1/n)·(-log p(θ)))`` at the current weights
    (:func:`keras_bnn.backend.batch_gradients` on the batch
    ``(x[i:i+1], y[i:i+1])``, compiled once), the trainable variables
    concatenated in order.

    Args:
        model: a compiled :class:`keras_bnn.BayesianModel`.
        x, y: numpy arrays of m examples.

    Returns:
        float32 numpy array [m, d].
    """
    gradients_of = backend.batch_gradients(model)
    rows = []
    for i in range(len(x)):
        gradients = gradients_of(x[i:i + 1], y[i:i + 1])
        rows.append(np.concatenate([np.asarray(g, np.float32).ravel() for g in gradients]))
    return np.stack(rows)


def directional_noise_ratios(model, x, y, batch_size, num_directions=3, max_examples=256,
                             seed=0):
    """The gradient-noise ratio of the noisiest directions of weight space.

    Estimates the largest eigenvalues of ``R = diag(√c)·C·diag(√c)`` (module
    docstring) at the current weights from ``m = min(len(x), max_examples,
    MAX_GRADIENT_ENTRIES // d)`` examples drawn without replacement with
    ``seed``:

    ``R ≈ (n·(n - b)/b)·AᵀA/(m - 1)``, ``A_i = √c ⊙ (g_i - ḡ)``,

    ``g_i`` the per-example gradients (:func:`per_example_gradients`;
    :func:`ratio_spectrum` does the algebra).

    Args:
        model: a :class:`keras_bnn.BayesianModel` compiled with an SG-MCMC
            sampler that has taken steps (after ``fit``); its ``train_size``
            is n.
        x, y: training examples, numpy arrays (at least 2).
        batch_size: the training batch size b, ``1 ≤ b ≤ n``.
        num_directions: how many of the largest eigenvalues to return.
        max_examples: the most examples to use (at least 2).
        seed: seed of the choice of examples.

    Returns:
        dict: ``top`` (the ``num_directions`` largest ratios, descending),
        ``mean`` (the mean of R's diagonal: the per-parameter ratio, estimated
        from the same examples), ``concentration`` (``trace(R)/top[0]``:
        how many directions the noise is spread over), ``num_examples`` (m),
        ``batch_size`` and ``train_size``.

    Raises:
        ValueError: for a bad ``batch_size``, ``num_directions`` or
            ``max_examples``, fewer than 2 examples, or a model whose
            optimizer has no per-variable ratio (see :func:`ratio_coefficients`).
    """
    n = int(model.train_size)
    owner = "directional_noise_ratios"
    batch_size = check_int(batch_size, "batch_size", minimum=1, owner=owner)
    if batch_size > n:
        raise argument_error("batch_size", f"be at most train_size = {n}", batch_size, owner)
    num_directions = check_int(num_directions, "num_directions", minimum=1, owner=owner)
    max_examples = check_int(max_examples, "max_examples", minimum=2, owner=owner)
    if len(x) < 2 or len(x) != len(y):
        raise argument_error("x, y", "hold at least 2 examples, as many in y as in x",
                             f"{len(x)} and {len(y)}", owner)
    coefficients = ratio_coefficients(model.optimizer)
    sizes = [math.prod(v.shape) for v in model.trainable_variables]
    m = max(2, min(len(x), max_examples, MAX_GRADIENT_ENTRIES // sum(sizes)))
    rows = np.sort(np.random.default_rng(seed).choice(len(x), m, replace=False))
    gradients = per_example_gradients(model, np.asarray(x)[rows], np.asarray(y)[rows])
    return dict(ratio_spectrum(gradients, np.repeat(coefficients, sizes), n, batch_size,
                               num_directions),
                batch_size=batch_size, train_size=n)


def ratio_spectrum(gradients, coefficients, train_size, batch_size, num_directions=3):
    """The top of R's spectrum from per-example gradients and per-parameter coefficients.

    ``R ≈ (n·(n - b)/b)·AᵀA/(m - 1)``, ``A_i = √c ⊙ (g_i - ḡ)``; its nonzero
    eigenvalues are those of the m×m matrix ``A·Aᵀ`` times the same factor.

    Args:
        gradients: [m, d] per-example gradients (:func:`per_example_gradients`), m ≥ 2.
        coefficients: [d] the ratio coefficient ``c`` of each parameter.
        train_size: n.
        batch_size: b.
        num_directions: how many of the largest eigenvalues to return.

    Returns:
        dict: ``top``, ``mean``, ``concentration`` and ``num_examples``, as in
        :func:`directional_noise_ratios`.
    """
    m = len(gradients)
    _, gram = _scaled_gram(gradients, coefficients, train_size, batch_size)
    eigenvalues = np.clip(np.linalg.eigvalsh(gram)[::-1], 0.0, None)
    trace = float(np.trace(gram))
    return {"top": [float(v) for v in eigenvalues[:num_directions]],
            "mean": trace / gradients.shape[1],
            "concentration": trace / float(eigenvalues[0]) if eigenvalues[0] > 0 else math.nan,
            "num_examples": int(m)}


def top_directions(gradients, coefficients, train_size, batch_size, num_directions=3):
    """R's noisiest directions themselves: its top eigenvectors and eigenvalues.

    With ``A`` the scaled, centred gradients and ``R = f·AᵀA`` (as in
    :func:`ratio_spectrum`), an eigenvector w of the Gram matrix ``f·A·Aᵀ``
    with eigenvalue μ > 0 gives R's eigenvector ``u = Aᵀw/‖Aᵀw‖`` with the
    same eigenvalue; nothing of size ``d×d`` is formed.

    Args:
        as :func:`ratio_spectrum` (``coefficients`` a scalar or ``[d]``).

    Returns:
        ``(vectors, ratios)``: ``[j, d]`` float32 orthonormal rows and their
        eigenvalues ``[j]``, descending; ``j ≤ num_directions`` counts the
        eigenvalues above ``1e-12`` of the largest (``j = 0`` when all
        gradients are equal).
    """
    scaled, gram = _scaled_gram(gradients, coefficients, train_size, batch_size)
    eigenvalues, vectors = np.linalg.eigh(gram)
    order = np.argsort(eigenvalues)[::-1][:num_directions]
    order = order[eigenvalues[order] > 1e-12 * max(float(eigenvalues.max()), 0.0)]
    directions = vectors[:, order].T @ scaled
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions.astype(np.float32), eigenvalues[order]


def ratios_along(gradients, coefficients, train_size, batch_size, directions):
    """The ratio ``u_jᵀ·R·u_j`` along given directions: how much of R's trace they hold.

    ``u_jᵀ·R·u_j = f·‖A·u_j‖²`` (A, f as in :func:`ratio_spectrum`); for
    R's own top eigenvectors (:func:`top_directions`) these are its top
    eigenvalues, and for a full orthonormal basis they sum to ``trace(R)``.

    Args:
        gradients, coefficients, train_size, batch_size: as :func:`top_directions`.
        directions: ``[j, d]`` unit rows ``u_j``.

    Returns:
        float numpy array ``[j]``.
    """
    scaled, factor = _scaled(gradients, coefficients, train_size, batch_size)
    projected = scaled @ np.asarray(directions, np.float64).T
    return factor * np.sum(projected ** 2, axis=0)


def _scaled(gradients, coefficients, train_size, batch_size):
    """``(A, f)``: ``A_i = √c ⊙ (g_i - ḡ)`` in float64, ``f = n·(n - b)/b/(m - 1)``.

    Centred in float64: the mean of equal float32 rows is then exact, so equal
    gradients give A = 0 (a float32 mean is off by an ulp: a spurious direction).
    """
    gradients = np.asarray(gradients, np.float64)
    scaled = gradients - gradients.mean(0)
    scaled *= np.sqrt(coefficients)
    return scaled, train_size * (train_size - batch_size) / batch_size / (len(gradients) - 1)


def _scaled_gram(gradients, coefficients, train_size, batch_size):
    """``(A, f·A·Aᵀ)`` (:func:`_scaled`)."""
    scaled, factor = _scaled(gradients, coefficients, train_size, batch_size)
    return scaled, scaled @ scaled.T * factor
