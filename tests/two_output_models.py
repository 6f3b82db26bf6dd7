"""A subclassed ``BayesianModel`` of two heads, for the scripts that
``tests/test_label_forms.py`` and ``tests/test_weight_slots.py`` run in a
process of their own (``fit_helpers.script_result``).

Import it before any functional ``BayesianModel`` is made in the process: once
one exists, Keras has injected ``Functional`` into the class's bases and a
subclass without inputs can no longer be made (``tests/workers/subclassed_fit.py``).
"""

import keras
import numpy as np

import keras_bnn as kb


class TwoHeads(kb.BayesianModel):
    """Two ``Dense(units)`` heads on one input, returned as a tuple (no priors)."""

    def __init__(self, units):
        super().__init__()
        self.first, self.second = keras.layers.Dense(units), keras.layers.Dense(units)

    def call(self, x):
        return self.first(x), self.second(x)


def inputs(n):
    """``n`` rows of 4 standard normal float32 features (seed 0)."""
    return np.random.default_rng(0).normal(size=(n, 4)).astype("float32")
