"""The samplers' side of ``step_size="auto"``: :class:`AutoStepSize`.

A mixin of :class:`keras_bnn.samplers.Sampler` that resolves the
``step_size`` argument, holds the warm-up (:class:`keras_bnn.samplers.warmup.StepSizeWarmup`,
whose module says how h is chosen and why), gives each variable its step
``h·s_v`` and its change across a step, takes the second noise measurement
(:meth:`AutoStepSize.lower_step_factors`, :meth:`AutoStepSize.raise_step_size`),
lowers the factors of a chain whose
noise at equilibrium is above the limit (:meth:`AutoStepSize.lower_noisy_step_factors`)
and undoes a warm-up blow-up
(:meth:`AutoStepSize.recover_after_step`).
"""

from keras import ops

from keras_bnn import backend, schedules
from keras_bnn.samplers.warmup import (ANCHOR_CONFIRM, ANCHOR_EVERY, BLOW_UP_BACKOFF,
                                       INITIAL_STEP_SIZE, REMEASURE_TOLERANCE,
                                       TARGET_NOISE_RATIO, StepSizeWarmup, auto_warmup_steps,
                                       climb_shortfall, noise_limited_step_size, noise_spread,
                                       stiffness_gap)
from keras_bnn.samplers.step_rise import assign_step, remeasured_step
from keras_bnn.validation import argument_error, check_positive


class AutoStepSize:
    """The samplers' side of ``step_size="auto"`` (a mixin of :class:`~keras_bnn.samplers.Sampler`).

    It resolves the ``step_size`` argument, holds the :class:`StepSizeWarmup`
    in ``self.warmup`` (None for an explicit step), multiplies the schedule
    by the tuned h, and runs the warm-up after each step.
    """

    #: k in ``r ∝ h^k`` at a fixed noise variance (SGLD, or a fixed friction
    #: or noise); the momentum samplers whose friction follows h set 2.
    noise_ratio_exponent = 1
    warmup = None
    #: Whether the traced step has left the warm-up's code out (:meth:`leave_warmup`).
    warmup_left = False

    @staticmethod
    def resolve_step_size(step_size, warmup_steps, target_noise_ratio, noise_estimate_decay,
                          owner):
        """Splits the ``step_size`` argument into ``(step_size, warmup)``.

        Args:
            step_size: ``"auto"``, a float or a schedule.
            warmup_steps, target_noise_ratio: see :class:`StepSizeWarmup`.
            noise_estimate_decay: ρ of the noise estimate (already checked).
            owner: the sampler's class name, for error messages.

        Returns:
            For ``"auto"``: ``(CyclicalCosine(1.0), StepSizeWarmup)``, the
            schedule being the cycle's factor ``c(t) ∈ [0, 1]`` of
            ``h_t = h·c(t)``; otherwise ``(step_size, None)``.

        Raises:
            ValueError: for a string other than ``"auto"``, bad warm-up
                arguments, or warm-up arguments with an explicit step.
        """
        if isinstance(step_size, str):
            if step_size != "auto":
                raise argument_error("step_size", "be 'auto' (a warm-up chooses it) or a "
                                     "number > 0", step_size, owner)
            return schedules.CyclicalCosine(1.0), StepSizeWarmup(
                warmup_steps, target_noise_ratio, noise_estimate_decay, owner)
        if warmup_steps != "auto" or target_noise_ratio != TARGET_NOISE_RATIO:
            raise argument_error(
                "step_size", "be 'auto' when `warmup_steps` or `target_noise_ratio` is "
                "given (an explicit step size is used exactly, without warm-up)",
                step_size, owner)
        return step_size, None

    def warming_in_trace(self):
        """Whether the step being traced carries the warm-up's code: an
        ``"auto"`` step size whose step has not left it (:meth:`leave_warmup`)."""
        return self.warmup is not None and not self.warmup_left

    def leave_warmup(self):
        """Leaves the warm-up's code out of the steps traced from now on.

        After the warm-up that code does nothing: h and the step factors are
        frozen, ``h_prev/h = 1`` (:meth:`StepSizeWarmup.change`, from the
        first step past the warm-up on), no blow-up is flagged and no anchor
        is kept. Yet a step that carries it runs its scalar updates and
        conditional assignments every step; without it the step computes
        the same numbers with fewer operations. ``fit`` calls this between epochs (and at its
        start) and retraces the step when it returns True. A host read of
        the step counter.

        Returns:
            True the first time it is called with the warm-up and the step
            past it done (the caller must retrace the step, e.g.
            ``model.make_train_function(force=True)``); otherwise False
            (an explicit step size, not built, still warming up, or left
            already).
        """
        if (not self.warming_in_trace() or not self.built
                or int(backend.to_numpy(self.iterations)) <= self.warmup.warmup_steps):
            return False
        self.warmup_left = True
        return True

    @property
    def step_size_value(self):
        """The base step h as a Python float: the explicit h0, or the warm-up's h.

        With ``step_size="auto"`` this is the h being tuned during warm-up and
        the frozen h after it (None before the first step). Variable v
        steps with ``h·s_v`` (:meth:`step_size_factors`); an explicit
        ``step_size=sampler.step_size_value`` takes h for every variable, so
        it reproduces the frozen chain where every factor is 1.
        """
        if self.warmup is None:
            return getattr(self.schedule, "initial_step_size", None) or self.initial_step_size
        if not self.built:
            return None
        return float(backend.to_numpy(self.warmup.step_size))

    def base_step_size(self, variable):
        """``h_v = h·s_v``: the warm-up's h times the variable's step factor
        (scalar tensors), or the explicit h0 (a float).

        The defaults that scale with the step (SGHMC's ``γ = 0.1/h``,
        SGNHT/ATMC's ``D = -log(0.9)/h``) use it.

        Args:
            variable: the trainable variable being stepped.
        """
        if self.warmup is None:
            return self.initial_step_size
        return self.warmup.step_size.value * self.step_factor(variable)

    def step_factor(self, variable):
        """``s_v``: the variable's share of the base step (1 for an explicit
        step size; 1 during the warm-up; see :func:`variable_step_factor`).

        Args:
            variable: a trainable variable of the sampler.

        Returns:
            Scalar tensor, or the float 1.0.
        """
        if self.warmup is None:
            return 1.0
        return self.state(variable)["step_factor"].value

    def step_change(self, variable):
        """``h_v,prev/h_v``: carries a rate in units of 1/h_v across a change
        of the variable's step (see :meth:`StepSizeWarmup.change`); the
        factor ``s_v`` changes once, from 1, at the first step after the
        warm-up.

        Args:
            variable: a trainable variable of the sampler.

        Returns:
            Scalar tensor.
        """
        if self.warmup_left:
            return 1.0
        first = ops.equal(self.iterations, self.warmup.warmup_steps)
        return self.warmup.change() / ops.where(first, self.step_factor(variable), 1.0)

    def step_size_factors(self):
        """The per-variable step factors ``s_v`` (``h_v = h·s_v``).

        Returns:
            Dict variable path → float: all 1 during the warm-up and for an
            explicit step size (empty before the first step).
        """
        if not self.built:
            return {}
        return {getattr(v, "path", v.name): float(backend.to_numpy(self.step_factor(v)))
                for v in self._trainable_variables}

    def noise_averaging_steps(self):
        """Steps a mean of the gradient-noise ratio must span to be trusted.

        ``r̂`` is an exponential average over ``1/(1-ρ)`` steps, and the
        minibatch noise itself wanders with the region the chain visits
        (wine, 13-100-100-3 MLP after the warm-up: 50-step means of the
        output layer's r from 0.007 to 0.54, 500-step means 0.055–0.10), so
        a mean over fewer steps says little. It is the warm-up's length
        (ten memory lengths at the default: ``10/(1-ρ)`` = 1000 steps), or
        that many steps for an explicit step size.

        Returns:
            int ≥ 1.
        """
        if self.warmup is None:
            return auto_warmup_steps(self.noise_estimate_decay)
        return self.warmup.warmup_steps

    def remeasure_pending(self):
        """Whether :meth:`lower_step_factors` is still to run: an auto step
        size, built, not yet re-measured (a host read of one scalar)."""
        return (self.warmup is not None and self.built
                and float(backend.to_numpy(self.warmup.remeasured)) < 0.5)

    def lower_step_factors(self, ratios):
        """The second noise measurement, at equilibrium: lowers ``s_v`` where
        the variable's ratio is more than 25 % above r* (once per chain).

        The warm-up measures the gradient noise near the initialisation, and
        it grows as the chain moves into its typical set (measured on the
        Fashion-MNIST CNN: the first convolution's r from 0.05 at the freeze
        to 0.115 over epochs 4–13 and 0.2 after 40; the wine MLP's output
        layer 0.10 averaged over 66 sampling epochs). So once the chain is
        stationary (:class:`keras_bnn.callbacks.CollectSamples`, before its
        first sample) each variable's ratio ``r̄_v``, averaged from the
        first stationary window on over at least :meth:`noise_averaging_steps`
        steps at the current factors, sets

            s_v ← s_v·(r*/r̄_v)^{1/k}   where r̄_v > REMEASURE_TOLERANCE·r*

        (:func:`noise_limited_step_size`: ``r ∝ h_v^k``; back to the target).
        Within the tolerance (25 %) nothing changes: the warm-up meets r* on
        average, so per-variable means of 1.0–1.25·r* are the target met
        (measured: 1.02–1.23·r* on the Fashion-MNIST MLP, digits and
        diabetes), the extra bias is small (ATMC's sd ≈ √(1−r)·sd, SGHMC's
        variance ≈ (1+r)·T: at 1.25·r* about 0.6 % more in sd than at r*),
        and a lowering costs a restart of the equilibrium test (2w epochs:
        a 1 % lowering of two biases, at 1.02·r*, left a 47-epoch
        Fashion-MNIST chain with no sample). Factors are never
        raised: a larger step's stability was never tested. A thermostat ξ,
        a rate in units of 1/h_v, is carried across
        (:meth:`carry_step_change`). A lowered factor is a new kernel, so the
        caller restarts its equilibrium test. Host work between two steps
        (an epoch end); the ``remeasured`` flag checkpoints with the sampler,
        so a resumed chain does not measure again.

        Args:
            ratios: dict variable path → ``r̄_v ≥ 0``.

        Returns:
            Dict path → ``(old s_v, new s_v)`` of the lowered variables;
            empty when none is above the tolerance, for an explicit step size, during
            the warm-up, and after the first call.

        Raises:
            ValueError: for a path that names none of the sampler's variables.
        """
        if (not self.remeasure_pending()
                or int(backend.to_numpy(self.iterations)) < self.warmup.warmup_steps):
            return {}
        variables = self._variables_named(ratios, "lower_step_factors")
        self.warmup.remeasured.assign(1.0)
        target = self.warmup.target_noise_ratio
        return self._lower_to({
            name: float(backend.to_numpy(noise_limited_step_size(
                float(backend.to_numpy(self.step_factor(variables[name]))), float(ratio), target,
                self.noise_ratio_exponent)))
            for name, ratio in ratios.items() if float(ratio) > REMEASURE_TOLERANCE * target},
            variables)

    def raise_step_size(self, ratios):
        """The second noise measurement's raise of h: where the averaged ratios
        allow at least ``RAISE_GATE`` times h, h and the factors are set as at
        the freeze (once per chain; then :meth:`lower_step_factors` does nothing).

        The warm-up can freeze h in the transient, where the noise is larger
        than at equilibrium (:mod:`keras_bnn.samplers.step_rise`). With every
        ratio ``r̄_v`` averaged at the current steps, the warm-up's mean rule on
        the noise scales ``a_v = r̄_v/(h·s_v)^k`` gives a step
        (:func:`~keras_bnn.samplers.step_rise.remeasured_step`); at or above
        ``RAISE_GATE·h`` it is the new h (at most the stability ceiling), the
        factors ``min(1, (r*/(h^k·a_v))^{1/k})``, each variable's state carried
        across (:func:`~keras_bnn.samplers.step_rise.assign_step`). A new
        kernel: the caller restarts its equilibrium test. Host work.

        Args:
            ratios: dict variable path → ``r̄_v ≥ 0``, every variable.

        Returns:
            ``(old h, new h)``, or None: below the gate, a variable without a
            ratio, an explicit step size, during the warm-up, and after the
            first call of this or :meth:`lower_step_factors`.

        Raises:
            ValueError: for a path that names none of the sampler's variables.
        """
        frozen = self._frozen_warmup() if self.remeasure_pending() else None
        if frozen is None or set(ratios) != set(self._variables_named(ratios, "raise_step_size")):
            return None
        step, ceiling, _, sizes, target, exponent = frozen
        raised = remeasured_step(step, ceiling, list(self.step_size_factors().values()),
                                 [float(ratios[name]) for name in self.step_size_factors()],
                                 sizes, target, exponent)
        if raised is None:
            return None
        assign_step(self, step, *raised)
        self.warmup.remeasured.assign(1.0)
        return step, raised[0]

    def lower_noisy_step_factors(self, ratios, limit):
        """Lowers every ``s_v`` by one factor where a stationary chain's ratio
        is above ``limit``, after the second noise measurement (any number of
        times).

        The gradient noise of some chains comes in bursts, longer than the
        second measurement's 1000 steps, that hit several variables at once
        (measured on an SGLD LSTM over padded sequences: the embeddings',
        LSTM kernel's and LSTM bias's ratios rise and fall together, 400-step
        means 0.015–0.45; over 5200 steps the embeddings and the bias average
        0.099 and 0.135, after a second measurement of 0.050 and 0.054 over a
        quiet stretch). So :class:`keras_bnn.callbacks.CollectSamples` calls
        this with the means over its recent window ``r̄_v``, and where the
        largest is above the limit that :class:`~keras_bnn.GradientNoiseWarning`
        judges samples by,

            s_v ← s_v·(r*/max_u r̄_u)^{1/k}   for every variable v

        (:func:`noise_limited_step_size`: the noisiest variable back at r*).
        Every variable, not only the noisy ones: a variable's own mean says
        nothing of its kick in the next burst (measured: an LSTM recurrent
        kernel at 0.005 on average read 5.5 in a burst that threw the chain
        out, NLL 0.02 → 1.45, after only the noisy variables were lowered),
        and one factor for all keeps the relative steps the measurements set.
        Factors are never raised, and nothing is lowered for a target
        ``r* ≥ limit``: the target asked for the noise above the limit.

        Args:
            ratios: dict variable path → ``r̄_v ≥ 0``.
            limit: the level above which the factors are lowered, > 0.

        Returns:
            Dict path → ``(old s_v, new s_v)``, every variable, when the
            largest ratio is above ``limit``; else, for an explicit step size,
            during the warm-up and for ``r* ≥ limit``, empty.

        Raises:
            ValueError: for a path that names none of the sampler's variables, or
                a ``limit`` that is not > 0.
        """
        limit = check_positive(limit, "limit", f"{type(self).__name__}.lower_noisy_step_factors")
        if (self.warmup is None or not self.built
                or int(backend.to_numpy(self.iterations)) < self.warmup.warmup_steps):
            return {}
        variables = self._variables_named(ratios, "lower_noisy_step_factors")
        worst = max(map(float, ratios.values()), default=0.0)
        target = self.warmup.target_noise_ratio
        if worst <= limit or target >= limit:
            return {}
        scale = float(backend.to_numpy(noise_limited_step_size(
            1.0, worst, target, self.noise_ratio_exponent)))
        return self._lower_to({name: scale * float(backend.to_numpy(self.step_factor(v)))
                               for name, v in variables.items()}, variables)

    def _variables_named(self, ratios, method):
        """``{path: variable}``; raises ValueError naming ``ratios`` for an unknown path."""
        variables = {getattr(v, "path", v.name): v for v in self._trainable_variables}
        unknown = sorted(set(ratios) - set(variables))
        if unknown:
            raise argument_error("ratios", f"name the sampler's variables {sorted(variables)}",
                                 unknown, f"{type(self).__name__}.{method}")
        return variables

    def _lower_to(self, factors, variables):
        """Sets ``s_v`` to ``factors[v]`` where that is lower, carrying the
        state across (:meth:`carry_step_change`); returns path → (old, new)."""
        lowered = {}
        for name, new in factors.items():
            old = float(backend.to_numpy(self.step_factor(variables[name])))
            if new < old:
                self.state(variables[name])["step_factor"].assign(new)
                self.carry_step_change(variables[name], old / new)
                lowered[name] = (old, new)
        return lowered

    def carry_step_change(self, variable, change):
        """Carries the variable's state across ``h_v ← h_v/change`` between
        steps (host side). Nothing to carry by default: momenta are kept in
        physical units (``θ ← θ + h_v·∇K(p)``); a thermostat overrides it.

        Args:
            variable: the trainable variable whose step changed.
            change: ``h_v,old/h_v,new`` (a float).
        """

    def _get_current_learning_rate(self):
        """``h_t = h·c(t)``; during the warm-up ``c = 1`` (the noise law needs the full h)."""
        rate = super()._get_current_learning_rate()
        if self.warmup is None:
            return rate
        if not self.built:
            return ops.multiply(INITIAL_STEP_SIZE, rate)
        warming = ops.less(self.iterations, self.warmup.warmup_steps)
        return ops.multiply(self.warmup.step_size.value, ops.where(warming, 1.0, rate))

    def restarted(self):
        """Whether the step before undid a blow-up (a boolean scalar; False
        for an explicit step size and after :meth:`leave_warmup`): this
        step's gradient difference spans the discarded point and the anchor,
        so ``V̂`` skips it."""
        if not self.warming_in_trace():
            return ops.convert_to_tensor(False)
        return ops.greater(self.warmup.blown_up, 0.5)

    def reestimating(self):
        """Whether this is the second step after a recovery (a boolean
        scalar; False for an explicit step size and after
        :meth:`leave_warmup`): its gradient difference replaces ``V̂``, as
        the second step of a run does."""
        if not self.warming_in_trace():
            return ops.convert_to_tensor(False)
        return ops.greater(self.warmup.reestimate, 0.5)

    def recover_after_step(self, variables):
        """Undoes a warm-up blow-up, and keeps the anchor it returns to.

        Called after each step with the model's trainable variables (by
        :meth:`~keras_bnn.samplers.Sampler.transition`, in replica context).
        One conditional assignment, on warm-up steps only
        (:func:`keras_bnn.backend.assign_where`: after the warm-up no element
        is touched):

        * after a blow-up step (``warmup.blown_up``, only ever set in the
          warm-up): ``θ ← anchor``, the snapshot ``← anchor``, momenta,
          thermostats and the noise estimate ``V̂ ← 0``;
        * otherwise at steps ``t ≡ 0 (mod ANCHOR_EVERY)``: snapshot ``← θ``;
          at steps ``t ≡ ANCHOR_CONFIRM (mod ANCHOR_EVERY)`` (the steps
          between were quiet, or the snapshot was reset): anchor
          ``← snapshot``; and at step 0 anchor ``← θ`` too (a blow-up
          before the first confirmation returned every weight to the
          slot's initial zeros).

        The chain then restarts its noise estimate as a run starts it: the
        next step's difference, which spans the discarded point and the
        anchor, is skipped (:meth:`restarted`) and not judged as a blow-up,
        and the one after replaces ``V̂`` (:meth:`reestimating`). Without the
        reset the blow-up's huge difference stayed in ``V̂`` and held h low
        for hundreds of steps (a blow-up late in the warm-up froze a small h).

        Args:
            variables: the trainable variables, in the sampler's order.
        """
        if not self.warming_in_trace():
            return
        step = ops.subtract(ops.cast(self.iterations, "int32"), 1)  # the step just taken
        phase = ops.mod(step, ANCHOR_EVERY)
        blown_up = self.restarted()
        take = ops.logical_and(ops.logical_not(blown_up), ops.equal(phase, 0))
        confirm = ops.logical_and(ops.logical_not(blown_up), ops.equal(phase, ANCHOR_CONFIRM))
        first = ops.equal(step, 0)  # the anchor until the first is confirmed: not zeros
        anchors, snapshots = self.slots("anchor"), self.slots("snapshot")
        restarted = [slot for name in ("momentum", "thermostat", "gradient_noise")
                     if name in self._slots for slot in self.slots(name)]
        backend.assign_where(
            ops.less(step, self.warmup.warmup_steps),
            [*variables, *snapshots, *anchors, *restarted],
            [lambda v=v, a=a: ops.where(blown_up, a.value, v.value)
             for v, a in zip(variables, anchors)]
            + [lambda v=v, a=a, s=s: ops.where(blown_up, a.value, ops.where(take, v.value, s.value))
               for v, a, s in zip(variables, anchors, snapshots)]
            + [lambda v=v, a=a, s=s: ops.where(first, v.value,
                                               ops.where(confirm, s.value, a.value))
               for v, a, s in zip(variables, anchors, snapshots)]
            + [lambda r=r: ops.where(blown_up, ops.zeros_like(r.value), r.value)
               for r in restarted])

    def short_warmup_message(self):
        """Why the warm-up's h is far below its noise target, or None.

        :func:`~keras_bnn.samplers.warmup.climb_shortfall` of the frozen h,
        read on the host once the warm-up is over (``fit`` asks when it
        leaves the warm-up's code out of the step).

        Returns:
            A message naming ``warmup_steps`` and the steps the climb
            lacked, or None (an explicit step, the warm-up not over, or h
            at its target or ceiling).
        """
        frozen = self._frozen_warmup()
        if frozen is None:
            return None
        step = frozen[0]
        missing, limited = climb_shortfall(*frozen)
        if not missing:
            return None
        return (f"{type(self).__name__}: the warm-up's {self.warmup.warmup_steps} steps ended "
                f"with h = {step:.3g} still climbing to its noise target (about {limited:.3g}; "
                f"h starts at {INITIAL_STEP_SIZE:g} and at most doubles every 10 steps), so the "
                "chain moves with a step far too small to reach equilibrium in a usual run. "
                f"Give `warmup_steps` at least {2 * (self.warmup.warmup_steps + missing)} (the "
                f"climb lacked about {missing} steps, and the warm-up's second half measures the "
                "noise at the target), or leave it 'auto'.")

    def stiffness_message(self):
        """Why a blow-up left the warm-up's h far below its noise target, or None.

        :func:`~keras_bnn.samplers.warmup.stiffness_gap` of the frozen h,
        read on the host once the warm-up is over (``fit`` asks when it
        leaves the warm-up's code out of the step).

        Returns:
            A message naming h, the step that blew up and the noise-limited
            step ``h_r``, and what to do; or None (an explicit step, the
            warm-up not over, no blow-up, or h within ``STIFFNESS_GAP`` of
            the noise limit).
        """
        frozen = self._frozen_warmup()
        if frozen is None:
            return None
        step, ceiling = frozen[:2]
        gap, limited = stiffness_gap(*frozen)
        if not gap:
            return None
        return (f"{type(self).__name__}: the warm-up froze h = {step:.3g} at its stability "
                f"ceiling: the chain blew up at h = {ceiling / BLOW_UP_BACKOFF:.3g}, {gap:.3g} "
                "times below the step at which its gradient noise meets the target (about "
                f"{limited:.3g}). The model is stiff or badly scaled: a few directions are far "
                "stiffer than the rest, so the whole model moves with a step far too small to "
                "reach equilibrium in a usual run, and a longer warm-up does not help. "
                "Standardise the inputs (zero mean, unit variance per feature; a regression's "
                "targets too), use HMC (sampler='hmc') where the training set fits in one "
                "batch, or give an explicit `step_size` (a step above the one that blew up is "
                "unstable somewhere).")

    def frozen_noise_spread(self):
        """:func:`~keras_bnn.samplers.warmup.noise_spread` at the frozen steps (host).

        Returns:
            ``(spread, ratios)``: the spread (0 within ``NOISE_SPREAD``) and each
            variable's noise ratio at its frozen step; or None (an explicit step,
            or the warm-up not over).
        """
        frozen = self._frozen_warmup()
        if frozen is None:
            return None
        step, _, scales, _, _, exponent = frozen
        return noise_spread(step, scales, list(self.step_size_factors().values()), exponent)

    def noise_spread_message(self):
        """Why some variables step far below the step their own noise allows, or None.

        :func:`~keras_bnn.samplers.warmup.noise_spread` of the frozen steps,
        read on the host once the warm-up is over (``fit`` asks when it
        leaves the warm-up's code out of the step): the second cause of a
        :class:`~keras_bnn.samplers.warmup.StiffnessWarning`.

        Returns:
            A message naming the variables that set h, the quietest
            variable and the spread, and what to do; or None (an explicit
            step, the warm-up not over, or a spread within ``NOISE_SPREAD``).
        """
        spread, ratios = self.frozen_noise_spread() or (0.0, [])
        if not spread:
            return None
        step, *_, exponent = self._frozen_warmup()
        names = [getattr(v, "path", v.name) for v in self._trainable_variables]
        setters = ", ".join(n for n, r in zip(names, ratios) if r >= 0.5 * max(ratios))
        quietest = min((r, n) for n, r in zip(names, ratios) if r > 0.0)[1]
        return (f"{type(self).__name__}: the warm-up froze h = {step:.3g}, set by the gradient "
                f"noise of {setters}; at that step the noise ratio of {quietest} is {spread:.3g} "
                f"times below theirs: it could step {spread ** (1 / exponent):.3g} times longer "
                "at their noise level (on standardised inputs this spread of noise ratios is "
                "at most about 100). The inputs are badly scaled (the spread grows as the square "
                "of their scale), and the chain crawls towards its posterior without blowing "
                "up. `fit` raises h during burn-in as the noise falls (its chain needs "
                "thousands of steps more; a training loop of your own does not). "
                "Standardise the inputs (zero mean, unit variance per feature; a "
                "regression's targets too), use HMC (sampler='hmc') where the training set fits "
                "in one batch, or give an explicit `step_size` larger than h and watch the "
                "gradient_noise_ratio it logs (the warm-up measured the noise far from the "
                "posterior, where it can be far larger).")

    def _frozen_warmup(self):
        """``(h, ceiling, scales, sizes, r*, k)`` of a finished warm-up (host
        floats: the noise scales averaged), or None (an explicit step, or not over)."""
        if (self.warmup is None or not self.built
                or int(backend.to_numpy(self.iterations)) < self.warmup.warmup_steps):
            return None
        count = max(float(backend.to_numpy(self.warmup.averaged)), 1.0)
        return (float(backend.to_numpy(self.warmup.step_size)),
                float(backend.to_numpy(self.warmup.ceiling)),
                [float(backend.to_numpy(a)) / count for a in self.slots("noise_scale")],
                self._sizes(), self.warmup.target_noise_ratio, self.noise_ratio_exponent)

    def warmup_config(self):
        """The config entries of the warm-up: ``step_size="auto"``, the chosen h, its settings."""
        if self.warmup is None:
            return {}
        return {"step_size": "auto", "step_size_value": self.step_size_value,
                "step_size_factors": self.step_size_factors(), **self.warmup.get_config()}

    def after_variable_step(self, variable):
        """Runs the warm-up once per step, after the last variable's update.

        By then every variable's ratio of this step is written, so
        :meth:`~keras_bnn.samplers.Sampler.gradient_noise_ratio` is this
        step's r̂ (TensorFlow orders the reads after the writes).
        """
        if (self.warming_in_trace()
                and self._get_variable_index(variable) == len(self._trainable_variables) - 1):
            self.warmup.update(self.iterations, self.gradient_noise_ratio(),
                               self.noise_ratio_exponent,
                               (self.slots("noise_ratio"), self.slots("noise_scale"),
                                self.slots("step_factor"), self._sizes()))
