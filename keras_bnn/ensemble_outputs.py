"""The outputs of a :class:`keras_bnn.PosteriorEnsemble`'s member: one, or several.

A member of several outputs (a multi-task model: a list or a dict of
heads, e.g. a softmax head and a Gaussian one) is averaged output by
output, each under its own likelihood exactly as a one-output ensemble
averages its output (:mod:`keras_bnn.uncertainty`). The outputs are named
(:func:`output_names`) by the dict's keys, else by the layers that compute
them (Keras' ``output_names``; ``output_0``, ``output_1``, ... for a
subclassed member, or for names that repeat), in Keras' flat order (a
dict's keys sorted). ``call``/``predict`` return the member's structure (a
list or a dict), ``predict_uncertainty`` one :func:`keras_bnn.uncertainty.summary`
per output in that structure, and the export one named output per model
output (its predictive, as ``predict`` gives it) and its summary's outputs
named ``<output>_<key>`` (:func:`served`). A member of one output (a
one-entry dict too) is the ensemble of one output, unchanged.

This module imports Keras, :mod:`keras_bnn.likelihoods`, :mod:`keras_bnn.loss_checks`,
:mod:`keras_bnn.uncertainty` and :mod:`keras_bnn.validation`.
"""

import keras

from keras_bnn import likelihoods as likelihoods_lib
from keras_bnn import loss_checks
from keras_bnn import uncertainty
from keras_bnn.likelihoods import LIKELIHOODS
from keras_bnn.validation import argument_error, check_choice


def output_names(model, outputs):
    """The names of a member's outputs in Keras' flat order, or None for one output.

    Args:
        model: the member model.
        outputs: its symbolic output structure (a KerasTensor, or a list or dict).

    Returns:
        list of str (a dict's keys sorted; a list's output layer names), or None.
    """
    leaves = keras.tree.flatten(outputs)
    if len(leaves) == 1:
        return None
    if isinstance(outputs, dict):
        return sorted(outputs)
    names = list(getattr(model, "output_names", None) or ())
    if len(names) != len(leaves) or len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(leaves))]
    return [str(name) for name in names]


def pack(leaves, names, as_dict):
    """Per-output values in the structure of the member's outputs.

    Args:
        leaves: one value per output, in :func:`output_names`' order.
        names: the output names, or None for one output.
        as_dict: whether the member outputs a dict.

    Returns:
        ``leaves[0]`` for one output, else a dict by name or a list.
    """
    if names is None:
        return leaves[0]
    return dict(zip(names, leaves)) if as_dict else list(leaves)


def output_loss(loss, name, index):
    """One output's loss in ``compile``'s ``loss``.

    Args:
        loss: ``compile``'s ``loss``.
        name: the output's name (None for one output).
        index: its index in :func:`output_names`' order.

    Returns:
        A dict's loss by name, a list's by index, else the one loss (Keras
        gives each output that one); None where there is none.
    """
    if isinstance(loss, dict) and "class_name" not in loss:
        return loss.get(name)
    if isinstance(loss, (list, tuple)):
        return loss[index] if index < len(loss) else None
    return loss


def _checked(likelihood, units, name):
    """``likelihood`` checked against a head of ``units`` (naming the output ``name``)."""
    owner = None if name is None else f"PosteriorEnsemble output {name!r}"
    likelihood = check_choice(likelihood, "likelihood", LIKELIHOODS, owner=owner)
    try:
        likelihoods_lib.check_units(likelihood, units)
    except ValueError as error:
        if name is None:
            raise
        raise ValueError(f"output {name!r}: {error}") from None
    return likelihood


def choose(likelihood, units, loss=None):
    """The ensemble's likelihood: one, or one per output (a dict by output name).

    Args:
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS`; for
            several outputs that one for every output, a list (one per
            output, in their order) or a dict by output name; or None: each
            output's :func:`keras_bnn.likelihoods.infer` from its loss in
            ``loss`` (without one: ``"bernoulli"`` for one unit, else
            ``"categorical"``).
        units: the output's units (an int), or a dict of them by output name
            (:func:`keras_bnn.member_model.check_ensemble_model`).
        loss: the member's (or its store's) compiled loss, or None.

    Returns:
        str for one output; a dict ``{output name: likelihood}`` for several.

    Raises:
        ValueError: naming ``likelihood`` for an unknown one, one that does
            not fit its output's head, a list of another length or a dict of
            other names; as :func:`keras_bnn.likelihoods.infer` for a loss that
            names no likelihood.
    """
    if not isinstance(units, dict):
        return _checked(likelihoods_lib.infer(units, loss) if likelihood is None
                        else likelihood, units, None)
    names = list(units)
    if likelihood is None:
        given = [likelihoods_lib.infer(units[name], output_loss(loss, name, i))
                 for i, name in enumerate(names)]
    elif isinstance(likelihood, str):
        given = [likelihood] * len(names)
    elif isinstance(likelihood, dict) and sorted(likelihood) == sorted(names):
        given = [likelihood[name] for name in names]
    elif isinstance(likelihood, (list, tuple)) and len(likelihood) == len(names):
        given = list(likelihood)
    else:
        raise argument_error(
            "likelihood", f"be one of {LIKELIHOODS}, or one per output: a list of "
            f"{len(names)} or a dict with keys {names}", likelihood, "PosteriorEnsemble")
    return {name: _checked(value, units[name], name) for name, value in zip(names, given)}


def check_logit_outputs(model, likelihoods):
    """Refuses a categorical or Bernoulli output that a softmax or sigmoid computes.

    The ensemble applies the softmax or sigmoid to the member's logits itself: a
    Keras classifier ending in ``activation="softmax"`` was squashed twice, its
    predictive pulled toward uniform with no error (until 2026-11-30; the
    weights of such a member serve a member without that activation as they are).
    A log-softmax output is taken (its softmax is that of the logits), and a
    Gaussian output is not checked.

    Args:
        model: the member model (a model without a graph is not checked).
        likelihoods: the likelihood of each output, in :func:`output_names`' order.

    Raises:
        ValueError: naming ``model`` and the output layer, as
            :func:`keras_bnn.loss_checks.check_logit_layer`.
    """
    layers = loss_checks.output_layers(model)
    if len(layers) != len(likelihoods):  # a nested model of several outputs at the end
        likelihoods = ["categorical"] * len(layers) if "gaussian" not in likelihoods else []
    for layer, likelihood in zip(layers, likelihoods):
        if likelihood != "gaussian":
            loss_checks.check_logit_layer(model, layer, "PosteriorEnsemble",
                                          ("softmax", "sigmoid"))


def check_scoring(arguments, likelihood, names):
    """:func:`keras_bnn.loss_checks.check_ensemble_scoring`, output by output.

    Args:
        arguments: the ensemble's ``compile`` arguments by name; for several
            outputs ``loss``, ``metrics`` and ``weighted_metrics`` may be one
            for all outputs, a list (in the outputs' order) or a dict by name,
            as Keras takes them for a multi-output model.
        likelihood: the ensemble's (:func:`choose`).
        names: the output names, or None for one output.

    Returns:
        ``arguments``, each Gaussian output's ``GaussianNLL`` loss replaced by a
        ``PredictiveGaussianNLL``.

    Raises:
        ValueError: as :func:`keras_bnn.loss_checks.check_ensemble_scoring`
            for any output's loss or metrics.
    """
    if names is None:
        return loss_checks.check_ensemble_scoring(arguments, likelihood)
    keys = ("loss", "metrics", "weighted_metrics")
    losses = []
    for index, name in enumerate(names):
        own = {key: output_loss(arguments.get(key), name, index) for key in keys}
        losses.append(loss_checks.check_ensemble_scoring(own, likelihood[name])["loss"])
    loss = arguments.get("loss")
    if isinstance(loss, dict) and "class_name" not in loss:
        loss = {name: losses[names.index(name)] for name in loss}
    elif isinstance(loss, (list, tuple)):
        loss = losses[:len(loss)]
    elif loss is not None and len(set(map(id, losses))) == 1:
        loss = losses[0]  # one loss for all, replaced alike (or not at all)
    elif loss is not None:
        loss = losses
    return dict(arguments, loss=loss)


#: The keys of each likelihood's :func:`keras_bnn.uncertainty.summary`.
SUMMARY_KEYS = {"categorical": uncertainty.CATEGORICAL_OUTPUTS,
                "bernoulli": uncertainty.BERNOULLI_OUTPUTS,
                "gaussian": uncertainty.GAUSSIAN_OUTPUTS}


def check_served_names(likelihoods):
    """Refuses outputs of which two would be served under one name (:func:`served`).

    Until 2026-11-29 the later silently replaced the earlier: outputs
    ``age`` (Gaussian) and ``age_mean`` served ``age_mean`` once, the second
    output's, and ``age``'s mean was not served.

    Args:
        likelihoods: dict output name → likelihood (``ensemble.likelihood``).

    Raises:
        ValueError: naming both outputs and the name they share.
    """
    owners = {}
    for name, likelihood in likelihoods.items():
        for served_name in [name] + [f"{name}_{key}" for key in SUMMARY_KEYS[likelihood]]:
            if served_name in owners:
                raise ValueError(
                    f"PosteriorEnsemble.export: the model's outputs {owners[served_name]!r} "
                    f"and {name!r} would both be served as {served_name!r} (an output `name` "
                    "is served as `name` and `name_<key>` for each key of its summary); "
                    "rename one of the model's outputs.")
            owners[served_name] = name


def served(ensemble, inputs):
    """The export's outputs of an ensemble of several outputs, the members run once.

    Per output ``name``: ``name`` the predictive (as ``call`` gives it) and
    ``name_<key>`` for each key of its :func:`keras_bnn.uncertainty.summary`
    (e.g. ``cls_probabilities``, ``cls_mutual_information``, ``reg_variance``).

    Args:
        ensemble: a :class:`keras_bnn.PosteriorEnsemble` of several outputs.
        inputs: the member's inputs (tensors).

    Returns:
        dict of tensors, NaN in the rows of a non-finite input.
    """
    members, finite, _ = ensemble._members_and_finite_rows(inputs)
    outputs = {}
    for name, leaf in zip(ensemble.output_names, members):
        likelihood = ensemble.likelihood[name]
        outputs[name] = uncertainty.nan_rows(uncertainty.predictive(leaf, likelihood), finite)
        for key, value in uncertainty.summary(leaf, likelihood).items():
            outputs[f"{name}_{key}"] = uncertainty.nan_rows(value, finite)
    return outputs
