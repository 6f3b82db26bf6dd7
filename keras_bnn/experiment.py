"""The former name of :mod:`keras_bnn.runs`: ``kb.experiment.X`` is ``kb.runs.X``."""

from keras_bnn.runs import *  # noqa: F401,F403 - the alias re-exports every public name
from keras_bnn.runs import __all__  # noqa: F401
