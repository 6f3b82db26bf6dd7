"""A run's chains read from its sample stores, for the diagnostics and ArviZ.

:func:`chain_weights` gives the weights that vary between draws and
:func:`chain_predictions` every draw's prediction, per chain, as the arrays
:func:`keras_bnn.diagnostics.convergence_summary` scores;
:func:`to_inference_data` turns the chains into an ``arviz.InferenceData``.
Chains of different lengths are cut to the last S draws, S the shortest.

This module imports numpy and Keras (ArviZ inside the function that uses
it), not TensorFlow under ``KERAS_BACKEND=jax``.
"""

import numpy as np

from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.ensemble_weights import same_in_every_set
from keras_bnn.likelihoods import LIKELIHOODS, infer
from keras_bnn.runs.rundir import stores_of
from keras_bnn.shared_weights import non_trainable_indices
from keras_bnn.validation import check_choice


def _common_draws(stores):
    """The last S samples of each chain (checked :class:`~keras_bnn.runs.Chains`), S the
    shortest chain's length."""
    draws = min(len(store) for store in stores)
    return [[store[i] for i in range(len(store) - draws, len(store))] for store in stores]


def chain_weights(stores):
    """The weights that vary between draws, per chain: ``[C, S, D]`` (flattened, in order).

    A weight the same, bit for bit, in every draw (a frozen backbone's, which
    a store reads once from its shared file) is left out: it would be S·C
    copies of constant components, which
    :func:`keras_bnn.diagnostics.convergence_summary` leaves out anyway, so
    its R-hat and ESS are those of every weight. Chains of different lengths
    are cut to the last S draws, S the shortest.

    Args:
        stores: the chains, as ``source`` of :func:`to_inference_data`: a list
            of :class:`keras_bnn.SampleStore` (one per chain), a store, a run
            directory or a list of paths (:func:`keras_bnn.runs.stores_of`).

    Returns:
        float64 array (D = 0 when no weight varies).

    Raises:
        ValueError: as :func:`keras_bnn.runs.stores_of`: for no store, an
            empty one, or chains of different architectures.
    """
    draws = _common_draws(stores_of(stores))
    every = [sample.weights for chain in draws for sample in chain]
    varying = [j for j in range(len(every[0])) if not same_in_every_set(every, j)]
    return np.array([[np.concatenate([np.ravel(sample.weights[j]) for j in varying] or [[]])
                      for sample in chain] for chain in draws], dtype=np.float64)


def _likelihood(stores, model, likelihood):
    """``likelihood`` checked, or for None the stores' own (as ``from_store``)."""
    if likelihood is None:
        return infer(model.outputs[0].shape[-1], stores[0].loss())
    return check_choice(likelihood, "likelihood", LIKELIHOODS)


def chain_predictions(stores, x, likelihood=None):
    """Each sample's prediction on ``x``, per chain: ``[C, S, N, units]``.

    Chains of different lengths are cut to the last S draws, S the shortest.

    Args:
        stores: the chains, as for :func:`chain_weights`.
        x: inputs (array or dataset) accepted by ``keras.Model.predict``.
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS` (see
            :meth:`keras_bnn.PosteriorEnsemble.predict_members`); None: the
            one the stored model was compiled with, else its head's (as
            :meth:`keras_bnn.PosteriorEnsemble.from_store`).

    Returns:
        numpy array.

    Raises:
        ValueError: as for :func:`chain_weights`, or for an unknown ``likelihood``.
    """
    stores = stores_of(stores)
    draws = _common_draws(stores)
    model = stores[0].build_model()
    members = PosteriorEnsemble(  # one ensemble of every draw: one traced function
        model, [s.weights for chain in draws for s in chain],
        likelihood=_likelihood(stores, model, likelihood), member_loop="map").predict_members(x)
    return members.reshape(len(draws), -1, *members.shape[1:])


def to_inference_data(source, x=None, likelihood=None):
    """The chains of a run as an ``arviz.InferenceData``.

    ``posterior`` holds every sampled weight of the model (one variable per
    weight, named after its path, dims ``(chain, draw, *shape)``),
    ``constant_data`` once each non-trainable weight that is the same in
    every draw (a frozen backbone's; no chain × draw copies);
    ``posterior_predictive`` (when ``x`` is given) holds the predictions of
    every draw on ``x`` (``"probabilities"``, or ``"outputs"`` ``[μ, log σ²]``
    for a Gaussian head). ``az.summary``, ``az.plot_trace``, ``az.plot_rank`` and
    ``az.rhat`` then work as for any PPL's output. Chains of different
    lengths are cut to the last S draws, S the shortest.

    Args:
        source: a run directory (one chain, or ``chain-k`` subdirectories),
            a :class:`keras_bnn.SampleStore`, or a list of stores / paths
            (see :func:`keras_bnn.runs.stores_of`).
        x: optional inputs for the posterior predictive.
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS`, or
            None for the stores' own (see :func:`chain_predictions`).

    Returns:
        ``arviz.InferenceData``.

    Raises:
        ValueError: for empty stores, chains of different architectures or
            an unknown ``likelihood``.
    """
    import arviz as az  # noqa: PLC0415 - heavy import, only needed here

    stores = stores_of(source)
    model = stores[0].build_model()
    likelihood = _likelihood(stores, model, likelihood)
    names = [w.path.replace("/", "_") for w in model.weights]
    draws = _common_draws(stores)
    every = [sample.weights for chain in draws for sample in chain]
    held = {j for j in non_trainable_indices(model) if same_in_every_set(every, j)}
    groups = {"posterior": {
        name: np.array([[sample.weights[j] for sample in chain] for chain in draws])
        for j, name in enumerate(names) if j not in held}}
    if held:
        groups["constant_data"] = {names[j]: every[0][j] for j in sorted(held)}
    if x is not None:
        key = "outputs" if likelihood == "gaussian" else "probabilities"
        groups["posterior_predictive"] = {key: chain_predictions(stores, x, likelihood)}
    return az.from_dict(**groups)
