"""The frozen step of a badly scaled chain raised after its transient (``step_size="auto"``).

The warm-up (:mod:`keras_bnn.samplers.warmup`) sets h from the gradient
noise of its second half. Where the inputs are badly scaled the chain is
still far from its posterior then, and the noise there is far larger than
at the posterior, so the frozen h is far too small and the chain crawls
(measured: breast_cancer standardised then ×1000, a 30-32-2 MLP at the
library's defaults: h 8–350 times below a step that reaches the posterior
with a noise ratio below r*; NLL 9.9 (SGLD) and 22 (ATMC) 2000 steps after
the warm-up, against about 0.01 at the posterior). Such a chain is the one
whose noise spread over variables is above ``NOISE_SPREAD`` at the freeze
(:func:`~keras_bnn.samplers.warmup.noise_spread`; at most 12 on standardised
inputs, 700–9300 at ×30–×100, 1–1.5·10⁶ at ×1000).

So is a chain still far above T at the warm-up's end: the mean ``m`` of
the epochs' logged ``configurational_temperature`` over the warm-up's
second half and the first epoch after (at least ``TRANSIENT_READINGS``)
exceeds ``TRANSIENT_FACTOR``·T by more than ``TRANSIENT_Z`` standard errors
(:func:`far_from_equilibrium`). A chain that far above T is still shrinking
towards its posterior, where its gradients, hence its noise, are larger
(one below T is growing out of a start near the mode: not judged). The
error term is for small models: diabetes (bmi, s5, a ``Dense(2)`` Gaussian
head, 6 weights, batches of 32) reads epoch means from −2 to 3.6·T at
equilibrium (minibatch virial noise); seed 3 read 500·T at the freeze and
90–130·T after 16 000 steps (h 8–350 times too low, no equilibrium for
SGLD, SGHMC, SGNHT, ATMC); the command line's ATMC runs (breast_cancer,
diabetes, digits, wine) read 0.81–1.15·T there, and run as before.
For those chains only, ``fit`` adapts h again during burn-in (:class:`StepRise`,
driven from the epoch ends by :class:`keras_bnn.models.fit_callbacks.LeaveWarmup`),
as the warm-up's per-step rule does but at epoch ends: each epoch end's
readings of the variables' ratios give the noise scales ``a_v = r_v/(h·s_v)^k``
(:func:`noise_scales`) and h follows their mean rule (:func:`raised_step`: at
most ``RISE_LIMIT`` times higher per :func:`rise_steps` optimizer steps since
the last epoch end, whatever the epochs' length, never above the warm-up's
stability ceiling nor below its frozen h; the factors are kept). Every
:meth:`~keras_bnn.samplers.Sampler.noise_averaging_steps` steps (a window) it
checks the rise: where h rose less than ``RISE_STOP`` times over the window
(the noise no longer falls: the transient is over), or after ``MAX_RISES``
windows, h and the factors are set from the scales averaged over that window
as at the freeze (:func:`~keras_bnn.samplers.warmup.frozen_step_size`,
:func:`frozen_factors`) and stay. The equilibrium test of
:class:`keras_bnn.callbacks.CollectSamples` watches only the epochs after
the rise (:func:`rise_pending`), so its windows and its second noise
measurement span one step size. The rise also ends for good, at the
current steps, where that measurement is done (a restored chain), a
collector collects, or one has an int ``start_epoch``: h is constant while
samples are collected. Measured at ×1000
(9 000 steps, epochs of 100, one chain each): SGLD h 2.9e-9 → 2.4e-7, ATMC
1.2e-5 → 2.0e-4, frozen again at step 8 900; NLL at step 9 000 3.6 → 0.0008
(SGLD) and 8.4 → 0.0004 (ATMC), means over the last 10 epochs 0.06 and 0.014,
against 0.03 and 0.014 for explicit steps 1e-6 and 1e-4 from the start.
Such a chain amplifies round-off: with the same weights and batches, JAX's
chain is TensorFlow's to 2e-6 up to step 4 600 (the warm-up's h, the ratios
read, the rise's windows), then they part as far as TensorFlow's does from
itself with one weight moved by 1 ulp (h at step 9 000: 1.9e-7, 3.5e-7 and
1.6e-7 for one seed), and so does where the rise stops.
A chain whose spread is within ``NOISE_SPREAD`` runs exactly as without this:
nothing is assigned, and the spread is read on the host once, when the warm-up
ends. Host work at epoch ends only (one read of the per-variable ratios, as
:class:`~keras_bnn.models.fit_callbacks.WarnOnGradientNoise` does). The state
(``sampler.warmup.rising``, a host float) is not a checkpointed variable: an
optimizer variable more would stop states saved without names from loading
(:mod:`keras_bnn.samplers.state_layout`). So a chain restored in a new process
judges its spread again at its first epoch end, and rises again only while its
second noise measurement is pending (that flag is checkpointed); a ``fit``
restarts the window it is in.

Every chain's h may also rise once more, at the second noise measurement
(:meth:`~keras_bnn.samplers.auto_step.AutoStepSize.raise_step_size`, from
:class:`keras_bnn.callbacks.CollectSamples` at the first equilibrium): the
warm-up's mean rule on the ratios averaged there (:func:`remeasured_step`),
where it allows at least ``RAISE_GATE`` times h, in one jump (at most the
stability ceiling), the factors as at the freeze. On a standardised problem
the warm-up can still be in the transient (diabetes, features bmi and s5, a
``Dense(2)`` Gaussian head: r from r* = 0.05 at the freeze to 0.005, h 3.2
times below what r* allows for ATMC, 5.4 for SGLD); the jump measured stable
for SGLD, SGHMC, SGNHT and ATMC there. Both changes of h carry each
variable's state across (:func:`assign_step`).
"""

import math

from keras_bnn import backend
from keras_bnn.samplers.warmup import mean_noise_limited_step, variable_step_factor

#: A window of ``noise_averaging_steps`` whose h rose less than this factor ends the rise.
RISE_STOP = 1.25
#: The largest factor by which h rises per memory length ``1/(1-ρ)`` of the noise
#: estimate (:func:`rise_steps`), however the steps fall into epochs (its stability
#: was not tested).
RISE_LIMIT = 2.0
#: The most windows of rising in one chain.
MAX_RISES = 20
#: The least factor by which the second noise measurement raises h
#: (:func:`remeasured_step`): mixing time goes as 1/h, so less buys little.
RAISE_GATE = 2.0
#: A chain whose epoch-mean configurational temperature reads above
#: ``TRANSIENT_FACTOR·T`` at the first epoch end after the warm-up is still in
#: its transient (:func:`far_from_equilibrium`; below T is not judged).
TRANSIENT_FACTOR = 2.0
#: ...by more than this many standard errors of the readings' mean.
TRANSIENT_Z = 4.0
#: ...from at least this many epochs' readings (their sd then has 4 degrees of freedom).
TRANSIENT_READINGS = 5
#: ``warmup.rising``: 0 before the warm-up's end is judged, ``DONE``
#: once the rise is over (or not needed), ``RISING + n`` after n windows.
UNDECIDED, RISING, DONE = 0.0, 1.0, -1.0


def rise_pending(sampler):
    """Whether an epoch end may still raise the sampler's h (:class:`StepRise`
    is judging or raising it): the equilibrium test of
    :class:`keras_bnn.callbacks.CollectSamples` watches only the epochs after.

    Args:
        sampler: the model's optimizer.

    Returns:
        bool.
    """
    warmup = getattr(sampler, "warmup", None)
    return warmup is not None and warmup.rising >= RISING


def far_from_equilibrium(readings, temperature):
    """Whether the epochs' mean configurational temperature ``m`` (the mean of
    their logs ``configurational_temperature``, over T) exceeds
    ``TRANSIENT_FACTOR`` by more than ``TRANSIENT_Z`` standard errors
    ``s/√n`` (``s`` the readings' sd): the chain is still shrinking towards
    its posterior, where the gradient noise is larger (see the module doc).

    Args:
        readings: the epochs' logged configurational temperatures.
        temperature: T > 0.

    Returns:
        bool; False from fewer than ``TRANSIENT_READINGS`` finite readings.
    """
    values = [r / temperature for r in readings if math.isfinite(r)]
    count = len(values)
    if count < TRANSIENT_READINGS:
        return False
    mean = math.fsum(values) / count
    error = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (count - 1) / count)
    return mean - TRANSIENT_Z * error > TRANSIENT_FACTOR


def noise_scales(step_size, factors, ratios, exponent):
    """``a_v = r_v/(h·s_v)^k`` (0 where ``r_v`` is 0: not measured).

    Args:
        step_size: h at which the ratios were read.
        factors: the step factors ``s_v``.
        ratios: the ratios ``r_v``.
        exponent: k.

    Returns:
        List of floats.
    """
    return [r / (step_size * f) ** exponent if r > 0.0 else 0.0
            for r, f in zip(ratios, factors)]


def rise_steps(sampler):
    """The steps over which h may rise by ``RISE_LIMIT``: the memory length
    ``1/(1-ρ)`` of the noise estimate (100 at ρ = 0.99, a tenth of the
    default :meth:`~keras_bnn.samplers.Sampler.noise_averaging_steps`), over
    which an epoch end's reading of the ratios is averaged: a faster rise
    would be judged by readings of the noise at a lower h.

    Args:
        sampler: a :class:`~keras_bnn.samplers.Sampler`.

    Returns:
        float > 1.
    """
    return 1.0 / (1.0 - sampler.noise_estimate_decay)


def raised_step(step_size, floor, ceiling, scales, sizes, target, exponent, rises):
    """The base step the noise scales allow: ``(r*/ā)^{1/k}`` (the mean rule
    of :func:`~keras_bnn.samplers.warmup.frozen_step_size`), at most
    ``RISE_LIMIT^rises·h`` and the ceiling, at least ``floor`` (the warm-up's h).

    Args:
        step_size: the current base step h.
        floor: the lowest h allowed.
        ceiling: the warm-up's stability ceiling (inf without a blow-up).
        scales: the noise scales ``a_v``.
        sizes: the variables' sizes ``d_v``.
        target: r*.
        exponent: k.
        rises: the steps since the last epoch end over :func:`rise_steps`, ≥ 0.

    Returns:
        float; ``step_size`` where nothing was measured.
    """
    limited = mean_noise_limited_step(scales, sizes, target, exponent)
    if limited == math.inf:
        return step_size
    try:
        fastest = RISE_LIMIT ** rises * step_size
    except OverflowError:  # epochs of millions of memory lengths
        fastest = math.inf
    return max(floor, min(limited, fastest, ceiling))


def frozen_factors(step_size, scales, target, exponent):
    """``s_v = min(1, (r*/(h^k·a_v))^{1/k})``, 1 where ``a_v = 0``: the warm-up's
    :func:`~keras_bnn.samplers.warmup.variable_step_factor`, as host floats.

    Args:
        step_size: the base step h.
        scales: the noise scales ``a_v``.
        target: r*.
        exponent: k.

    Returns:
        List of floats in (0, 1].
    """
    return [float(backend.to_numpy(variable_step_factor(step_size, a, target, exponent)))
            for a in scales]


def remeasured_step(step_size, ceiling, factors, ratios, sizes, target, exponent):
    """The base step and factors the second noise measurement's ratios allow,
    where that step is at least ``RAISE_GATE`` times h (see the module doc).

    The mean rule of the warm-up on the noise scales of the averaged ratios
    (:func:`noise_scales`, :func:`~keras_bnn.samplers.warmup.mean_noise_limited_step`),
    at most the stability ceiling; the factors as at the freeze (:func:`frozen_factors`).

    Args:
        step_size: the current base step h, at which the ratios were averaged.
        ceiling: the warm-up's stability ceiling (inf without a blow-up).
        factors: the current step factors ``s_v``.
        ratios: the averaged ratios ``r̄_v`` (0: not measured).
        sizes: the variables' sizes ``d_v``.
        target: r*.
        exponent: k.

    Returns:
        ``(step, factors)``, or None where the step is below ``RAISE_GATE·h``
        or nothing was measured.
    """
    scales = noise_scales(step_size, factors, ratios, exponent)
    step = min(mean_noise_limited_step(scales, sizes, target, exponent), ceiling)
    if not math.isfinite(step) or step < RAISE_GATE * step_size:
        return None
    return step, frozen_factors(step, scales, target, exponent)


def assign_step(sampler, old_step, step, factors):
    """Sets the base step h and the step factors between steps (host side),
    carrying each variable's state across its change
    (:meth:`~keras_bnn.samplers.Sampler.carry_step_change`).

    Args:
        sampler: a :class:`~keras_bnn.samplers.Sampler` with ``step_size="auto"``.
        old_step: the current h.
        step: the new h.
        factors: the new factors ``s_v``, in the sampler's order.
    """
    old = list(sampler.step_size_factors().values())
    if step == old_step and factors == old:
        return
    sampler.warmup.step_size.assign(step)
    sampler.warmup.previous.assign(step)
    for variable, before, after in zip(sampler._trainable_variables, old, factors):
        sampler.state(variable)["step_factor"].assign(after)
        change = old_step * before / (step * after)
        if not math.isclose(change, 1.0):
            sampler.carry_step_change(variable, change)


class StepRise:
    """The rise of a badly scaled chain's frozen step during burn-in (see the module doc).

    Made when ``fit`` begins: the steps to its first epoch end count
    towards the rise's limit.

    Args:
        sampler: an :class:`~keras_bnn.samplers.Sampler` with ``step_size="auto"``.
    """

    def __init__(self, sampler):
        self.sampler = sampler
        self._floor = self._start = self._window_step = None
        self._sums, self._count, self._readings = [], 0, []
        self._last = int(backend.to_numpy(sampler.iterations))  # the last epoch end's step

    @property
    def state(self):
        """The sampler's ``warmup.rising`` (see ``RISING``)."""
        return self.sampler.warmup.rising

    def _set(self, state):
        self.sampler.warmup.rising = state

    def read_logs(self, logs):
        """Keeps an epoch's logged ``configurational_temperature`` (a host
        float) while the rise is undecided and the epoch ends in the
        warm-up's second half or later: their mean decides at the first
        epoch end after the warm-up (:func:`far_from_equilibrium`). Call it
        before :meth:`after_epoch`.

        Args:
            logs: the epoch's logs (may be None or lack the key).
        """
        reading = (logs or {}).get("configurational_temperature")
        if (reading is not None and self.state == UNDECIDED
                and 2 * int(backend.to_numpy(self.sampler.iterations))
                > self.sampler.warmup.warmup_steps):
            self._readings.append(float(reading))

    def after_epoch(self, collectors):
        """Decides, or raises h, at an epoch end (host work).

        Args:
            collectors: the ``CollectSamples`` callbacks of the ``fit``.
        """
        sampler = self.sampler
        if self.state == DONE:
            return
        now, since = int(backend.to_numpy(sampler.iterations)), self._last
        self._last = now
        frozen = sampler._frozen_warmup()
        # Judged where fit warns (a step past the warm-up: AutoStepSize.leave_warmup).
        if frozen is None or now <= sampler.warmup.warmup_steps:
            return
        step, ceiling, _, sizes, target, exponent = frozen
        factors = self._factors()
        if self.state == UNDECIDED:
            far = far_from_equilibrium(self._readings, getattr(sampler, "temperature", 1.0))
            self._set(RISING if far or sampler.frozen_noise_spread()[0] > 0.0 else DONE)
            return
        if (not sampler.remeasure_pending()
                or any(not c.auto or c.start_epoch is not None for c in collectors)):
            self._set(DONE)
            return
        latest = noise_scales(step, factors, [float(backend.to_numpy(r)) for _, r, _
                                              in sampler.gradient_noise_ratios()], exponent)
        if self._start is None:
            self._floor = self._floor or step
            self._start, self._window_step = now, step
            self._sums, self._count = [0.0] * len(latest), 0
        self._sums = [a + b for a, b in zip(self._sums, latest)]
        self._count += 1
        if now - self._start >= sampler.noise_averaging_steps():
            self._start = None
            if (step < RISE_STOP * self._window_step
                    or self.state + 1.0 >= RISING + MAX_RISES):
                mean = [a / self._count for a in self._sums]
                final = max(self._floor, min(mean_noise_limited_step(mean, sizes, target,
                                                                     exponent), ceiling))
                assign_step(sampler, step, final, frozen_factors(final, mean, target, exponent))
                self._set(DONE)
                return
            self._set(self.state + 1.0)
        rises = (now - since) / rise_steps(sampler)
        assign_step(sampler, step, raised_step(step, self._floor, ceiling, latest, sizes, target,
                                               exponent, rises), factors)

    def _factors(self):
        return list(self.sampler.step_size_factors().values())
