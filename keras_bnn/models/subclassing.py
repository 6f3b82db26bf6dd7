"""What Keras does for a ``keras.Model`` subclass, done for a ``BayesianModel`` subclass too.

Constructor arguments. Keras records the arguments a subclass's
``__init__`` was called with, where all are basic types (``str``,
``int``, ``float``, ``bool``, ``None``, nested in lists, tuples and dicts),
and its ``get_config`` returns them (its automatic config), so that
``load_model`` calls ``Net(units=8)`` again, but only for a class that does
not override ``get_config``: ``BayesianModel`` does (to record the
priors), and until 2026-11-29 its subclasses' configs had no argument
(``Net(units=8)`` reloaded as ``Net()``: a record of weights of other
shapes, refused). And Keras 3.15's ``keras.Model.__new__`` passes no argument
on to where the record is made: for a plain ``keras.Model`` subclass it
holds ``__init__``'s defaults (measured: ``Plain(units=8)``'s config says
``units=4``). ``BayesianModel.__new__`` has the record made from the
arguments given (positional ones too), and ``BayesianModel.get_config``
adds it (:func:`init_arguments`); a functional model's config is Keras'
graph, as before. Where an argument is of another type (a prior object)
Keras makes no record, and the config has no argument, as before: a prior
given so comes back from the config's record of every weight's prior; for
any other such argument, give the class a ``get_config`` (and
``from_config``).

State of a built model. Keras locks a built subclassed model's state (no
new metric, layer or variable), and ``BayesianModel.compile`` makes its
sampling diagnostics' metrics: until 2026-11-29 ``compile`` after
``net(x)`` (to print ``summary()``) raised Keras' "You cannot add new
elements of state". :func:`make_sampling_trackers` unlocks the tracking for
them, as Keras does for its own changes to a built layer.
"""

import keras

from keras_bnn.models import weight_mean
from keras_bnn.output_slots import output_paths

#: The diagnostics averaged over an epoch (``keras.metrics.Mean``).
TRACKED_MEANS = (
    "nll",
    "prior",
    "step_size",
    "kinetic_temperature",
    "configurational_temperature",
    "gradient_noise_ratio",
    "acceptance_rate",
)


def functional_arguments(args, kwargs):
    """Whether ``BayesianModel(*args, **kwargs)`` is the functional call.

    Keras' own test: two positional arguments, or ``inputs`` and
    ``outputs`` among them.

    Args:
        args, kwargs: the constructor's arguments.

    Returns:
        bool.
    """
    return (len(args) == 2 or (len(args) == 1 and "outputs" in kwargs)
            or {"inputs", "outputs"} <= set(kwargs))


def init_arguments(model, own_get_config):
    """The arguments ``model``'s ``__init__`` was called with, as Keras' config gives them.

    Args:
        model: a subclassed ``BayesianModel``.
        own_get_config: ``BayesianModel.get_config`` (a class that overrides
            it writes its config itself, as Keras leaves it to a
            ``keras.Model`` subclass that does).

    Returns:
        dict: ``{argument: value}`` (``name`` left out: Keras' config has
        it), empty where the class overrides ``get_config`` or an argument
        is not of a basic type (Keras made no record).
    """
    record = getattr(model, "_auto_config", None)  # Keras' record, made in Operation.__new__
    if record is None or type(model).get_config is not own_get_config:
        return {}
    return dict(record.config)


def make_sampling_trackers(model, loss=None):
    """Gives ``model`` the metrics of its sampling diagnostics, ``model._sampling_trackers``.

    The :data:`TRACKED_MEANS`, ``nonfinite_steps`` (a ``Sum``) and
    ``weight_totals`` and ``validation_weight_totals``
    (:class:`keras_bnn.models.weight_mean.WeightTotals`: the train step's, ``evaluate``'s),
    tracked by Keras as on a model not built yet, also on a built one,
    whose tracking Keras locked: unlocked for them, then locked again.

    Args:
        model: a ``BayesianModel`` (built or not).
        loss: ``compile``'s loss: one per output (a list, a dict) gives their number
            where the model does not (a subclassed one), for ``weight_totals``' slots.
    """
    tracker = model._tracker
    locked = tracker.locked
    tracker.unlock()
    try:
        trackers = {name: keras.metrics.Mean(name=name) for name in TRACKED_MEANS}
        trackers["nonfinite_steps"] = keras.metrics.Sum(name="nonfinite_steps")
        for name in ("weight_totals", "validation_weight_totals"):  # log nothing
            trackers[name] = weight_mean.WeightTotals(_outputs(model, loss), name=name)
        model._sampling_trackers = trackers
    finally:
        if locked:
            tracker.lock()


def _outputs(model, loss):
    """The paths of ``model``'s outputs: its functional graph's, else ``loss``'s if one per
    output (:func:`keras_bnn.output_slots.output_paths`; ``fit`` reads its labels'
    where they differ, :func:`keras_bnn.models.weight_mean.match_outputs`)."""
    return output_paths(model, loss if isinstance(loss, (list, tuple, dict)) else None)
