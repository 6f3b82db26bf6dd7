"""Layers whose training-mode output is not a function of the weights and one example.

A sampler targets ``p(θ|D) ∝ exp(-U(θ)/T)`` with
``U(θ) = -Σ_i log p(y_i|x_i,θ) - log p(θ)``: each example's likelihood a
fixed function of θ. Two kinds of Keras layer break that in training mode,
where ``fit`` evaluates the potential:

* **noise layers** (``Dropout`` and its spatial forms, ``AlphaDropout``,
  ``GaussianDropout``, ``GaussianNoise``, the ``dropout`` /
  ``recurrent_dropout`` of recurrent and attention layers, and Keras'
  random augmentation layers, ``RandomFlip``, ``RandomCrop``, ``MixUp`` and
  the others that draw from a ``SeedGenerator`` kept as ``generator``) make
  ``U`` random: the chain samples the posterior of a noisy likelihood, not
  of the model that ``predict`` and the ensembles evaluate (without the
  noise);
* **batch normalisation** (trainable: Keras runs a frozen one,
  ``trainable=False``, on its fixed moving statistics, as in a pretrained
  backbone under a sampled head) computes each example's output from its batch's
  statistics, so the likelihood is not a product over examples, and a
  sample's moving statistics are an average over the chain's recent past,
  not the statistics of the sampled θ (measured on digits: recomputing
  them per sample moved an ensemble's NLL from 0.306 to 0.231). Under HMC,
  whose leapfrog runs without state updates, they never move at all.

:func:`check_stochastic_layers` (called by ``BayesianModel.fit`` with a
sampler) warns with :class:`StochasticLayerWarning` for an SG-MCMC
sampler, and refuses them for a full-batch kernel (HMC), whose Metropolis
test is exact only for a deterministic potential. keras_bnn's own
networks need neither: the ResNet++ blocks are weight-normalised and
BatchNorm-free (:mod:`keras_bnn.layers`), and the posterior average takes
the place of dropout.
"""

import warnings

import keras

#: Layers that add noise in training mode, with the attribute holding their rate.
_NOISE_LAYERS = ((keras.layers.Dropout, "rate"), (keras.layers.AlphaDropout, "rate"),
                 (keras.layers.GaussianDropout, "rate"), (keras.layers.GaussianNoise, "stddev"))
#: Attributes of other layers (LSTM, GRU, MultiHeadAttention) that set a dropout rate.
_DROPOUT_ATTRIBUTES = ("dropout", "recurrent_dropout", "_dropout")


class StochasticLayerWarning(UserWarning):
    """A model sampled with dropout, noise or batch-normalisation layers (see module doc)."""


def _noise(layer):
    """The layer's training-mode noise as ``"dropout 0.2"``-like text, or None."""
    for kind, attribute in _NOISE_LAYERS:
        if isinstance(layer, kind):
            value = getattr(layer, attribute, 0)
            return f"{attribute} {value:g}" if value else None
    if isinstance(getattr(layer, "generator", None), keras.random.SeedGenerator):
        return f"random augmentation, {type(layer).__name__}"  # Keras' augmentation layers
    rates = {attribute.lstrip("_"): value for attribute in _DROPOUT_ATTRIBUTES
             if isinstance(value := getattr(layer, attribute, 0), (int, float))
             and not isinstance(value, bool) and value > 0}
    return ", ".join(f"{name} {value:g}" for name, value in rates.items()) or None


def stochastic_layers(model):
    """The layers of ``model`` (nested ones too) that make the potential stochastic.

    A layer found is not searched further (an LSTM's cell, an attention
    layer's own ``Dropout``). A frozen batch normalisation
    (``trainable=False``) is deterministic and not listed; frozen noise
    layers still add noise and are.

    Args:
        model: a Keras model.

    Returns:
        dict: ``{"noise": [(layer name, "dropout 0.2"), ...], "batch_norm":
        [layer name, ...]}`` (empty lists when there are none).
    """
    found = {"noise": [], "batch_norm": []}

    def visit(parent):  # a layer found is named once, not again through its sublayers
        for layer in parent._flatten_layers(include_self=False, recursive=False):
            if isinstance(layer, keras.layers.BatchNormalization):
                if layer.trainable:  # frozen, Keras runs it on its moving statistics
                    found["batch_norm"].append(layer.name)
            elif (noise := _noise(layer)) is not None:
                found["noise"].append((layer.name, noise))
            else:
                visit(layer)

    visit(model)
    return found


def check_stochastic_layers(model, full_batch, owner="fit"):
    """Warns of (SG-MCMC) or refuses (HMC) the layers of :func:`stochastic_layers`.

    Args:
        model: the model about to be sampled.
        full_batch: True for a kernel that is exact only on a deterministic
            potential (``TransitionKernel.full_batch``: HMC).
        owner: the method that samples (``"fit"``, ``"train_on_batch"``), for
            the error.

    Returns:
        The :func:`stochastic_layers` found.

    Raises:
        ValueError: naming the layers, for a ``full_batch`` kernel.
    """
    found = stochastic_layers(model)
    parts = []
    if found["noise"]:
        parts.append(f"{', '.join(f'{name!r} ({noise})' for name, noise in found['noise'])} "
                     "add noise in training, so the chain samples the posterior of a noisy "
                     "likelihood, not of the model that predict and the ensembles evaluate")
    if found["batch_norm"]:
        parts.append(f"{', '.join(map(repr, found['batch_norm']))} (BatchNormalization) "
                     "compute each example's output from its batch, and a sample's moving "
                     "statistics are an average over the chain's past, not the sampled "
                     "weights' (under HMC they never move)")
    if not parts:
        return found
    text = (f"layers {'; layers '.join(parts)}. Remove them for sampling (the posterior "
            "average takes dropout's place; keras_bnn.layers' ResNet++ blocks are "
            "weight-normalised and BatchNorm-free)")
    if full_batch:
        raise ValueError(f"{owner}: HMC's Metropolis test is exact only for a potential that is a "
                         f"fixed function of the weights, and the `model`'s {text}.")
    warnings.warn(f"keras_bnn: {text}, or silence this StochasticLayerWarning if that is "
                  "meant.", StochasticLayerWarning, stacklevel=3)
    return found
