"""The subclassed ``BayesianModel`` that the subclass workers sample.

Import it before any functional ``BayesianModel`` is made in the process
(see ``subclassed_fit.py``).
"""

import keras_bnn as kb


class Subclassed(kb.BayesianModel):
    """Its layers make their weights at the first call."""

    def __init__(self):
        super().__init__()
        self.hidden = kb.layers.Dense(8, activation="relu")
        self.out = kb.layers.Dense(2)

    def call(self, inputs):
        return self.out(self.hidden(inputs))
