"""Shared helpers of the sampler tests: run many chains cheaply, ESS, KL.

A "chain vector" is one Keras variable whose leading axis indexes independent
chains; every sampler in keras_bnn acts elementwise (per-variable scalars such
as the SGHMC mass are shared, which is harmless when they are fixed), so K
chains of a d-dimensional target cost one variable of shape [K, d].

The loops are XLA-compiled (``jit_compile=True``): the per-step op overhead
of TensorFlow's executor would otherwise dominate these tiny updates. XLA's
stateless normal draws a different (equally valid) stream than TensorFlow's
for the same key, so these runs are not bit-comparable with non-XLA runs.

Statistics are computed in float64: a float32 numpy mean over the chain and
step axes accumulates naively and is off by ~1e-3 for values near 2, which
is larger than the Monte-Carlo error of these tests.
"""

import numpy as np
import scipy.linalg
import tensorflow as tf
import tensorflow_probability as tfp
import keras

from keras_bnn.models.sampling_step import dropping_traced_gradients


def run_chains(
    sampler,
    theta0,
    potential_grad,
    steps,
    burn_in=0,
    thin=1,
    record=None,
    jit_compile=True,
):
    """Runs ``steps`` sampler steps on a toy potential inside one tf.function.

    Args:
        sampler: an unbuilt keras_bnn sampler (already configured).
        theta0: numpy float32 array, the initial state of all chains.
        potential_grad: ``f(theta, step) -> gradient`` of the mean-form loss
            (tensor shaped like ``theta``); ``step`` is the int32 loop index,
            so any injected noise can be keyed on it statelessly.
        steps: total number of steps.
        burn_in: steps discarded before recording.
        thin: record every ``thin``-th step after burn-in.
        record: optional ``f(theta, step) -> tensor`` recorded instead of
            ``theta``.
        jit_compile: compile the loop with XLA.

    Returns:
        ``(samples, theta_variable)``: float64 numpy array ``[(steps-burn_in)//thin,
        *theta.shape]`` (or of ``record``'s shape) and the variable.
    """
    theta = keras.Variable(np.asarray(theta0, np.float32), name="theta")
    sampler.build([theta])
    n_records = (steps - burn_in) // thin
    record = record or (lambda value, step: value)

    @tf.function(autograph=True, jit_compile=jit_compile)
    def loop():
        for i in tf.range(burn_in):
            sampler.apply([potential_grad(theta.value, i)], [theta])
        out = tf.TensorArray(tf.float32, size=n_records)
        for r in tf.range(n_records):
            for k in tf.range(thin):
                i = burn_in + r * thin + k
                sampler.apply([potential_grad(theta.value, i)], [theta])
            out = out.write(r, record(theta.value, i))
        return out.stack()

    # Keras' optimizer step registers a gradient function per trace that
    # TensorFlow never removes, holding the traced loop for the rest of the
    # run (sampling_step.dropping_traced_gradients; kept per call, ATMC on
    # [64, 31]: 7.7 -> 3.0 MB; under XLA 11.7 -> 8.5 MB).
    return dropping_traced_gradients(loop)().numpy().astype(np.float64), theta


# Coordinates per ``effective_sample_size`` call: a multiple of 64 (chunks
# aligned so, TFP's ESS of each coordinate is bit-identical to the one of the
# whole array: measured, unaligned widths such as 17 or 100 differ by ~1e-7)
# and about 2**20 values a call. Under oneDNN TensorFlow's CPU allocator keeps
# every large buffer it ever held (a BFC pool, never returned to the OS); one
# call on the [12000, 64, 31] draws of test_cold_posteriors.py left the
# process 2.9 GB larger for the rest of the run, these calls ~0.1 GB.
ESS_WIDTH_ALIGN, ESS_VALUES_PER_CALL = 64, 2**20


def total_ess(samples):
    """ESS summed over independent chains.

    The coordinates (all axes after the first) go to TFP in aligned chunks of
    about ``ESS_VALUES_PER_CALL`` values, which bounds the memory TensorFlow
    keeps afterwards without changing a bit of the result.

    Args:
        samples: array ``[steps, chains, ...]``.

    Returns:
        Array ``[...]``: for each coordinate, the sum over chains of the
        per-chain ESS (Geyer's initial positive sequence truncation).
    """
    samples = np.asarray(samples)
    flat = samples.reshape(samples.shape[0], -1)
    width = max(1, ESS_VALUES_PER_CALL // max(1, len(flat)) // ESS_WIDTH_ALIGN) * ESS_WIDTH_ALIGN
    ess = np.concatenate([
        tfp.mcmc.effective_sample_size(
            tf.convert_to_tensor(flat[:, start:start + width], tf.float32),
            filter_beyond_positive_pairs=True,
        ).numpy()
        for start in range(0, flat.shape[1], width)
    ])
    return np.sum(ess.reshape(samples.shape[1:]), axis=0)


def sghmc_stationary_cov(precision, h, gamma, temperature, noise_var):
    """Exact stationary position covariance of the discrete SGHMC chain.

    On ``U = θᵀPθ/2`` with gradient noise of covariance ``B·I`` one step is
    linear: ``m' = (1-hγ)m - hPθ + sqrt(2γhT)η + h·sqrt(B)ζ``, ``θ' = θ + hm'``
    (unit mass), so the stationary covariance solves a discrete Lyapunov
    equation. Its position block is ``T·P⁻¹·(1 + hB/(2γT))`` up to O(h²).
    """
    k = precision.shape[0]
    eye = np.eye(k)
    transition = np.block(
        [[(1 - h * gamma) * eye, -h * precision],
         [h * (1 - h * gamma) * eye, eye - h * h * precision]]
    )
    kick = np.block([[eye], [h * eye]])
    noise = (2 * gamma * h * temperature + h * h * noise_var) * (kick @ kick.T)
    cov = scipy.linalg.solve_discrete_lyapunov(transition, noise)
    return cov[k:, k:]


def gaussian_kl(mean_hat, cov_hat, mean, cov):
    """KL(N(mean_hat, cov_hat) ‖ N(mean, cov)) in nats (float64)."""
    mean_hat, cov_hat = np.asarray(mean_hat, np.float64), np.asarray(cov_hat, np.float64)
    mean, cov = np.asarray(mean, np.float64), np.asarray(cov, np.float64)
    k = mean.shape[0]
    prec = np.linalg.inv(cov)
    diff = mean_hat - mean
    _, logdet = np.linalg.slogdet(cov)
    _, logdet_hat = np.linalg.slogdet(cov_hat)
    return 0.5 * (np.trace(prec @ cov_hat) + diff @ prec @ diff - k + logdet - logdet_hat)
