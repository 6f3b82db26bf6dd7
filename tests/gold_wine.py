"""Second gold standard: Bayesian softmax regression on wine vs TFP NUTS.

Problem: scikit-learn's bundled wine data (178 × 13, 3 classes, no
download), features standardised over all rows; logits ``x̃·W`` with
``x̃ = [x, 1]`` and ``W ∈ R^{14×3}`` (13 weights and a bias per class), all
``N(0, 1)`` a priori, so

    U(θ) = Σ_i CE(y_i, x̃_i·W) + ½‖θ‖² + const,   θ = vec(W) ∈ R⁴²

(row-major: ``θ[3j + c] = W[j, c]``). The reference is the same
Laplace-whitened NUTS as :mod:`gold_standard`, with its R-hat < 1.01 check.
"""

import functools

import numpy as np
import tensorflow as tf

import gold_standard as gs

NUM_FEATURES = 13
NUM_CLASSES = 3
NUM_PARAMS = (NUM_FEATURES + 1) * NUM_CLASSES


@functools.lru_cache(maxsize=None)
def wine_data():
    """The standardised wine data.

    Returns:
        ``(x, y)``: float32 ``[178, 13]`` and int32 ``[178]`` class labels.
    """
    from sklearn.datasets import load_wine

    data = load_wine()
    x = data.data.astype(np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return x.astype(np.float32), data.target.astype(np.int32)


def _design(x):
    return np.concatenate([np.asarray(x, np.float64), np.ones((len(x), 1))], axis=1)


def potential(theta, x, y):
    """``U(θ)`` (up to a constant) for a batch of parameter vectors.

    Args:
        theta: float tensor ``[..., 42]``.
        x, y: the data (float tensor ``[n, 13]`` and int labels ``[n]``).

    Returns:
        Tensor ``[...]``.
    """
    weights = tf.reshape(theta, tf.concat([tf.shape(theta)[:-1], [NUM_FEATURES + 1, NUM_CLASSES]],
                                          0))
    logits = tf.einsum("nj,...jc->...nc", x, weights[..., :-1, :]) + weights[..., -1:, :]
    labels = tf.broadcast_to(y, tf.shape(logits)[:-1])
    nll = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits), axis=-1)
    return nll + 0.5 * tf.reduce_sum(tf.square(theta), axis=-1)


@functools.lru_cache(maxsize=None)
def laplace_approximation():
    """MAP ``θ̂`` and Hessian ``H`` of U at it (float64 Newton iterations).

    Returns:
        ``(theta_map [42], hessian [42, 42])`` as float64 numpy arrays.
    """
    x, y = wine_data()
    design, onehot = _design(x), np.eye(NUM_CLASSES)[y]

    def gradient_and_hessian(theta):
        logits = design @ theta.reshape(NUM_FEATURES + 1, NUM_CLASSES)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = (design.T @ (p - onehot)).reshape(-1) + theta
        # Σ_i x̃_i x̃_iᵀ ⊗ (diag(p_i) - p_i p_iᵀ), in θ's row-major order.
        cov = p[:, :, None] * np.eye(NUM_CLASSES) - p[:, :, None] * p[:, None, :]
        hessian = np.einsum("ij,ik,iab->jakb", design, design, cov).reshape(NUM_PARAMS, NUM_PARAMS)
        return grad, hessian + np.eye(NUM_PARAMS)

    return gs.newton_map(gradient_and_hessian, NUM_PARAMS)


@functools.lru_cache(maxsize=None)
def nuts_reference(temperature, seed=0):
    """Posterior mean and sd of θ under ``exp(-U/T)``, from whitened TFP NUTS.

    Args:
        temperature: T > 0.
        seed: int seed of the NUTS run.

    Returns:
        ``(mean [42], sd [42])`` float64 arrays.

    Raises:
        AssertionError: if any coordinate's R-hat is not below 1.01.
    """
    x, y = wine_data()
    xs, ys = tf.constant(x, tf.float64), tf.constant(y)
    return gs.whitened_nuts(lambda theta: potential(theta, xs, ys), *laplace_approximation(),
                            temperature, seed)
