"""Gold standard for sampler tests: Bayesian logistic regression vs TFP NUTS.

Problem: scikit-learn's bundled breast_cancer data (569 × 30, no download),
features standardised over all rows, labels in {0, 1}; logits ``x·w + b``
with ``w ~ N(0, I)``, ``b ~ N(0, 1)``, so

    U(θ) = Σ_i BCE(y_i, x_i·w + b) + ½‖θ‖² + const,   θ = [w, b] ∈ R³¹,

and the tempered posterior is ``∝ exp(-U(θ)/T)``.

Reference: ``tfp.mcmc.NoUTurnSampler`` (dual-averaging step size) on the
exact potential. The features are strongly correlated (radius, perimeter and
area nearly collinear), which makes NUTS in θ need deep trees; it therefore
runs in Laplace-whitened coordinates ``θ = θ̂ + L·z`` (``θ̂`` the MAP,
``L Lᵀ = T·H⁻¹`` at the MAP). The map is linear with a constant Jacobian, so
the target is unchanged: only the geometry NUTS sees is better conditioned.
The reference is accepted only when every coordinate's rank-normalised split
R-hat (ArviZ) is below 1.01.
"""

import functools

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

NUM_FEATURES = 30
NUM_PARAMS = NUM_FEATURES + 1
NUTS_CHAINS = 4
NUTS_WARMUP = 1000
NUTS_DRAWS = 2500
# Whitened, the target is close to a standard normal: a U-turn comes after a
# few leapfrog steps. (Uncapped, at T = 0.01 the trees of TFP 0.25 ran to the
# default depth 10, ~860 steps a draw; a cap keeps NUTS exact, and the R-hat
# check below still guards convergence.)
MAX_TREE_DEPTH = 6


@functools.lru_cache(maxsize=None)
def breast_cancer_blr():
    """The standardised breast_cancer data.

    Returns:
        ``(x, y)``: float32 arrays ``[569, 30]`` and ``[569]`` (0/1 labels).
    """
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    x = data.data.astype(np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return x.astype(np.float32), data.target.astype(np.float32)


def blr_model():
    """The logistic regression as a ``BayesianModel`` (not compiled).

    One ``Dense(1)`` on the 30 features, N(0, 1) priors on kernel and bias,
    producing a logit (use ``BinaryCrossentropy(from_logits=True)``). Its
    flattened weights ``[kernel[:, 0], bias]`` are the θ of this module.
    """
    import keras
    import keras_bnn as kb

    inputs = keras.Input((NUM_FEATURES,))
    outputs = kb.layers.Dense(
        1, kernel_prior=kb.priors.Normal(0.0, 1.0), bias_prior=kb.priors.Normal(0.0, 1.0)
    )(inputs)
    return kb.BayesianModel(inputs, outputs)


def potential(theta, x, y):
    """``U(θ)`` (up to a constant) for a batch of parameter vectors.

    Args:
        theta: float tensor ``[..., 31]``.
        x, y: the data (tensors or arrays of the same float dtype).

    Returns:
        Tensor ``[...]``.
    """
    logits = tf.einsum("...d,nd->...n", theta[..., :NUM_FEATURES], x) + theta[..., NUM_FEATURES:]
    nll = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.broadcast_to(y, tf.shape(logits)), logits=logits), axis=-1)
    return nll + 0.5 * tf.reduce_sum(tf.square(theta), axis=-1)


@functools.lru_cache(maxsize=None)
def laplace_approximation():
    """MAP ``θ̂`` and Hessian ``H`` of U at it (float64 Newton iterations).

    Returns:
        ``(theta_map [31], hessian [31, 31])`` as float64 numpy arrays.
    """
    x, y = breast_cancer_blr()
    design = np.concatenate([x.astype(np.float64), np.ones((len(x), 1))], axis=1)

    def gradient_and_hessian(theta):
        p = 1.0 / (1.0 + np.exp(-design @ theta))
        grad = design.T @ (p - y) + theta
        return grad, (design * (p * (1 - p))[:, None]).T @ design + np.eye(NUM_PARAMS)

    return newton_map(gradient_and_hessian, NUM_PARAMS)


def newton_map(gradient_and_hessian, num_params, max_iterations=100):
    """The MAP of a convex potential by Newton's method, and U's Hessian there.

    ``θ ← θ − H(θ)⁻¹∇U(θ)`` from ``θ = 0`` until the largest step is below
    1e-12.

    Args:
        gradient_and_hessian: ``θ -> (∇U(θ), H(θ))``, float64 numpy.
        num_params: the dimension of θ.
        max_iterations: the most Newton steps.

    Returns:
        ``(theta_map [num_params], hessian [num_params, num_params])``.
    """
    theta = np.zeros(num_params)
    for _ in range(max_iterations):
        grad, hessian = gradient_and_hessian(theta)
        step = np.linalg.solve(hessian, grad)
        theta -= step
        if np.max(np.abs(step)) < 1e-12:
            break
    return theta, gradient_and_hessian(theta)[1]


@functools.lru_cache(maxsize=None)
def nuts_reference(temperature, seed=0):
    """Posterior mean and sd of θ under ``exp(-U/T)``, from TFP NUTS.

    Args:
        temperature: T > 0.
        seed: int seed of the NUTS run.

    Returns:
        ``(mean [31], sd [31])`` float64 arrays.

    Raises:
        AssertionError: if any coordinate's rank-normalised split R-hat
            (ArviZ, 4 chains) is not below 1.01.
    """
    x, y = breast_cancer_blr()
    xs, ys = tf.constant(x, tf.float64), tf.constant(y, tf.float64)
    return whitened_nuts(lambda theta: potential(theta, xs, ys), *laplace_approximation(),
                         temperature, seed)


def whitened_nuts(potential_fn, theta_map, hessian, temperature, seed):
    """Mean and sd of ``exp(-U/T)`` from NUTS in Laplace-whitened coordinates.

    ``θ = θ̂ + L·z`` with ``L Lᵀ = T·H⁻¹`` (see the module doc); 4 chains of
    ``NUTS_WARMUP`` + ``NUTS_DRAWS`` draws.

    Args:
        potential_fn: ``U`` of a float64 tensor ``[..., d]`` (up to a constant).
        theta_map, hessian: ``θ̂ [d]`` and ``H [d, d]`` of U at it (float64).
        temperature: T > 0.
        seed: int seed of the NUTS run.

    Returns:
        ``(mean [d], sd [d])`` float64 arrays.

    Raises:
        AssertionError: if any coordinate's rank-normalised split R-hat
            (ArviZ, 4 chains) is not below 1.01.
    """
    import arviz as az

    num_params = len(theta_map)
    scale = np.linalg.cholesky(temperature * np.linalg.inv(hessian))
    loc, scale_t = tf.constant(theta_map), tf.constant(scale)

    def log_prob(z):
        theta = loc + tf.einsum("ij,...j->...i", scale_t, z)
        return -potential_fn(theta) / temperature

    kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
        tfp.mcmc.NoUTurnSampler(log_prob, step_size=0.5, max_tree_depth=MAX_TREE_DEPTH),
        num_adaptation_steps=int(0.8 * NUTS_WARMUP),
    )
    start = tf.random.stateless_normal([NUTS_CHAINS, num_params], seed=[seed, 1], dtype=tf.float64)

    @tf.function(jit_compile=True)
    def run():
        return tfp.mcmc.sample_chain(
            NUTS_DRAWS, start, kernel=kernel, num_burnin_steps=NUTS_WARMUP,
            trace_fn=None, seed=tf.constant([seed, 2], tf.int32),
        )

    z = run().numpy()  # [draws, chains, d]
    theta = theta_map + np.einsum("ij,scj->sci", scale, z)
    rhat = az.rhat(az.convert_to_dataset(np.swapaxes(theta, 0, 1)), method="rank")
    rhat = np.asarray(rhat["x"])
    assert np.all(rhat < 1.01), f"NUTS reference did not converge: max R-hat {rhat.max():.4f}"
    flat = theta.reshape(-1, num_params)
    return flat.mean(axis=0), flat.std(axis=0)


def posterior_errors(samples, mean, sd):
    """Median errors of samples against a reference posterior.

    Args:
        samples: array ``[..., 31]`` of draws (all leading axes pooled).
        mean, sd: the reference posterior mean and sd, ``[31]``.

    Returns:
        ``(median |sd_hat/sd - 1|, median |mean_hat - mean|/sd)``.
    """
    flat = np.asarray(samples, np.float64).reshape(-1, np.shape(mean)[-1])
    sd_error = np.median(np.abs(flat.std(axis=0) / sd - 1.0))
    mean_error = np.median(np.abs(flat.mean(axis=0) - mean) / sd)
    return float(sd_error), float(mean_error)
