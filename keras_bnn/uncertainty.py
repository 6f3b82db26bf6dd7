"""The posterior predictive and its uncertainty decomposition, from member outputs.

Given the raw outputs f(x;θ_s) of S posterior samples θ_1..θ_S of one network
on N inputs, stacked as ``members`` [S, N, units] (or [S, N, ..., units]
for an output per position, a tagger's [S, N, T, K]: every formula below
then holds per position, over the last axis), the Monte Carlo posterior
predictive is

    p(y|x, D) ≈ (1/S) Σ_s p(y|x, θ_s).

Likelihoods (the member's output head):

* ``"categorical"``: the member outputs logits f(x;θ_s) ∈ R^K and
  p(y|x,θ_s) = softmax(f(x;θ_s)). The predictive is computed in log space,

      log p̄ = logsumexp_s(log_softmax f(x;θ_s)) − log S,

  so members that are certain (logits of ±1000, probabilities that underflow)
  give exact probabilities and finite log-probabilities (clipped at 0, where
  float32 rounding passes it: :func:`log_predictive`).
* ``"bernoulli"`` (binary): one logit f(x;θ_s) ∈ R and
  p(y=1|x,θ_s) = sigmoid(f(x;θ_s)); p̄(y=1|x) =
  exp(logsumexp_s(log sigmoid f(x;θ_s)) − log S).
* ``"gaussian"`` (regression): the member outputs ``[μ, log σ²]``
  concatenated on the last axis, shape [N, 2D], and
  p(y|x,θ_s) = N(y; μ_s, σ²_s). The predictive is the moment-matched
  Gaussian of the mixture (law of total variance):

      mean = (1/S) Σ_s μ_s
      var  = (1/S) Σ_s σ²_s  +  (1/S) Σ_s (μ_s − mean)²
             (aleatoric)        (epistemic)

The functions are ``keras.ops`` (any Keras backend, inside a traced graph);
:class:`keras_bnn.PosteriorEnsemble` evaluates the members and calls them.
"""

import math

from keras import ops

#: Outputs of :func:`summary` (and of
#: :meth:`keras_bnn.PosteriorEnsemble.predictive_summary` and the exported
#: ``serving_default`` signature) for ``likelihood="categorical"``.
CATEGORICAL_OUTPUTS = (
    "probabilities",
    "log_probabilities",
    "predictive_entropy",
    "expected_entropy",
    "mutual_information",
    "class_std",
)
#: The same for ``likelihood="bernoulli"``.
BERNOULLI_OUTPUTS = (
    "probabilities",
    "predictive_entropy",
    "expected_entropy",
    "mutual_information",
    "probability_std",
)
#: The same for ``likelihood="gaussian"``.
GAUSSIAN_OUTPUTS = ("mean", "variance", "aleatoric_variance", "epistemic_variance")


def log_mean_exp(x, axis=0):
    """log((1/S) Σ_s exp(x_s)) over ``axis`` of size S, without overflow.

    Args:
        x: tensor whose ``axis`` has a known size S >= 1.
        axis: the axis averaged over.

    Returns:
        ``logsumexp(x, axis) − log S``: ``x`` without ``axis``.
    """
    return ops.logsumexp(x, axis=axis) - math.log(x.shape[axis])


def log_predictive(member_log_probs):
    """log p̄ of the members' log-probabilities ``[S, ...]``: their log-mean-exp, at most 0.

    A float32 log-sum-exp minus log S rounds past 0 (p̄ = 1.0000001 for 7
    members certain of a class); probabilities are kept ≤ 1, entropies ≥ 0.

    Args:
        member_log_probs: [S, N, ..., K] log-probabilities of S members.

    Returns:
        [N, ..., K]: log p̄, each ≤ 0.
    """
    return ops.minimum(log_mean_exp(member_log_probs), 0.0)


def nan_rows(values, finite, axis=0):
    """``values`` with NaN in the rows (along ``axis``) where ``finite`` is False.

    A row whose input holds NaN or Inf must give NaN, never a finite,
    confident-looking answer: layers such as relu map NaN to finite values,
    and XLA's fused exp/log on CPU clamp NaN to finite numbers, so the mask
    is applied to every output instead of trusting NaN to propagate.

    Args:
        values: tensor with N rows along ``axis``.
        finite: [N] boolean tensor, or None (no row is masked).
        axis: the row axis of ``values``.

    Returns:
        ``values`` (same shape and dtype), NaN in the masked rows.
    """
    if finite is None:
        return values
    shape = [1] * len(values.shape)
    shape[axis] = -1
    return ops.where(ops.reshape(finite, shape), values, ops.cast(float("nan"), values.dtype))


def gaussian_moments(members):
    """The mixture's mean and its variance split into aleatoric and epistemic parts.

    mean = (1/S) Σ_s μ_s; aleatoric = (1/S) Σ_s σ²_s (a log-mean-exp of the
    log-variances); epistemic = (1/S) Σ_s (μ_s − mean)².

    Args:
        members: [S, N, 2D] member outputs ``[μ, log σ²]``.

    Returns:
        (mean, aleatoric, epistemic), each [N, D].
    """
    mean, log_aleatoric, epistemic = gaussian_log_moments(members)
    return mean, ops.exp(log_aleatoric), epistemic


def gaussian_log_moments(members):
    """:func:`gaussian_moments` with the aleatoric part as its log, which cannot overflow.

    log aleatoric = log-mean-exp_s log σ²_s; float32 ``exp`` overflows from 88.7, so
    the predictive log-variance is log(aleatoric + epistemic) =
    logaddexp(log aleatoric, log epistemic), never log(exp(...)).

    Args:
        members: [S, N, 2D] member outputs ``[μ, log σ²]``.

    Returns:
        (mean, log aleatoric, epistemic), each [N, D].
    """
    units = members.shape[-1] // 2
    means, log_variances = members[..., :units], members[..., units:]
    mean = ops.mean(means, axis=0)
    epistemic = ops.mean(ops.square(means - mean), axis=0)
    return mean, log_mean_exp(log_variances), epistemic


def member_log_probabilities(members, likelihood):
    """Each member's log-probability of each outcome.

    Args:
        members: [S, N, ..., units] raw member outputs.
        likelihood: ``"categorical"`` or ``"bernoulli"``.

    Returns:
        ``"categorical"``: log_softmax f_s, [S, N, ..., K]; ``"bernoulli"``:
        the two outcomes (y=0, y=1) as the last axis, log sigmoid(∓f_s), [S, N, ..., 2].
    """
    if likelihood == "bernoulli":
        return ops.concatenate([ops.log_sigmoid(-members), ops.log_sigmoid(members)], axis=-1)
    return ops.log_softmax(members, axis=-1)


def log_predictive_outcomes(members, likelihood):
    """log p̄ of each outcome, in log space: finite where p̄ underflows float32.

    Args:
        members: [S, N, ..., units] raw member outputs.
        likelihood: ``"categorical"`` or ``"bernoulli"``.

    Returns:
        [N, ..., K] (``"categorical"``) or [N, ..., 2] (``"bernoulli"``: y=0, y=1):
        :func:`log_predictive` of :func:`member_log_probabilities`.
    """
    return log_predictive(member_log_probabilities(members, likelihood))


def outcome_probabilities(log_probs, likelihood):
    """The predictive an ensemble outputs, of :func:`log_predictive_outcomes`.

    Args:
        log_probs: [N, ..., K] or [N, ..., 2] log p̄ of each outcome.
        likelihood: ``"categorical"`` or ``"bernoulli"``.

    Returns:
        ``"categorical"``: p̄ [N, ..., K]; ``"bernoulli"``: p̄(y=1) [N, ..., 1].
    """
    return ops.exp(log_probs[..., 1:] if likelihood == "bernoulli" else log_probs)


def predictive(members, likelihood):
    """The posterior predictive of member outputs (module docstring).

    Args:
        members: [S, N, ..., units] raw member outputs.
        likelihood: ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``.

    Returns:
        ``"categorical"``: p̄ [N, K]; ``"bernoulli"``: p̄(y=1) [N, 1];
        ``"gaussian"``: the mixture's ``[mean, log var]`` [N, 2D].
    """
    if likelihood != "gaussian":
        return outcome_probabilities(log_predictive_outcomes(members, likelihood), likelihood)
    mean, log_aleatoric, epistemic = gaussian_log_moments(members)
    return ops.concatenate([mean, ops.logaddexp(log_aleatoric, ops.log(epistemic))], axis=-1)


def member_predictions(members, likelihood, log_probabilities=False):
    """Each member's own prediction: softmax f_s, sigmoid f_s, or ``[μ_s, log σ²_s]``.

    Args:
        members: [S, N, ..., units] raw member outputs.
        likelihood: ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``.
        log_probabilities: for ``"categorical"`` and ``"bernoulli"``, each
            member's log-probability of each outcome instead
            (:func:`member_log_probabilities`: finite where a probability underflows).

    Returns:
        [S, N, ..., units]: class probabilities, p(y=1), or the raw Gaussian
        outputs; with ``log_probabilities`` log_softmax f_s [S, N, ..., K] or
        log sigmoid(∓f_s) [S, N, ..., 2] (y=0, y=1).
    """
    if log_probabilities and likelihood != "gaussian":
        return member_log_probabilities(members, likelihood)
    if likelihood == "categorical":
        return ops.softmax(members, axis=-1)
    if likelihood == "bernoulli":
        return ops.sigmoid(members)
    return members


def _entropy(probs, log_probs):
    """H = −Σ_k p_k log p_k over the last axis, with 0 · log 0 = 0: a class of
    probability 0 (a logit of −inf, masked out) adds 0, not NaN (until 2026-11-30)."""
    return -ops.sum(ops.where(probs > 0.0, probs * log_probs, 0.0), axis=-1)


def summary(members, likelihood):
    """The predictive and its uncertainty decomposition.

    ``"categorical"`` (p_s = softmax f_s, p̄ = (1/S) Σ_s p_s,
    H[p] = −Σ_k p_k log p_k):

    * ``probabilities`` p̄ [N, K] and ``log_probabilities`` log p̄ [N, K]
      (log-mean-exp of the member log-softmax: finite where p̄ underflows);
    * ``predictive_entropy`` H[p̄] [N] (total uncertainty; 0 · log 0 = 0, so
      a class a member rules out with a logit of −inf adds nothing);
    * ``expected_entropy`` (1/S) Σ_s H[p_s] [N] (aleatoric);
    * ``mutual_information`` H[p̄] − (1/S) Σ_s H[p_s] [N] (epistemic; ≥ 0
      by concavity of H, clipped at 0 against round-off, exactly 0 where all
      members give the same log-probabilities);
    * ``class_std`` sqrt((1/S) Σ_s (p_s − p̄)²) [N, K] (population
      standard deviation across members, per class).

    ``"bernoulli"`` (p_s = sigmoid f_s = p(y=1|x,θ_s), H[p] = −p log p −
    (1−p) log(1−p)): ``probabilities`` p̄ [N, 1]; ``predictive_entropy``,
    ``expected_entropy`` and ``mutual_information`` [N] as above, for the
    two outcomes; ``probability_std`` std over members of p_s [N, 1].

    ``"gaussian"``: ``mean``, ``variance`` = ``aleatoric_variance`` +
    ``epistemic_variance`` (each [N, D]; :func:`gaussian_moments`).

    Args:
        members: [S, N, ..., units] raw member outputs.
        likelihood: ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``.

    Returns:
        dict of tensors, keys :data:`CATEGORICAL_OUTPUTS`,
        :data:`BERNOULLI_OUTPUTS` or :data:`GAUSSIAN_OUTPUTS`.
    """
    if likelihood == "gaussian":
        mean, aleatoric, epistemic = gaussian_moments(members)
        return {
            "mean": mean,
            "variance": aleatoric + epistemic,
            "aleatoric_variance": aleatoric,
            "epistemic_variance": epistemic,
        }
    member_log_probs = member_log_probabilities(members, likelihood)
    member_probs = ops.exp(member_log_probs)
    log_probs = log_predictive(member_log_probs)
    probs = ops.exp(log_probs)
    predictive_entropy = _entropy(probs, log_probs)
    expected_entropy = ops.mean(_entropy(member_probs, member_log_probs), axis=0)
    # Members that agree have no information, exactly: not the round-off of the
    # log-mean-exp and of the difference (up to 2e-7 in float32).
    agree = ops.all(ops.all(ops.equal(member_log_probs, member_log_probs[:1]), axis=0), axis=-1)
    information = ops.where(agree, 0.0, predictive_entropy - expected_entropy)
    result = {
        "probabilities": probs,
        "log_probabilities": log_probs,
        "predictive_entropy": predictive_entropy,
        "expected_entropy": expected_entropy,
        "mutual_information": ops.where(information < 0.0, 0.0, information),
        "class_std": ops.std(member_probs, axis=0),
    }
    if likelihood == "bernoulli":
        result["probabilities"] = probs[..., 1:]
        result["probability_std"] = result["class_std"][..., 1:]
        return {name: result[name] for name in BERNOULLI_OUTPUTS}
    return result
