"""Base class of the tempered SG-MCMC samplers."""

import functools

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import nonfinite
from keras_bnn import schedules
from keras_bnn.samplers.assignments import FixedArguments, step_size_refusal
from keras_bnn.samplers.auto_step import AutoStepSize
from keras_bnn.samplers.integrators import gradient_noise_update
from keras_bnn.samplers.kernel import Transition, TransitionKernel, gradient_step
from keras_bnn.samplers.readouts import SamplerReadouts, compensated_add
from keras_bnn.samplers.saved_state import SavedState
from keras_bnn.samplers.warmup import TARGET_NOISE_RATIO
from keras_bnn.validation import check_choice, check_fraction, check_positive

#: ``gradient_noise_ratio`` above which the samplers are measurably biased:
#: on Bayesian logistic regression against NUTS, ATMC's weakly determined
#: directions come out with sd ≈ sqrt(1 - r)·sd_true and SGHMC's noisy
#: directions with variance ≈ (1 + r)·T, so r ≤ 0.1 keeps both within ~5 %.
NOISE_RATIO_LIMIT = 0.1


def _refuse_learning_rate(owner, value, *_, **__):
    """Raises the TypeError of setting ``owner``'s ``learning_rate`` to ``value``
    (``sampler.learning_rate = value``, ``sampler.learning_rate.assign(value)``)."""
    raise TypeError(step_size_refusal(owner, "learning_rate", value))


class Sampler(AutoStepSize, TransitionKernel, SamplerReadouts, SavedState, FixedArguments,
              keras.optimizers.Optimizer):
    """A Keras optimizer whose updates simulate a tempered Langevin-type SDE.

    Target: ``p(θ) ∝ exp(-U(θ)/T)``. Keras hands the sampler the gradient of
    the mean-form loss ``U(θ)/n`` (mean NLL plus ``(1/n)·(-log p(θ))``); the
    sampler uses ``G = n · gradient``, the minibatch estimate of ``∇U``.
    The temperature T multiplies every injected noise variance. The step size
    ``h`` is the optimizer's learning rate (a float or a schedule such as
    :class:`keras_bnn.schedules.CyclicalCosine`; floats are held as a
    constant schedule so a cyclical schedule can be configured later without
    changing the optimizer's variables); ``"auto"`` tunes h in a warm-up,
    then freezes it with one factor per variable, which steps with
    ``h_v = h·s_v`` (:mod:`~keras_bnn.samplers.warmup`).

    Noise is ``backend.stateless_normal`` keyed on ``(seed, variable index,
    iterations)``: a pure function, the same on every replica and worker, and
    the same after a resume. The update rules themselves are the pure
    functions of :mod:`keras_bnn.samplers.integrators`; a sampler holds their
    state in optimizer variables (so it checkpoints with the model), declared
    once per name with :meth:`add_slot` and read with :meth:`state` or
    :meth:`slots`. Its saved state carries the variables' names and loads by
    name: a variable added since starts at its initial value
    (:meth:`load_own_variables`). Non-finite gradients stop the step with an error.

    Args:
        step_size: ``"auto"``, or exactly this h > 0: float or ``LearningRateSchedule``.
        temperature: T > 0 (``BayesianModel.compile(temperature=...)`` can override it).
        train_size: n, the number of training examples; required before the
            first step (``BayesianModel.compile(train_size=...)`` sets it).
        seed: int; the noise of a run is fully determined by it.
        noise_estimate_decay: ρ in (0, 1) of the online per-parameter estimate ``V̂`` of
            the minibatch gradient-noise variance, an average over ~1/(1-ρ) steps
            (:func:`~keras_bnn.samplers.integrators.gradient_noise_update`).
        warmup_steps, target_noise_ratio: of ``step_size="auto"``
            (:class:`~keras_bnn.samplers.warmup.StepSizeWarmup`).
        name: optimizer name.
        **kwargs: passed to ``keras.optimizers.Optimizer``.

    Raises:
        ValueError: for a bad ``step_size`` or warm-up argument, or a
            non-positive ``temperature`` or ``train_size``.
    """

    #: Whether the sampler keeps a momentum (and so a kinetic temperature).
    has_momentum = True

    def __init__(
        self,
        step_size,
        temperature=1.0,
        train_size=None,
        seed=0,
        noise_estimate_decay=0.99,
        warmup_steps="auto",
        target_noise_ratio=TARGET_NOISE_RATIO,
        name=None,
        **kwargs,
    ):
        owner = type(self).__name__
        decay = check_fraction(noise_estimate_decay, "noise_estimate_decay", owner)
        step_size, warmup = self.resolve_step_size(step_size, warmup_steps, target_noise_ratio,
                                                   decay, owner)
        if not isinstance(step_size, keras.optimizers.schedules.LearningRateSchedule):
            step_size = schedules.CyclicalCosine(
                check_positive(step_size, "step_size", owner)
            )
        super().__init__(learning_rate=step_size, name=name or owner.lower(), **kwargs)
        self._initial_temperature = check_positive(temperature, "temperature", owner)
        self.train_size, self.seed = train_size, seed
        self.noise_estimate_decay, self.warmup = decay, warmup
        self._initializers = {}  # variable path → initializer (SavedState.add_variable)

    # ----------------------------------------------------------------- config
    @property
    def schedule(self):
        """The step-size schedule ``h_t`` (a float ``step_size`` is a constant
        :class:`keras_bnn.schedules.CyclicalCosine`)."""
        return self._learning_rate

    @property
    def learning_rate(self):
        """The step size of the next step, ``h_t`` (Keras' name, read by
        ``TensorBoard`` and the other callbacks that log it).

        Setting it (``ReduceLROnPlateau`` and ``LearningRateScheduler`` do,
        between epochs) raises ``TypeError``: with ``step_size="auto"`` the
        warm-up has chosen h and the step factors and frozen them (the
        gradient-noise ratio was measured at that h, not at another), and an
        explicit step is the one asked for. A decaying or cyclical step is
        given up front instead: a ``LearningRateSchedule`` as ``step_size=``,
        or :class:`keras_bnn.callbacks.CyclicalSchedule`.
        ``learning_rate.assign(h)`` (a Keras optimizer's rate is a variable),
        ``assign_add`` and ``assign_sub`` raise the same ``TypeError``: the
        tensor read carries methods of those names that refuse (until
        2026-12-01 "AttributeError: 'EagerTensor' object has no attribute
        'assign'"). It is the tensor Keras reads (same type
        and value; a traced step gets the same ops); a JAX tracer, which takes
        no attribute, is returned as it is.
        """
        rate = self._get_current_learning_rate()
        if not hasattr(rate, "assign"):  # a schedule's own variable keeps its assign
            refuse = functools.partial(_refuse_learning_rate, type(self).__name__)
            try:
                rate.assign = rate.assign_add = rate.assign_sub = refuse
            except AttributeError:  # a Python float, a JAX tracer
                pass
        return rate

    @learning_rate.setter
    def learning_rate(self, value):
        _refuse_learning_rate(type(self).__name__, value)

    @property
    def initial_step_size(self):
        """h0: the schedule's value at step 0, as a Python float."""
        return float(backend.to_numpy(self.schedule(0)))

    def set_cycle(self, cycle_steps, burn_in_steps=0):
        """Makes the step size cyclical: ``h0`` for ``burn_in_steps``, then cosine cycles.

        See :class:`keras_bnn.schedules.CyclicalCosine`. The lengths are
        Python constants of the traced step: retrace it afterwards
        (``model.make_train_function(force=True)``; the
        :class:`keras_bnn.callbacks.CyclicalSchedule` callback does).

        With ``step_size="auto"`` the warm-up runs at ``c = 1`` (the cycle's
        factor), so cycles that began inside it would leave a cut cycle after
        it. The cycles begin at the first cycle boundary at or after the
        warm-up's end instead:
        ``B' = B + L·⌈max(W - B, 0)/L⌉`` (W the warm-up's steps), so that every
        cycle after the warm-up is whole and cycle ends stay where ``B`` and
        ``L`` put them (an epoch end stays an epoch end). ``B'`` is what the
        schedule and its config record.

        Args:
            cycle_steps: cycle length in steps, or ``None`` for a constant.
            burn_in_steps: steps at ``h0`` before the first cycle.

        Raises:
            ValueError: for bad lengths, or when the step size is a schedule
                other than :class:`keras_bnn.schedules.CyclicalCosine`.
        """
        if not isinstance(self.schedule, schedules.CyclicalCosine):
            raise ValueError(
                f"{type(self).__name__}.set_cycle: the step size is a "
                f"{type(self.schedule).__name__}; a cycle needs a float step size or a "
                "keras_bnn.schedules.CyclicalCosine.")
        self.schedule.configure(cycle_steps=cycle_steps, burn_in_steps=burn_in_steps)
        if self.warmup is not None and cycle_steps is not None:
            burn_in, length = self.schedule.burn_in_steps, self.schedule.cycle_steps
            cut = max(self.warmup.warmup_steps - burn_in, 0)
            self.schedule.configure(cycle_steps=length,
                                    burn_in_steps=burn_in + length * -(-cut // length))

    def is_cycle_end(self, step):
        """Whether step ``step`` (0-based) ends a cycle of a cyclical step size.

        Args:
            step: Python int.

        Returns:
            bool; False for a constant step size.
        """
        schedule = self.schedule
        return isinstance(schedule, schedules.CyclicalCosine) and schedule.is_cycle_end(step)

    def configure(self, train_size=None, temperature=None):
        """Sets ``n`` and (optionally) ``T``; called by ``BayesianModel.compile``.

        Args:
            train_size: n > 0, or None to keep the current value.
            temperature: T > 0, or None to keep the current value.

        Raises:
            ValueError: for non-positive values.
        """
        owner = type(self).__name__
        if train_size is not None:  # compile retraces the step: honoured after the first step
            self._train_size = check_positive(train_size, "train_size", owner)
        if temperature is not None:
            self.set_temperature(temperature)

    @property
    def temperature(self):
        """Current temperature T as a Python float; assigning it calls :meth:`set_temperature`."""
        if self.built:
            return float(backend.to_numpy(self._temperature))
        return self._initial_temperature

    @temperature.setter
    def temperature(self, value):
        self.set_temperature(value)

    def set_temperature(self, temperature):
        """Sets T; after the first step this assigns the temperature variable.

        Args:
            temperature: T > 0.

        Raises:
            ValueError: if not positive.
        """
        value = check_positive(temperature, "temperature", type(self).__name__)
        if self.built:
            self._temperature.assign(value)
        else:
            self._initial_temperature = value

    def get_config(self):
        config = super().get_config()
        config["step_size"] = config.pop("learning_rate")
        config.update(
            temperature=self.temperature,
            train_size=self.train_size,
            seed=self.seed,
            noise_estimate_decay=self.noise_estimate_decay,
            **self.warmup_config(),
        )
        if self.warmup is not None:  # "auto" stands for the schedule: its cycle goes beside
            config.update(self.schedule.cycle_config())
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config.pop("step_size_value", None)  # the records of the warm-up's steps
        config.pop("step_size_factors", None)
        if isinstance(config.get("step_size"), dict):
            config["step_size"] = keras.saving.deserialize_keras_object(
                config["step_size"], custom_objects=custom_objects
            )
        cycle = {key: config.pop(key) for key in ("cycle_steps", "burn_in_steps") if key in config}
        sampler = cls(**config)
        if cycle:
            sampler.set_cycle(**cycle)
        return sampler

    # ------------------------------------------------------------------ state
    def build(self, var_list):
        if self.built:
            return
        if self.train_size is None:
            raise ValueError(
                f"{type(self).__name__}: `train_size` (the number of training "
                "examples n) must be set before the first step: pass it to "
                "BayesianModel.compile(train_size=...) or to the sampler."
            )
        backend.adopt_current_strategy(self)  # a sampler made outside strategy.scope()
        super().build(var_list)
        self._temperature = self.add_variable(
            shape=(),
            initializer=keras.initializers.Constant(self._initial_temperature),
            name="temperature",
        )
        self._slots = {}
        # Per-variable sums for the temperature diagnostics, written by every
        # step (Σθ·G before the update, Σp·∇K(p) from the new momenta).
        self._virials = self.add_slot(var_list, "virial", layerwise=True)  # HMC writes them too
        # Their running sums over all steps (virial_sums), compensated (compensated_add).
        self._virial_totals = self.add_slot(var_list, "virial_total", layerwise=True)
        self._virial_carries = self.add_slot(var_list, "virial_carry", layerwise=True)
        if "gradient_noise_ratio" in self.metric_names:
            self.add_slot(var_list, "noise_ratio", layerwise=True)
            self.add_slot(var_list, "previous_gradient")
            self.add_slot(var_list, "gradient_noise")
        if self.has_momentum:
            self.add_slot(var_list, "kinetic", layerwise=True)
        if self.warmup is not None:
            self.warmup.build(self)
            # The chain state a warm-up blow-up returns to (recover_after_step).
            self.add_slot(var_list, "anchor")
            self.add_slot(var_list, "snapshot")
            # The frozen per-variable steps (warmup.variable_step_factor).
            self.add_slot(var_list, "noise_scale", layerwise=True)
            self.add_slot(var_list, "step_factor", layerwise=True, value=1.0)
        self.build_state(var_list)

    def add_slot(self, var_list, name, layerwise=False, value=0.0):
        """Declares the per-variable state ``name``: one optimizer variable per variable.

        Args:
            var_list: the trainable variables.
            name: the state's name (the key of :meth:`state`).
            layerwise: a scalar per variable instead of a tensor shaped like it.
            value: the initial value.

        Returns:
            The list of state variables, in the order of ``var_list``.
        """
        initializer = keras.initializers.Constant(value)
        self._slots[name] = [
            self.add_variable(shape=(), initializer=initializer,
                              name=f"{v.path.replace('/', '_')}_{name}")
            if layerwise else self.add_variable_from_reference(v, name, initializer)
            for v in var_list
        ]
        return self._slots[name]

    def build_state(self, var_list):
        """Declares the sampler's own per-variable state with :meth:`add_slot`."""

    def slots(self, name):
        """The state variables named ``name``, one per trainable variable, in order.

        Args:
            name: one of the names the sampler declared (``"momentum"``, ``"thermostat"``,
                ``"mass"``, ``"second_moment"``, ``"gradient_noise"``, ``"previous_gradient"``,
                ``"virial"``, ``"virial_total"``, ``"virial_carry"``, ``"noise_ratio"``,
                ``"kinetic"``, and with
                ``step_size="auto"`` ``"anchor"``, ``"snapshot"``, ``"noise_scale"`` and
                ``"step_factor"``, as it has them).

        Returns:
            List of optimizer variables.

        Raises:
            ValueError: before the first step (nothing is declared yet), or
                for a name the sampler does not have.
        """
        self._check_built()
        return self._slots[check_choice(name, "name", tuple(self._slots), type(self).__name__)]

    def state(self, variable):
        """The sampler's state of one trainable variable.

        Args:
            variable: one of the variables the sampler was built with.

        Returns:
            Dict name → optimizer variable (see :meth:`slots` for the names).

        Raises:
            ValueError: before the first step.
        """
        self._check_built()
        index = self._get_variable_index(variable)
        return {name: slots[index] for name, slots in self._slots.items()}

    def _check_built(self):
        if not self.built:
            raise ValueError(f"{type(self).__name__} has no state before its first step "
                             "(it is built then, or by `build(variables)`).")

    # ----------------------------------------------------------------- kernel
    @property
    def metric_names(self):
        momentum = ("kinetic_temperature",) if self.has_momentum else ()
        return ("step_size", *momentum, "configurational_temperature", "gradient_noise_ratio")

    def transition(self, potential, variables, skip_nonfinite):
        """One sampler step (:func:`~keras_bnn.samplers.kernel.gradient_step`) and its diagnostics.

        See :meth:`keras_bnn.samplers.kernel.TransitionKernel.transition`.
        """
        step_size = self.learning_rate  # h of this step, read before it
        *step, skipped = gradient_step(self, potential, variables, skip_nonfinite)
        self.recover_after_step(variables)
        logs = {"step_size": step_size,
                "configurational_temperature": self.configurational_temperature(),
                "gradient_noise_ratio": self.gradient_noise_ratio()}
        if self.has_momentum:
            logs["kinetic_temperature"] = self.kinetic_temperature()
        return Transition(*step, skipped, {name: logs[name] for name in self.metric_names})

    # ----------------------------------------------------------------- update
    def noise(self, variable):
        """N(0, 1) noise shaped like ``variable``, keyed on (seed, index, step)."""
        return backend.stateless_normal(
            variable.shape,
            self.seed,
            self._get_variable_index(variable),
            self.iterations,
            variable.dtype,
        )

    def apply(self, grads, trainable_variables=None):
        """Checks all gradients for NaN/Inf, then applies one sampler step.

        The check covers every gradient before any variable is updated: a
        non-finite gradient in any variable raises (``InvalidArgumentError``
        on TensorFlow, with :data:`keras_bnn.nonfinite.MARKER`) and leaves
        all weights, sampler state and the step counter unchanged. Compiled
        steps (XLA, JAX) cannot raise: there ``BayesianModel`` skips the
        step instead (:mod:`keras_bnn.nonfinite`).
        """
        grads = list(grads)
        variables = (
            list(trainable_variables)
            if trainable_variables is not None
            else list(getattr(self, "_trainable_variables", None) or [])
        )
        owner = type(self).__name__
        if len(variables) == len(grads):
            messages = [
                f"{nonfinite.MARKER} ({owner}: gradient of variable "
                f"{getattr(v, 'path', getattr(v, 'name', '?'))!r})"
                for v in variables
            ]
        else:
            messages = [f"{nonfinite.MARKER} ({owner}: gradient)"] * len(grads)
        if not self.built and variables:
            # Create the state outside the guard's control dependencies: a
            # traced step (XLA in particular) must be able to lift them out.
            self.build(variables)
        with backend.finite_guard(grads, messages):
            return super().apply(grads, trainable_variables)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        state = self.state(variable)
        # `apply` has already checked the gradient for NaN/Inf.
        potential_grad = ops.multiply(ops.cast(gradient, dtype), ops.cast(self.train_size, dtype))
        # θ·G at the point where G was taken, before the update moves θ.
        virial = ops.sum(variable * potential_grad)
        self.assign(state["virial"], virial)
        total, carry = compensated_add(state["virial_total"], state["virial_carry"], virial)
        self.assign(state["virial_total"], total)
        self.assign(state["virial_carry"], carry)
        previous = state["previous_gradient"]
        noise_variance = state["gradient_noise"]
        # V̂ of the steps before this one: independent of this step's noise.
        kinetic, noise_ratio = self.sample_step(
            variable,
            potential_grad,
            ops.cast(ops.multiply(learning_rate, self.step_factor(variable)), dtype),
            ops.cast(self._temperature, dtype),
            noise_variance,
        )
        # No difference exists at the first step, nor at the first after the
        # warm-up undid a blow-up (previous_gradient is from the discarded
        # point); the second step replaces V̂.
        decay = ops.where(
            ops.logical_or(ops.equal(self.iterations, 0), self.restarted()),
            1.0,
            ops.where(ops.logical_or(ops.equal(self.iterations, 1), self.reestimating()),
                      0.0, self.noise_estimate_decay),
        )
        self.assign(
            noise_variance,
            gradient_noise_update(potential_grad, previous, noise_variance, ops.cast(decay, dtype)),
        )
        self.assign(previous, potential_grad)
        self.assign(state["noise_ratio"], noise_ratio)
        if self.has_momentum:
            self.assign(state["kinetic"], kinetic)
        self.after_variable_step(variable)

    def sample_step(self, variable, potential_grad, h, temperature, noise_variance):
        """One update of ``variable`` and its state (:meth:`state`).

        Args:
            variable: the parameter θ.
            potential_grad: ``G = n · gradient``, the minibatch ``∇U(θ)``.
            h: the step size.
            temperature: T.
            noise_variance: V̂, the estimated per-parameter variance of the
                noise in ``potential_grad`` (0 during the first two steps).

        Returns:
            ``(kinetic, ratio)``: ``Σ p·∇K(p)`` over the variable's new
            momenta (the kinetic temperature's sum; None for samplers without
            momentum) and the variable's mean gradient-noise ratio ``r``: the
            variance the minibatch noise adds to the update per step over the
            variance the sampler injects per step at its nominal friction.
        """
        raise NotImplementedError
