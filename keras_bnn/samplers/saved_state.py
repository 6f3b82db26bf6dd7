"""A sampler's saved state: its variables saved with their names, loaded by name.

:class:`SavedState` is the part of :class:`keras_bnn.samplers.Sampler` that
saves and loads the optimizer's variables (``model.save``, ``save_weights``,
the run backups); the layout of what it writes is
:mod:`keras_bnn.samplers.state_layout`'s.
"""

import warnings

import keras
import numpy as np

from keras_bnn.samplers.state_layout import (encode_names, mismatch, NAMES_KEY, saved_names,
                                             state_count)


class SavedState:
    """Saving and loading a sampler's variables by name (a mixin of ``Sampler``).

    Needs the ``keras.optimizers.Optimizer`` after it in the class's bases and a
    ``_initializers`` dict (variable path → initializer) set in ``__init__``;
    reads the slots declared by ``Sampler.add_slot`` (``_slots``).
    """

    #: Set by :meth:`keras_bnn.BayesianModel.load_weights` while it loads: builds
    #: the sampler on the model's variables (:meth:`load_own_variables`).
    build_on_load = None

    def add_variable(self, shape, initializer="zeros", **kwargs):
        """Keras' ``Optimizer.add_variable``, keeping the initializer: a variable a
        loaded state lacks is set to its initial value (:meth:`load_own_variables`).

        Args:
            shape: the variable's shape.
            initializer: a Keras initializer or its name.
            **kwargs: the other arguments of ``keras.optimizers.Optimizer.add_variable``.

        Returns:
            The optimizer variable.
        """
        variable = super().add_variable(shape, initializer=initializer, **kwargs)
        self._initializers[variable.path] = keras.initializers.get(initializer)
        return variable

    def state_names(self):
        """The names of :attr:`variables` in a saved state, independent of the layers' names.

        Returns:
            List of str: ``"<slot>/<i>"`` for the :meth:`add_slot` state ``slot`` of
            trainable variable ``i`` (``"momentum/0"``), the variable's name otherwise
            (``"iteration"``, ``"temperature"``, ``"auto_step_size"``, ...).
        """
        slots = {id(variable): f"{name}/{i}" for name, slot in getattr(self, "_slots", {}).items()
                 for i, variable in enumerate(slot)}
        return [slots.get(id(variable), variable.name) for variable in self.variables]

    def save_own_variables(self, store):
        """Keras' saving of the optimizer's state, with :meth:`state_names` beside.

        Args:
            store: Keras' store of the optimizer's variables.
        """
        super().save_own_variables(store)
        store[NAMES_KEY] = encode_names(self.state_names())

    def load_own_variables(self, store):
        """Keras' loading of the optimizer's state (``model.load_weights``).

        An unbuilt sampler handed a built one's state (more variables than it has) first
        calls :attr:`build_on_load` if it is set (a function of no argument that builds it
        on the model's variables): the chain's state is restored, not skipped as Keras
        skips an unbuilt optimizer's.

        A built sampler loads a state with names (:meth:`save_own_variables`) by name:
        each of its variables the state has takes the saved value, each the state lacks
        (added to the sampler since) is set to its initial value, and saved variables
        the sampler lacks (removed or renamed since) are not loaded, with a
        ``RuntimeWarning`` naming them and the variables set to their initial values.
        A state without names (saved by an earlier version) loads by name when it is
        short of exactly the variables added since
        (:func:`~keras_bnn.samplers.state_layout.saved_names`: the
        :data:`~keras_bnn.samplers.state_layout.ADDED_SINCE_NAMES` slots, and
        ``previous_ratio`` for one saved before the warm-up had it), by position, as
        Keras loads it, otherwise. A built sampler handed an unbuilt one's
        unnamed state at step 0 (saved before any step) has it already: no "Skipping
        variable loading".

        Args:
            store: Keras' store of the optimizer's variables.
        """
        count = state_count(store)
        if not self.built and self.build_on_load is not None and count > len(self.variables):
            self.build_on_load()
        names = self.state_names()
        saved = saved_names(store, count, names) if self.built else None
        if saved is None:
            store = {str(i): store[str(i)] for i in range(count)}
            if not (self.built and count < len(self.variables)
                    and (count == 0 or not np.any(store["0"]))):
                super().load_own_variables(store)
            return
        if (message := mismatch(saved, names)) is not None:
            warnings.warn(f"{type(self).__name__}: {message}.", RuntimeWarning, stacklevel=2)
        position = {name: str(i) for i, name in enumerate(saved)}
        for name, variable in zip(names, self.variables):
            variable.assign(store[position[name]] if name in position else
                            self._initializers[variable.path](variable.shape, variable.dtype))

    def loads_whole(self, store):
        """Whether :meth:`load_own_variables` restores this built sampler's whole state.

        True for a named state (a variable it lacks starts at its initial value), an
        unnamed one of as many variables as the sampler has (by position), and one short
        of exactly the variables added since
        (:func:`~keras_bnn.samplers.state_layout.saved_names`); False where the state is
        another sampler's.

        Args:
            store: Keras' store of the optimizer's variables, or a dict of them.

        Returns:
            bool.
        """
        count = state_count(store)
        return (count == len(self.variables)
                or saved_names(store, count, self.state_names()) is not None)
