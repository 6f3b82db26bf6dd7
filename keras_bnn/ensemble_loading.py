"""How a :class:`keras_bnn.PosteriorEnsemble` is made from stores and saved files.

:class:`Loading` is the ensemble's creation and serialisation (mixed into
it): :meth:`Loading.from_store` builds one from sample stores,
``get_config``/``from_config`` and ``load_own_variables`` are Keras'
``ensemble.save("x.keras")`` / ``keras.saving.load_model`` (the member
architecture and which weights are held once are in the config, the stacked
weights in the weights file), after which the member's layers whose call
reads state derived from their weights (an adapted ``Normalization``) derive
it again from the first member's values. The class stays registered as
``keras_bnn>PosteriorEnsemble`` in :mod:`keras_bnn.ensemble`.
"""

import keras
import numpy as np

from keras_bnn import ensemble_outputs, trainable_flags
from keras_bnn.member_model import check_ensemble_model, derived_state_layers
from keras_bnn.runs.rundir import stores_of
from keras_bnn.validation import check_int


class Loading:
    """The creation and serialisation methods of :class:`keras_bnn.PosteriorEnsemble`
    (mixed into it, before ``keras.Model``).

    Reads the ensemble's ``_member``, ``_stacks``, ``_shared``, ``num_members``,
    ``likelihood`` and ``member_loop``, and empties its ``_views`` where the
    member's derived state changes.
    """

    def _finalize_member_state(self):
        """Gives the member's layers that derive call-time state from their weights
        (``finalize_state``) the first member's values, and has them derive it.

        ``stateless_call`` swaps a member's weights into the graph, but an
        adapted ``Normalization`` reads the mean and variance it derived from
        its weights at its last ``finalize_state``: a member rebuilt from its
        config (``from_store``, a loaded ensemble) normalised with 0 and 1
        (wine: accuracy 0.33 where the samples' was 0.98). That state is
        non-trainable, the same in every sample.
        """
        member = self._member.value
        layers = derived_state_layers(member)
        position = {id(w): j for j, w in enumerate(member.weights)}
        for layer in layers:
            for weight in layer.weights:
                j = position[id(weight)]
                weight.assign(self._stacks[j] if j in self._shared else self._stacks[j][0])
            layer.finalize_state()
        if layers:
            self._views = {}  # graphs traced with the old state

    def load_own_variables(self, store):
        """Keras' loading of the stacked weights (``keras.saving.load_model``), after
        which the member's derived state is made again (:meth:`_finalize_member_state`).

        Args:
            store: Keras' variable store for this layer.
        """
        super().load_own_variables(store)
        self._finalize_member_state()

    # ------------------------------------------------------------- creation
    @classmethod
    def from_store(cls, store, max_samples=None, model=None, **kwargs):
        """Builds the ensemble of the samples in one or several sample stores.

        Args:
            store: a :class:`keras_bnn.SampleStore`, a path to a store, a run
                directory, a multi-chain run directory (``chain-k/samples``)
                or a list of these: the samples of all chains are pooled
                (chain by chain, in order).
            max_samples: use at most this many samples, evenly spaced over the
                pooled samples (the first and, for ``max_samples`` ≥ 2, the
                last included); ``None`` uses all.
            model: the member model; ``None`` rebuilds the model that wrote
                the store (``store.build_model()``).
            **kwargs: passed to the constructor (``likelihood``,
                ``member_loop``, ``name``). Without ``likelihood``, it is
                the one the store records (from the loss the model was
                compiled with, :func:`keras_bnn.likelihoods.infer`); for a
                model compiled without a loss ``"bernoulli"`` for one logit
                and ``"categorical"`` otherwise.

        Returns:
            A :class:`PosteriorEnsemble`.

        Raises:
            ValueError: if a store is empty, the stores are of different
                architectures, ``max_samples`` is not a positive integer,
                ``model`` is of another architecture than the samples, or
                without ``likelihood`` the stored loss names no likelihood
                (``mse``, a custom potential).
        """
        stores = stores_of(store)
        pooled = [(s, i) for s in stores for i in range(len(s))]
        if model is None:
            model = stores[0].build_model()
        else:
            stores[0].check_model(model)
        if max_samples is None:
            indices = range(len(pooled))
        else:
            max_samples = check_int(max_samples, "max_samples", 1)
            indices = np.round(
                np.linspace(0, len(pooled) - 1, min(max_samples, len(pooled)))).astype(int)
        if "likelihood" not in kwargs:
            kwargs["likelihood"] = ensemble_outputs.choose(
                None, check_ensemble_model(model)[2], stores[0].loss())
        chosen = (pooled[int(i)] for i in indices)
        return cls(model, (chain[j].weights for chain, j in chosen), **kwargs)

    def get_config(self):
        """The member architecture, S, likelihood, member loop and weights held once.

        Returns:
            dict for :meth:`from_config` (the weights apart).
        """
        return {
            "name": self.name,
            "model": keras.saving.serialize_keras_object(self._member.value),
            "num_members": self.num_members,
            "likelihood": self.likelihood,
            "member_loop": self.member_loop,
            "shared_weights": list(self._shared),
        }

    @classmethod
    def from_config(cls, config):
        """Rebuilds an ensemble of ``num_members`` zero weight sets.

        Keras' loading (``keras.saving.load_model``) then restores the
        weights. A config saved before weights were held once (no
        ``shared_weights``) stacks every weight, as that ensemble did.

        Args:
            config: dict from :meth:`get_config`.

        Returns:
            A :class:`PosteriorEnsemble`.
        """
        config = dict(config)
        model = trainable_flags.deserialize(config.pop("model"))
        zeros = [np.zeros(w.shape, w.dtype) for w in model.weights]
        config["shared_weights"] = config.get("shared_weights", ())
        return cls(model, [zeros] * config.pop("num_members"), **config)
