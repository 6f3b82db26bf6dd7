"""Priors over network weights, as Keras regularizers with real log-densities.

Every prior is a :class:`keras.regularizers.Regularizer`. Called on a weight
tensor it returns ``-log p(w)``: the full negative
log-density, normalising constants included (except :class:`UnitNormDirection`,
which is documented as unnormalised). The tempered posterior's mean-form
potential (see the design note) adds the prior as ``(1/n) * (-log p(θ))``:
the scaling by ``1/n`` is :meth:`keras_bnn.BayesianModel.potential_terms`'s,
so a prior is never changed by the model it sits in.

Densities are written with ``keras.ops`` (closed forms) so that they run under
every Keras backend; the tests check them against ``scipy.stats`` and
TensorFlow Probability.

Modules: :mod:`~keras_bnn.priors.base` (:class:`Prior`),
:mod:`~keras_bnn.priors.elementwise` (Normal, HeNormal, GlorotNormal, Laplace,
StudentT, HeStudentT, Cauchy) and :mod:`~keras_bnn.priors.group` (GroupLaplace,
UnitNormDirection); this module resolves priors by name (:func:`get`),
lists a model's weights under a prior (:func:`prior_variables`) and sums its
log-prior (:func:`log_prior`). Every class is reported as
``keras_bnn.priors.<name>``, the path its serialized config records.
"""

import keras
from keras import ops

from keras_bnn.priors.base import Prior
from keras_bnn.priors.elementwise import (Cauchy, GlorotNormal, HeNormal, HeStudentT, Laplace,
                                          Normal, StudentT)
from keras_bnn.priors.group import GroupLaplace, UnitNormDirection
from keras_bnn.validation import argument_error

__all__ = [
    "Prior",
    "Normal",
    "Laplace",
    "StudentT",
    "Cauchy",
    "HeNormal",
    "HeStudentT",
    "GlorotNormal",
    "GroupLaplace",
    "UnitNormDirection",
    "get",
    "serialize",
    "log_prior",
    "prior_variables",
]

_BY_NAME = {
    "normal": Normal,
    "laplace": Laplace,
    "student_t": StudentT,
    "cauchy": Cauchy,
    "he_normal": HeNormal,
    "he_student_t": HeStudentT,
    "glorot_normal": GlorotNormal,
    "group_laplace": GroupLaplace,
    "unit_norm_direction": UnitNormDirection,
}


def get(identifier, argument="prior"):
    """Resolves a prior from an instance, a name, a config dict or ``None``.

    Args:
        identifier: a :class:`Prior`, one of the names
            ``"normal", "laplace", "student_t", "cauchy", "he_normal",
            "he_student_t", "glorot_normal", "group_laplace",
            "unit_norm_direction"`` (default arguments), a
            dict from :func:`serialize`, or ``None``.
        argument: the caller's argument name, used in error messages.

    Returns:
        A :class:`Prior`, or ``None`` for ``None``.

    Raises:
        ValueError: for an unknown name or an object that is not a prior.
    """
    if identifier is None or isinstance(identifier, Prior):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key not in _BY_NAME:
            raise ValueError(
                f"Unknown prior for `{argument}`: {identifier!r}. Allowed names: "
                f"{', '.join(sorted(_BY_NAME))}."
            )
        return _BY_NAME[key]()
    if isinstance(identifier, dict):
        try:
            prior = keras.saving.deserialize_keras_object(identifier)
        except TypeError:  # unknown class: reported below, naming the argument
            prior = None
        if isinstance(prior, Prior):
            return prior
    raise argument_error(
        argument, f"be a keras_bnn.priors.Prior, a prior name ({', '.join(sorted(_BY_NAME))}), "
        "a serialized prior or None", identifier)


def serialize(prior):
    """Serializes a prior (or ``None``) for a layer's ``get_config``.

    Args:
        prior: a :class:`Prior` or ``None``.

    Returns:
        A config dict, or ``None``.
    """
    return None if prior is None else keras.saving.serialize_keras_object(prior)


def prior_variables(model):
    """The weights of θ that carry a prior: trainable ones whose regularizer is a :class:`Prior`.

    A frozen weight (``trainable=False``, a pretrained trunk under a sampled
    head) is no part of θ even where its layer gave it a prior: ``fit``
    leaves it as it is and Keras leaves its regularizer out of
    ``model.losses``, so the potential has no term of it.

    Args:
        model: a built Keras model (or layer).

    Returns:
        list of ``(variable, prior)``, in the order of ``model.trainable_weights``.
    """
    return [(variable, variable.regularizer) for variable in model.trainable_weights
            if isinstance(getattr(variable, "regularizer", None), Prior)]


def log_prior(model):
    """Total ``log p(θ)`` of a model: the sum over :func:`prior_variables`.

    Frozen weights are left out, as from the potential that ``fit`` samples.

    Args:
        model: a built Keras model (or layer).

    Returns:
        Scalar tensor.
    """
    terms = [prior.log_prob(variable.value) for variable, prior in prior_variables(model)]
    return ops.sum(ops.stack(terms)) if terms else ops.zeros(())
