"""Out-of-distribution detection: an offline stand-in set and AUROC scores.

The out-of-distribution (OOD) set for Fashion-MNIST models is usually MNIST.
MNIST cannot be had offline here, so :func:`digits_28x28` builds a stand-in
from scikit-learn's bundled handwritten digits (1 797 images of 8×8, values
0..16): each is scaled to [0, 1] and resized bilinearly to 20×20, then
padded with 4 zero pixels on every side to 28×28, which is how MNIST's digits
sit in their frame (a 20×20 box centred in 28×28). They are MNIST-*like*, not
MNIST: coarser strokes, blurred by the 2.5× upscaling.

Scores: a model should be less certain on OOD inputs. With the members'
class probabilities ``p_s(x)`` (S members) and their mean ``p̄(x)``,

* predictive entropy ``H[p̄] = -Σ_k p̄_k log p̄_k`` (total uncertainty);
* mutual information ``H[p̄] - (1/S) Σ_s H[p_s]`` (the members'
  disagreement; 0, exactly, for a single network and wherever the members
  give the same probabilities).

:func:`auroc` is the area under the ROC curve of a score separating OOD
(positive) from in-distribution inputs: the probability that a random OOD
input scores higher than a random in-distribution one (ties count half),
``(R_ood - n_ood(n_ood+1)/2) / (n_ood·n_in)`` with ``R_ood`` the sum of the
OOD inputs' ranks in the pooled scores (Mann–Whitney). 0.5 is chance.

Per-position predictions (a tagger's members ``[S, N, T, K]``, a segmenter's
``[S, N, H, W, K]``) have scores per position ``[N, ...]``; ``mask`` selects
the scored ones (``x != 0``), as in :mod:`keras_bnn.metrics`. One network's
``[N, T, K]`` is read as S = N members unless ``members=False`` or a ``mask``
``[N, T]`` says otherwise (:func:`uncertainty_scores`). :func:`ood_auroc`
ranks positions (``per="position"``: is this token / pixel OOD, the pixel-level
AUROC of anomaly segmentation) or examples (``per="example"``: each example's
mean score over its scored positions, e.g. a sentence's mean token entropy:
is this sequence OOD).

Numpy and scipy only: importing this module does not import TensorFlow.
"""

import numpy as np
import scipy.ndimage
import scipy.stats

from keras_bnn import positions
from keras_bnn.metric_inputs import as_numbers, check_probabilities, row_tolerance, two_class
from keras_bnn.validation import argument_error, check_bool, check_choice

#: The keys of :func:`ood_auroc`'s result.
OOD_SCORES = ("entropy", "mutual_information")

#: What :func:`ood_auroc` ranks: positions (tokens, pixels) or examples.
OOD_UNITS = ("position", "example")


def digits_28x28():
    """scikit-learn's digits as 28×28 MNIST-like images (module docstring).

    Returns:
        ``(x, y)``: x float32 ``[1797, 28, 28, 1]`` in [0, 1], y int64 digit
        labels ``[1797]``.
    """
    import sklearn.datasets  # noqa: PLC0415 - scikit-learn only when called

    images, labels = sklearn.datasets.load_digits(return_X_y=True)
    images = images.reshape(-1, 8, 8) / 16.0
    resized = scipy.ndimage.zoom(images, (1, 2.5, 2.5), order=1)  # [n, 20, 20]
    framed = np.pad(np.clip(resized, 0.0, 1.0), ((0, 0), (4, 4), (4, 4)))
    return framed[..., None].astype(np.float32), labels.astype(np.int64)


def _members(member_probs, mask, members, name):
    """The checked probabilities as members ``[S, N, ..., K]``: ``member_probs`` with a
    member axis added when ``members`` is False, or (None) for ``[N, K]`` or an array
    of only the ``mask``'s rank + 1 axes (:func:`uncertainty_scores`)."""
    probs = check_probabilities(two_class(member_probs, name), name, row_tolerance(member_probs))
    members = check_bool(members, "members", allow_none=True)
    if members is None:
        members = probs.ndim > (2 if mask is None else np.ndim(mask) + 1)
    return probs if members else probs[None]


def _scored(member_probs, mask, name, mask_name, members):
    """``(probs [S, M, K], Positions)``: the checked members at the scored positions."""
    probs = _members(member_probs, mask, members, name)
    at = positions.select(probs.shape[1:-1], mask, name, mask_name)
    return at.take(probs, name, lead=1), at


def _information(probs):
    """Entropy of the mean and mutual information of members ``[S, M, K]``: ``[M]`` each."""

    def entropy(p):
        return -np.sum(p * np.log(np.clip(p, 1e-38, None)), axis=-1)

    # Where every member gives the same row the disagreement is 0 exactly, not
    # the round-off of (1/S) Σ_s p_s and of the difference of entropies (up to
    # 1e-15, which would rank such positions at random in :func:`auroc`).
    agree = np.all(probs == probs[:1], axis=(0, -1))
    total = entropy(np.where(agree[:, None], probs[0], probs.mean(axis=0)))
    information = np.maximum(total - entropy(probs).mean(axis=0), 0.0)
    return {"entropy": total, "mutual_information": np.where(agree, 0.0, information)}


def uncertainty_scores(member_probs, mask=None, members=None):
    """Predictive entropy and mutual information of an ensemble's members.

    Args:
        member_probs: ``[S, N, ..., K]`` class probabilities of S members, or
            one network's ``[N, ..., K]`` (``members`` says which); K = 1 is a
            Bernoulli head's p(y=1), read as the rows [1 − p, p] (the numbers
            of a two-class softmax).
        mask: optional ``[N, ...]`` booleans, True = scored (module docstring).
        members: True: the first axis is the members' ([S, N, K] is S
            members on N examples); False: one network's ``[N, ..., K]``
            (the same as passing ``probs[None]``; its information is 0).
            None (default): one network for ``[N, K]`` and for an array with
            one axis more than ``mask``, else True, so that one network's
            ``[N, T, K]`` without a mask needs ``members=False``.

    Returns:
        dict ``{"entropy": ..., "mutual_information": ...}`` of float64
        arrays ``[N, ...]`` (the positions' shape), or ``[M]`` over the
        mask's True positions (the information is clipped at 0 against
        round-off).

    Raises:
        ValueError: if ``member_probs`` is not rows of probabilities with a
            position axis, ``mask`` is not of its positions' shape, or
            ``members`` is not True, False or None.
    """
    probs, at = _scored(member_probs, mask, "member_probs", "mask", members)
    return {key: at.restore(value) for key, value in _information(probs).items()}


def _unit_scores(member_probs, mask, per, name, mask_name, members):
    """The scores :func:`ood_auroc` ranks: ``[M]`` of the scored positions, or
    (``per="example"``) each example's mean over its scored positions, the
    examples with none left out."""
    if per == "position":
        return _information(_scored(member_probs, mask, name, mask_name, members)[0])
    probs = _members(member_probs, mask, members, name)  # checked once: at its dtype's tolerance
    at = positions.select(probs.shape[1:-1], None, name, mask_name)
    probs = at.take(probs, name, lead=1)
    scored = np.zeros(probs.shape[1], bool)
    index = positions.select(at.shape, mask, name, mask_name).index
    scored[slice(None) if index is None else index] = True
    scored = scored.reshape(at.shape[0], -1)
    kept, count = scored.any(axis=1), scored.sum(axis=1)
    return {key: np.sum(value.reshape(scored.shape) * scored, axis=1)[kept] / count[kept]
            for key, value in _information(probs).items()}


def auroc(in_scores, out_scores):
    """AUROC of a score that should be higher on OOD inputs (module docstring).

    Args:
        in_scores: [n_in] scores of in-distribution inputs (numbers of any dtype,
            bfloat16 included: ranked as float64).
        out_scores: [n_ood] scores of OOD inputs.

    Returns:
        float in [0, 1].

    Raises:
        ValueError: naming the set if it is not numbers, empty, or a score is not
            finite (NaN has no rank).
    """
    in_scores, out_scores = (np.ravel(as_numbers(values, name)) for values, name in (
        (in_scores, "in_scores"), (out_scores, "out_scores")))
    for name, values in (("in_scores", in_scores), ("out_scores", out_scores)):
        if values.size == 0:
            raise argument_error(name, "be non-empty", None, "auroc", got="an empty array")
        if not np.all(np.isfinite(values)):
            raise argument_error(name, "be finite", None, "auroc", got="NaN or inf scores")
    ranks = scipy.stats.rankdata(np.concatenate([in_scores, out_scores]))
    n_in, n_out = in_scores.size, out_scores.size
    return float((ranks[n_in:].sum() - n_out * (n_out + 1) / 2.0) / (n_in * n_out))


def ood_auroc(in_member_probs, out_member_probs, in_mask=None, out_mask=None,
              per="position", members=None):
    """AUROC of predictive entropy and of mutual information, OOD vs in-distribution.

    Args:
        in_member_probs: ``[S, N_in, ..., K]`` member probabilities on the
            in-distribution test set (K = 1: binary p(y=1), as for
            :func:`uncertainty_scores`).
        out_member_probs: ``[S, N_ood, ..., K]`` on the OOD set.
        in_mask, out_mask: optional ``[N_in, ...]`` / ``[N_ood, ...]``
            booleans, True = scored (``x != 0``).
        per: ``"position"`` ranks every scored position (token, pixel);
            ``"example"`` ranks each example by its mean score over its
            scored positions (module docstring). The same for ``[S, N, K]``.
        members: as for :func:`uncertainty_scores`, for both sets.

    Returns:
        dict ``{"entropy": AUROC, "mutual_information": AUROC}`` (the latter
        0.5 for one member, or members that agree everywhere: their
        information is 0 everywhere).

    Raises:
        ValueError: naming the argument, for arrays that are not rows of
            probabilities, two sets with different numbers of classes, a
            mask not of its set's positions' shape, ``per`` not one of
            :data:`OOD_UNITS`, or ``members`` not True, False or None.
    """
    per = check_choice(per, "per", OOD_UNITS, "ood_auroc")
    classes = [check_probabilities(two_class(probs, name), name, row_tolerance(probs)).shape[-1]
               for name, probs in (("in_member_probs", in_member_probs),
                                   ("out_member_probs", out_member_probs))]
    if classes[0] != classes[1]:
        raise argument_error("out_member_probs", f"have the K = {classes[0]} classes of "
                             "`in_member_probs`", None, "ood_auroc", got=f"K = {classes[1]}")
    inside = _unit_scores(in_member_probs, in_mask, per, "in_member_probs", "in_mask", members)
    outside = _unit_scores(out_member_probs, out_mask, per, "out_member_probs", "out_mask",
                           members)
    return {name: auroc(inside[name], outside[name]) for name in OOD_SCORES}
