"""The names a sampler's saved state carries, so that it loads by name.

Keras saves an optimizer's variables under the keys ``"0"``, ``"1"``, ... in
the order of ``optimizer.variables`` and loads them only when the counts
match. A sampler saves its variables' names beside them, under
:data:`NAMES_KEY` (:meth:`keras_bnn.samplers.Sampler.save_own_variables`), and
a state that has them loads by name
(:meth:`keras_bnn.samplers.Sampler.load_own_variables`).
"""

import numpy as np

#: The store key of the names: one UTF-8 string, the names joined by newlines,
#: as a uint8 array (Keras' H5 store refuses string arrays: "Invalid dtype: str320").
NAMES_KEY = "names"

#: The variables added to the samplers between the first saved states and the
#: first named ones: an unnamed state short of exactly these loads by name
#: without them.
ADDED_TO_UNNAMED_STATES = ("auto_step_size_previous_ratio",)

#: The slots added since states carry names: no unnamed state holds them, and a
#: named one that lacks them loads by name (they start at their initial values).
ADDED_SINCE_NAMES = ("virial_carry",)


def encode_names(names):
    """The names as a store value.

    Args:
        names: list of str without newlines.

    Returns:
        1-D uint8 array.
    """
    return np.frombuffer("\n".join(names).encode(), np.uint8)


def state_count(store):
    """The number of variables in a sampler's saved ``store`` (its keys less :data:`NAMES_KEY`).

    Args:
        store: Keras' store of a sampler's variables, or a dict of them.

    Returns:
        int.
    """
    return len(store.keys()) - (NAMES_KEY in store)


def saved_names(store, count, names):
    """The names of the variables in ``store``, or None when it loads by position.

    Args:
        store: Keras' store of a sampler's variables.
        count: the number of variables in it (its keys less :data:`NAMES_KEY`).
        names: the names of the loading sampler's variables, in order.

    Returns:
        The stored names. For an unnamed state: ``names`` less the slots of
        :data:`ADDED_SINCE_NAMES`, or less those and :data:`ADDED_TO_UNNAMED_STATES`,
        the one of ``count`` names, when that is fewer than ``names``; otherwise
        None (it loads by position, or is another sampler's).
    """
    if NAMES_KEY in store:
        return bytes(np.asarray(store[NAMES_KEY], np.uint8)).decode().split("\n")
    named = [name for name in names if name.split("/")[0] not in ADDED_SINCE_NAMES]
    for unnamed in (named, [name for name in named if name not in ADDED_TO_UNNAMED_STATES]):
        if count == len(unnamed) < len(names):
            return unnamed
    return None


def mismatch(saved, names):
    """What a state saved with ``saved`` names loses in a sampler with ``names``.

    Args:
        saved: the stored names.
        names: the loading sampler's names.

    Returns:
        None when every saved variable is the sampler's; otherwise a sentence
        naming the saved variables it lacks and its own the state lacks (a
        slot once, for all its trainable variables).
    """
    def grouped(which):
        return ", ".join(sorted({name.split("/")[0] for name in which})) or "none"

    unknown = set(saved) - set(names)
    if not unknown:
        return None
    return (f"the saved state's variables {grouped(unknown)} are not this sampler's and "
            "are not loaded; its variables the state lacks start at their initial values: "
            f"{grouped(set(names) - set(saved))}")
