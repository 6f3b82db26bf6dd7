"""What a user may assign on a sampler after making it, and what is refused.

A sampler's constructor arguments are read when its step is traced or its
state built, and by ``get_config``: assigning one later (``sampler.friction =
2.0``, ``sampler.step_size = 1e-3``) was ignored by the running chain, or
half-applied at the next trace, while the config recorded it. The mixin
:class:`FixedArguments` of :class:`keras_bnn.samplers.Sampler` refuses those
assignments by name; ``train_size`` and ``seed`` may be assigned before the
first step only.
"""

import inspect

import keras

from keras_bnn.validation import check_positive, check_seed


def step_size_refusal(owner, name, value):
    """The message of an assignment to a sampler's step size.

    Args:
        owner: the sampler's class name.
        name: the attribute assigned (``step_size``, ``learning_rate``).
        value: the value given.

    Returns:
        str.
    """
    return (f"{owner}: the step size (`{name}`) of a sampler cannot be set (got {value!r}); "
            "ReduceLROnPlateau and LearningRateScheduler do not apply to a sampler. With "
            "step_size='auto' the warm-up chose it and froze it; an explicit one is used "
            "exactly (for another, make a new sampler with step_size=...); for a decaying step "
            "pass a keras.optimizers.schedules.LearningRateSchedule as `step_size=`, for a "
            "cyclical one use keras_bnn.callbacks.CyclicalSchedule.")


def _sampler_classes():
    """The registered (serializable) samplers: SGLD, ..., HMC."""
    classes, pending = [], [FixedArguments]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if keras.saving.get_registered_object(keras.saving.get_registered_name(cls)) is cls:
            classes.append(cls)
    return classes


class FixedArguments:
    """Refuses the assignments a sampler's chain cannot honour (a mixin of ``Sampler``).

    Needs ``keras.optimizers.Optimizer`` after it in the class's bases (``built``).
    """

    #: The constructor arguments fixed for the sampler's life, by the attribute
    #: that holds each: assigning it again raises (:meth:`__setattr__`).
    fixed_attributes = {"noise_estimate_decay": "noise_estimate_decay"}
    #: The constructor arguments that no attribute holds: assigning one raises.
    fixed_arguments = ("step_size", "warmup_steps", "target_noise_ratio")

    def __setattr__(self, name, value):
        """Refuses assignments that the chain cannot honour.

        A constructor argument (``step_size``, ``warmup_steps``, ``friction``,
        ``mass``, ...: :attr:`fixed_attributes`, :attr:`fixed_arguments`) is
        read when the step is traced or the state is built, and by
        :meth:`get_config`: assigning it later was ignored by the running
        chain, or half-applied at the next trace, while the config recorded it.
        ``temperature``, ``train_size`` and ``seed`` are properties (their
        setters say what is allowed).

        Args:
            name: the attribute.
            value: its new value.

        Raises:
            TypeError: for a fixed argument, naming it and the supported way, and
                for another sampler's argument (``SGLD().friction``,
                ``HMC().warmup_steps``), which nothing would read (or, for SGLD's
                ``noise``, would replace the method the step calls).
        """
        argument = self.fixed_attributes.get(name)
        if name in self.fixed_arguments or (argument is not None and name in self.__dict__):
            owner = type(self).__name__
            if name == "step_size":
                raise TypeError(step_size_refusal(owner, "step_size", value))
            raise TypeError(
                f"{owner}: `{name}` is fixed when the sampler is made (got {value!r}): the "
                "traced step, the sampler's state and its config are built from it, so an "
                "assignment would be ignored or half-applied. Make a new sampler instead: "
                f"{owner}({argument or name}=...).")
        method = inspect.isfunction(getattr(type(self), name, None))
        if not (name.startswith("_") or name in self.__dict__ or name in self.fixed_attributes
                or hasattr(type(self), name) and not method):
            others = sorted(c.__name__ for c in _sampler_classes()
                            if name in c.fixed_attributes or name in c.fixed_arguments)
            if others:  # SGLD's noise() is a method: replacing it broke the step
                raise TypeError(
                    f"{type(self).__name__} has no `{name}` (an argument of "
                    f"{', '.join(others)}): the assignment would set an attribute that nothing "
                    "reads, or replace a method.")
        super().__setattr__(name, value)

    @property
    def train_size(self):
        """n, the number of training examples (None until it is given).

        Assignable before the first step (``BayesianModel.compile(train_size=...)``
        sets it, also later, as it retraces the step).

        Raises:
            ValueError: on assignment, for a non-positive value.
            TypeError: on assignment after the first step.
        """
        return self._train_size

    @train_size.setter
    def train_size(self, value):
        self._check_unbuilt("train_size", value, "pass it to "
                            "BayesianModel.compile(train_size=...), which retraces the step.")
        self._train_size = (
            None if value is None else check_positive(value, "train_size", type(self).__name__))

    @property
    def seed(self):
        """The int seed of the chain's noise, a pure function of (seed, variable, step).

        Assignable before the first step only.

        Raises:
            ValueError: on assignment, for a value that is not a seed.
            TypeError: on assignment after the first step.
        """
        return self._seed

    @seed.setter
    def seed(self, value):
        self._check_unbuilt("seed", value, "a chain's noise is keyed on its seed from its first "
                            f"step on: for another chain make a new sampler "
                            f"({type(self).__name__}(seed=...)).")
        self._seed = check_seed(value, owner=type(self).__name__)

    def _check_unbuilt(self, name, value, supported):
        if self.built:
            raise TypeError(
                f"{type(self).__name__}: `{name}` cannot be assigned after the sampler's first "
                f"step (got {value!r}): the traced step reads it, so the running chain would "
                f"ignore it until the step is retraced. To change it, {supported}")
