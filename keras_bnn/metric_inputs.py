"""The arrays the metrics read, checked: numbers, probabilities, class labels.

:mod:`keras_bnn.metrics` and :mod:`keras_bnn.ood` take predictions and labels
as numpy arrays, eager tensors or lists; the checks here turn them into
float64 probabilities (or log-probabilities) and int64 class indices, or
raise a ValueError that names the argument. Labels come in the forms Keras'
sparse losses take: ``[N, ...]`` integer classes, the same with a trailing
axis of size 1 (``[N, 1]``: CIFAR-10's ``y``, a binary head's targets), and
booleans for binary labels. Rows of probabilities must sum to 1 within 5e-3
(a log-probability row's log-sum-exp be 0 within it), bfloat16 ones within 2⁻⁵:
the round-off of a softmax computed in their dtype, far from what logits give.

Numpy and scipy: importing this module does not import TensorFlow.
"""

import numpy as np
from scipy.special import logsumexp

from keras_bnn.validation import argument_error, numeric_array

# Rows of `probs` must sum to 1 within this tolerance; it admits float16/32
# softmax round-off and rejects logits passed by mistake.
_ROW_SUM_ATOL = 5e-3
# bfloat16 keeps 8 significant bits: its softmax rows are off by up to 5.9e-3 (JAX),
# its log-softmax rows' log-sum-exp by up to 0.022 (K = 1000): 4 of its eps, 2**-5.
_BFLOAT16_ATOL = 2.0 ** -5


def row_tolerance(values):
    """The tolerance of a row's sum (of a log-probability row's log-sum-exp) for ``values``.

    Args:
      values: the probabilities (or log-probabilities) as given: an array,
        eager tensor or list.

    Returns:
      2**-5 for bfloat16 values (as a ``mixed_bfloat16`` softmax outputs them), else 5e-3.
    """
    return _BFLOAT16_ATOL if "bfloat16" in str(getattr(values, "dtype", "")) else _ROW_SUM_ATOL


def as_numbers(values, name):
    """``values`` as a float64 numpy array.

    Args:
      values: an array, eager tensor or (nested) list of numbers.
      name: the argument's name, for errors.

    Returns:
      float64 numpy array.

    Raises:
      ValueError: naming ``name`` for strings, ragged lists or other non-numbers.
    """
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise argument_error(name, "be an array of numbers", values,
                             got=f"{type(values).__name__} ({error})") from None


def check_probabilities(probs, name="probs", atol=None):
    """Returns ``probs`` as a float64 array after checking it is [..., K] rows of
    probabilities (finite, in [0, 1], summing to 1).

    Args:
      probs: [..., N, K] class probabilities.
      name: the argument's name, for errors.
      atol: how far a row's sum may be from 1 (None: :func:`row_tolerance` of ``probs``;
        pass that of the values as given where ``probs`` is their float64 copy).

    Returns:
      float64 numpy array, clipped at 1 (a float32 mean can pass 1 by an ulp).

    Raises:
        ValueError: naming ``name``, for any other array (logits included).
    """
    atol = row_tolerance(probs) if atol is None else atol
    p = as_numbers(probs, name)
    if p.ndim < 2 or p.shape[-1] < 1 or p.size == 0:
        raise argument_error(name, "be an array of shape [..., N, K] with N, K >= 1", probs,
                             got=f"shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise argument_error(name, "be finite", probs, got="NaN or inf values")
    if p.min() < 0.0 or p.max() > 1.0 + atol:
        raise argument_error(name, "be probabilities in [0, 1] (not logits)", probs,
                             got=f"values in [{p.min():.4g}, {p.max():.4g}]")
    deviation = np.max(np.abs(p.sum(axis=-1) - 1.0))
    if deviation > atol:
        raise argument_error(name, f"be rows of probabilities that sum to 1 within "
                             f"{atol:g} (not logits)", probs,
                             got=f"a row sum off by {deviation:.4g}")
    return np.minimum(p, 1.0)  # a float32 mean can pass 1 by an ulp: -log p stays >= 0


def check_log_probabilities(log_probs, name="probs", atol=None):
    """Returns ``log_probs`` as a float64 array after checking it is [..., K] rows of
    log-probabilities (no NaN, at most 0, logsumexp of each row 0).

    Args:
      log_probs: [..., N, K] log-probabilities log p_k, K >= 2 (a binary
        prediction as its two outcomes [log(1 − p), log p]); −inf admitted
        (a probability of exactly 0).
      name: the argument's name, for errors.
      atol: how far a row's log-sum-exp may be from 0 (None: :func:`row_tolerance`
        of ``log_probs``).

    Returns:
      float64 numpy array, clipped at 0 (a float32 log-mean-exp can pass 0 by an ulp).

    Raises:
        ValueError: naming ``name``, for any other array (probabilities or
          logits included, and one outcome [..., 1]).
    """
    atol = row_tolerance(log_probs) if atol is None else atol
    lp = as_numbers(log_probs, name)
    if lp.ndim < 2 or lp.shape[-1] < 2 or lp.size == 0:
        raise argument_error(name, "be log-probabilities of shape [..., N, K] with N >= 1 and "
                             "K >= 2 (a binary prediction as its two outcomes "
                             "[log(1 - p), log p])", log_probs, got=f"shape {lp.shape}")
    if np.any(np.isnan(lp)) or np.any(lp == np.inf):
        raise argument_error(name, "be log-probabilities, without NaN or +inf", log_probs,
                             got="NaN or +inf values")
    with np.errstate(divide="ignore"):  # a row of -inf only: its logsumexp is -inf
        deviation = np.max(np.abs(logsumexp(lp, axis=-1)))
    if lp.max() > atol or not deviation <= atol:
        raise argument_error(name, f"be rows of log-probabilities (at most 0, whose "
                             f"exponentials sum to 1 within {atol:g}; not "
                             "probabilities or logits)", log_probs,
                             got=f"values up to {lp.max():.4g}, a row's logsumexp off by "
                             f"{deviation:.4g}")
    return np.minimum(lp, 0.0)


def take_labels(labels, at, num_classes):
    """The class labels at the scored positions of ``at``, checked.

    Args:
      labels: [N, ...] class indices (integers, integral floats, bfloat16
        included, or booleans for two classes) of the positions P = (N, ...) of ``at``, or
        [N, ..., 1] (a trailing axis of size 1, as Keras' sparse losses take).
      at: the :class:`keras_bnn.positions.Positions` of the predictions.
      num_classes: the number K of classes.

    Returns:
      int64 numpy array [M] of the M scored positions' labels.

    Raises:
      ValueError: naming ``labels`` if its shape is not P (or P + (1,); one-hot
        P + (K,) is named as such), a label is not integral, or one is
        outside [0, K).
    """
    y = numeric_array(labels)
    if y.shape == at.shape + (1,):
        y = y[..., 0]
    elif y.shape == at.shape + (num_classes,) and num_classes > 1:
        raise argument_error("labels", f"be integer class indices of shape {list(at.shape)}, "
                             "not one-hot rows (pass np.argmax(labels, axis=-1))", None,
                             got=f"shape {y.shape}")
    y = at.take(y, "labels", event=False)
    integral = np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_) or (
        np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)))
    if not integral:
        raise argument_error("labels", "be integer class indices", None,
                             got=f"dtype {y.dtype} values {y[:3]}")
    y = y.astype(np.int64)
    if y.min() < 0 or y.max() >= num_classes:
        raise argument_error("labels", f"be class indices in [0, {num_classes - 1}] for "
                             f"K={num_classes} classes", None,
                             got=f"values in [{y.min()}, {y.max()}]")
    return y


def two_class(probs, name="probs"):
    """Binary probabilities as two-class rows; any other array unchanged.

    Args:
      probs: [..., 1] probabilities p(y=1) (a Bernoulli head's), or [..., K].
      name: the argument's name, for errors.

    Returns:
      float64 numpy array: [..., 2] rows [1 − min(p, 1), p] for [..., 1] input
      (:func:`check_probabilities` then admits p up to 1 + its tolerance, as
      any row's entries, and clips it), else ``probs`` as it is.

    Raises:
      ValueError: naming ``name`` if ``probs`` is not an array of numbers.
    """
    p = as_numbers(probs, name)
    if p.ndim >= 2 and p.shape[-1] == 1:
        # A float32 p̄ may pass 1 by an ulp (a log-mean-exp of confident members): its
        # complement is 0, not -1e-7, and p is clipped as a row's entries are.
        return np.concatenate([1.0 - np.minimum(p, 1.0), p], axis=-1)
    return p


def take_weights(sample_weight, at):
    """The weights of the scored positions of ``at``, checked (None stays None).

    Args:
      sample_weight: None, or weights w ≥ 0 (finite, not all 0 where scored)
        of shape P = (N, ...), the positions' shape of ``at`` (or P + (1,),
        as Keras takes them), or of shape [N] (one weight per example,
        shared by its positions).
      at: the :class:`keras_bnn.positions.Positions` of the predictions.

    Returns:
      float64 numpy array [M] of the M scored positions' weights, or None.

    Raises:
      ValueError: naming ``sample_weight`` for another shape, a negative,
        NaN or infinite weight, or weights that are all 0 where scored.
    """
    if sample_weight is None:
        return None
    w = as_numbers(sample_weight, "sample_weight")
    if w.shape == at.shape + (1,):
        w = w[..., 0]
    if w.shape == at.shape[:1] and len(at.shape) > 1:  # per example: one per position
        w = np.broadcast_to(w.reshape(w.shape + (1,) * (len(at.shape) - 1)), at.shape)
    if w.shape != at.shape:
        shapes = " or ".join(sorted({str(list(at.shape)), str(list(at.shape[:1]))}))
        raise argument_error("sample_weight", f"have shape {shapes}, one weight per example "
                             "(or position) of `" + at.source + "`", None,
                             got=f"shape {list(w.shape)}")
    w = at.take(w, "sample_weight", event=False)
    if not np.all(np.isfinite(w)):
        raise argument_error("sample_weight", "be finite", None, got="NaN or inf values")
    if w.min() < 0:
        raise argument_error("sample_weight", "be >= 0", None, got=f"minimum {w.min():.4g}")
    if not w.sum() > 0:
        raise argument_error("sample_weight", "have a positive sum over the scored examples",
                             None, got="all 0")
    return w
