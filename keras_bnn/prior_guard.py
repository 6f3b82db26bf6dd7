"""What keeps a model from being sampled without priors, and where Keras users are pointed.

Sampling needs a proper posterior: a prior on every trainable weight, and
the prior scaled by ``1/n`` in the potential (``BayesianModel.potential_terms``).
Three ways to get this wrong are caught here:

* a :class:`keras_bnn.BayesianModel` whose trainable weights carry no prior
  samples an improper flat posterior in those weights:
  :func:`warn_missing_priors` (called by ``BayesianModel.fit``) issues a
  :class:`MissingPriorWarning` naming them, unless the user opted in with
  ``compile(..., allow_flat_prior=True)``;
* ``keras.Sequential(...).compile(sampler=...)`` on a plain Keras model;
* ``compile(optimizer=kb.samplers.ATMC(...))`` on a plain Keras model: Keras
  would add the priors unscaled (n times too strong), log no diagnostics,
  and a model without priors would sample a flat posterior.

The last two never reach keras_bnn code, so :func:`install_compile_guard`
wraps Keras' ``compile`` once, here and nowhere else: on a model that is
not a :class:`keras_bnn.BayesianModel`, a ``sampler=`` argument or a
:class:`keras_bnn.samplers.Sampler` as ``optimizer`` raises a ``TypeError``
that points to :func:`keras_bnn.bayesian`. Every other call goes to Keras
unchanged. It is installed when ``keras_bnn.models.bayesian_model`` is
imported, which ``import keras`` triggers once ``keras_bnn`` is imported
(``keras_bnn._AfterKerasImport``).
"""

import functools
import warnings

import keras


class MissingPriorWarning(UserWarning):
    """A model is sampled while some trainable weights carry no prior (a flat, improper prior)."""


def weights_without_prior(model):
    """The paths of a model's trainable weights that carry no prior (no regularizer).

    Args:
        model: a built Keras model.

    Returns:
        List of variable paths (``"dense_1/bias"``), in the model's order.
    """
    return [getattr(v, "path", v.name) for v in model.trainable_variables
            if getattr(v, "regularizer", None) is None]


def warn_missing_priors(model):
    """Issues a :class:`MissingPriorWarning` naming the weights without a prior, if any.

    Weights listed in the model's ``flat_prior_weights`` (set by
    ``kb.bayesian(..., allow_flat=True)``) were made flat on purpose and are
    left out.

    Args:
        model: a built :class:`keras_bnn.BayesianModel`.

    Returns:
        The weights named (empty: nothing was issued).
    """
    chosen = set(getattr(model, "flat_prior_weights", ()))  # kb.bayesian(allow_flat=True)
    missing = [path for path in weights_without_prior(model) if path not in chosen]
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8
                                          else "")
        warnings.warn(
            f"keras_bnn: {len(missing)} trainable weight(s) carry no prior: {shown}. They are "
            "sampled under a flat, improper prior (the posterior may not exist). Put a prior "
            "on every weight with kb.bayesian(model) (or the kb.layers' *_prior arguments), "
            "or opt in with compile(..., allow_flat_prior=True).",
            MissingPriorWarning, stacklevel=3)
    return missing


def _refuse(model, what):
    raise TypeError(
        f"{type(model).__name__}.compile: {what} needs a keras_bnn.BayesianModel, which puts "
        "the prior into the potential as (1/n)·(-log p(θ)) and logs the sampler's "
        "diagnostics; a plain Keras model would sample without a proper prior. Turn the model "
        "into one with `model = kb.bayesian(model)` (a prior on every trainable weight; "
        "override with kernel_prior=, bias_prior=, priors={...}), then "
        "`model.compile(sampler=..., train_size=n, loss=...)`.")


def install_compile_guard(bayesian_model_class, sampler_class):
    """Wraps Keras' ``compile`` so that plain models refuse samplers (see module doc).

    The wrapper replaces the method where Keras defines it (its ``Trainer``,
    the class of ``keras.Model``'s MRO that holds ``compile``), not on
    ``keras.Model``: Keras reloads a saved model's compile config only when
    ``type(model).compile`` is that class's own (``compile_from_config``), so
    a wrapper on ``keras.Model`` made every plain model reload uncompiled.
    Idempotent: a second call changes nothing.

    Args:
        bayesian_model_class: :class:`keras_bnn.BayesianModel` (let through).
        sampler_class: :class:`keras_bnn.samplers.Sampler`.
    """
    owner = next(cls for cls in keras.Model.__mro__ if "compile" in vars(cls))
    compile_ = owner.compile
    if getattr(compile_, "_keras_bnn_guard", False):
        return

    @functools.wraps(compile_)
    def compile(self, *args, **kwargs):  # noqa: A001 (Keras' name)
        if not isinstance(self, bayesian_model_class):
            if kwargs.get("sampler") is not None:
                _refuse(self, "`sampler=`")
            optimizer = args[0] if args else kwargs.get("optimizer")
            if isinstance(optimizer, sampler_class):
                _refuse(self, f"a keras_bnn sampler as `optimizer` ({type(optimizer).__name__})")
        return compile_(self, *args, **kwargs)

    compile._keras_bnn_guard = True
    owner.compile = compile
