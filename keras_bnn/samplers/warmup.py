"""Warm-up: the step size chosen from the chain (``step_size="auto"``).

A sampler is right at some step sizes and wrong at others, and which ones
depends on n, T, the batch and the model. With ``step_size="auto"`` (the
default of SGLD, SGHMC, SGNHT and ATMC) the first ``warmup_steps`` steps tune
the base step h inside the compiled update, then h and a step factor
``s_v ≤ 1`` per variable are frozen, so the rest of the run is a
time-homogeneous chain (variable v steps with ``h·s_v``; a cyclical schedule
cycles around the frozen steps: ``h_t = h·c(t)``, ``c`` the cosine factor in
[0, 1]; ``c = 1`` during the warm-up).

What h is chosen. The largest step that keeps the chain stable and keeps the
gradient-noise ratio ``r`` (:meth:`keras_bnn.samplers.Sampler.gradient_noise_ratio`)
at or below a target ``r*`` at the current T:

* ``r* = TARGET_NOISE_RATIO = 0.05``. Measured against NUTS, ATMC's weakly
  determined directions come out with ``sd ≈ sqrt(1 - r)·sd_true`` and
  SGHMC's strongly determined ones with variance ``≈ (1 + r)·T``: at
  ``r = 0.05`` both are within 2.5 % in sd, which leaves half of a 5 %
  accuracy budget to Monte-Carlo error. (Mixing time grows as ``1/r*``
  for the momentum samplers, so a smaller target costs run time.)
* The noise law. ``r = c·h^k·mean(V̂)/T`` with the online noise estimate
  ``V̂`` (independent of h), ``k = 2`` for SGHMC/SGNHT/ATMC at their
  default friction (``γ = 0.1/h``, ``D = -log(0.9)/h``, which follow the
  tuned h) and ``k = 1`` for SGLD or an explicit friction/noise. So the step
  that meets the target is reached in one jump,
  ``h_r = h·(r*/r̂)^{1/k}`` (:func:`noise_limited_step_size`), not by search.
  ``V̂`` is an exponential average over ``1/(1-ρ)`` steps (``ρ =
  noise_estimate_decay``) and ``h`` follows it at every step, so the frozen
  h is set by the noise of the last few hundred warm-up steps: after the
  transient, not in it.
* Stability is tested. h starts at ``INITIAL_STEP_SIZE`` (1e-8, stable for
  any model used here: ``h·n·λ`` is tiny) and may grow by at most
  ``GROWTH_PER_STEP`` (doubling every 10 steps), so instability, when h
  reaches it, begins slowly. ``V̂`` is estimated from successive gradient
  differences, which contain the motion ``H·Δθ``; an unstable direction
  grows geometrically and blows ``V̂`` (hence ``r̂``) up within a few steps,
  so the noise law itself cuts h. A jump of ``r̂`` above
  ``BLOW_UP_RATIO·r*`` in one step (the noise estimate cannot move that
  fast on its own: it averages over ~100 steps) is recorded as a blow-up:
  h is cut to ``BLOW_UP_BACKOFF·h`` and never exceeds that ceiling again.
  The first r̂ measured (the run's, at step 2, and the first after a
  recovery: the r̂ before it is 0) is not judged: it has nothing to jump
  from, and its h was never fitted to the noise, so the noise law cuts h
  there (measured: breast_cancer ×1000, a 30-32-2 MLP, SGLD's first r̂ =
  0.27 at h = 1.15e-8, a step that ran stably for 500 steps when given
  explicitly, capped h at 2.9e-9 for good when it was judged).
  On noise-free (full-batch) problems ``V̂`` holds only the motion term,
  ``r̂ ≈ mean_i (h·λ_i)²/2`` (SGLD) or ``mean_i (h·ω_i)⁴/0.4`` (momentum),
  so the same target caps the root-mean-square stiffness at ``h·λ ≈ 0.3``.
  A blow-up is also undone
  (:meth:`~keras_bnn.samplers.auto_step.AutoStepSize.recover_after_step`): the
  weights return to the anchor, a snapshot taken at most ``ANCHOR_EVERY +
  ANCHOR_CONFIRM`` steps before and confirmed by ``ANCHOR_CONFIRM`` quiet
  steps after it (until the first is confirmed, the chain after step 0);
  the momenta, thermostats and ``V̂`` restart at 0 and h at the new
  ceiling. Without it
  a chain that an unstable step has thrown far out can overflow at the next
  step even at the cut h (measured: a 13-128-128-128 Gaussian-head MLP on
  diabetes, r̂ 0.049 → 4.4 in one step, NaN the step after).
  Measured on the full-batch breast_cancer regression at T = 1 (curvatures
  1–85): SGLD chose ``h·λ_max = 1.08``, SGHMC and ATMC ``h·ω_max = 0.77``
  and 0.79, all stable, median sd within 2 % of NUTS; only the stiffest
  direction of SGLD is wide there (variance ``1/(1 - h·λ/2)``): for full
  batches HMC is the exact choice. A blow-up ``STIFFNESS_GAP`` (10) times
  or more below the noise-limited step (:func:`stiffness_gap`) says that
  stability, not noise, sets h: a stiff or badly scaled model, which
  ``fit`` reports with :class:`StiffnessWarning` (measured on the
  standardised problems: the largest such gap 2.3, SGHMC on wine with a
  13-128-128-128 MLP). Unscaled inputs need no blow-up: the noisiest
  variables set h (below), and where that leaves another variable's ratio
  more than ``NOISE_SPREAD`` times below theirs (:func:`noise_spread`)
  the same warning names them, and ``fit`` raises h during burn-in as the
  noise falls (:mod:`keras_bnn.samplers.step_rise`).

The frozen steps (:func:`frozen_step_size`, :func:`variable_step_factor`).
The per-step rule above follows ``V̂``'s last ~100 steps, and the ratio is a
mean over all parameters; both hide bias. The ratio of a chain wanders with
the region it visits (wine, 13-100-100-3 MLP: 100-step means of r from 0.03
to 0.14 around a long-run
0.07 after the warm-up froze h at r̂ = 0.05), and the mean over parameters
is carried by the largest layer: on the CLI's MLPs the output layer read
r = 0.25–4.2 (wine, breast_cancer, diabetes; Fashion-MNIST 0.5–2.4) while
the mean read 0.02–0.07, and the bias laws hold per direction, so that
layer was sampled with a gradient noise as large as the injected noise. So at the last
warm-up step h and one step factor ``s_v ∈ (0, 1]`` per variable v are
set from the noise scale ``a_v = mean_t r̂_{v,t}/h_t^k`` (which the noise law
makes independent of h) averaged over the second half of the warm-up
(blow-up and restart steps left out):

    ā = Σ_v d_v·a_v / Σ_v d_v,    h = min(ceiling, g·h_last, (r*/ā)^{1/k}),
    s_v = min(1, (r*/(h^k·a_v))^{1/k}),

(``g·h_last``: one growth step above the last warm-up step, the largest
h whose stability was tested), and variable v steps with ``h_v = h·s_v``
from then on (its default
friction or noise level follows ``h_v``), so every variable's ratio is at
most r* and the bulk of the parameters keeps the step of the mean rule. A
constant step per variable is a time rescaling per block,
``dθ_v = s_v·M⁻¹p_v dt``, ``dp_v = -s_v·(∇_vU + γp_v) dt + sqrt(2s_vγT) dW``:
a constant positive diagonal ``D``/skew ``Q`` pair in the complete recipe
of Ma, Chen & Fox (2015), so the stationary law ``exp(-U/T)`` is unchanged;
only the noisy layers mix more slowly.

The warm-up length (:func:`auto_warmup_steps`): ``10/(1-ρ)`` steps, 1000 at
the default ρ = 0.99: ten memory lengths of ``V̂``: enough for the climb
from ``INITIAL_STEP_SIZE`` (at most ``10·log2(h/1e-8)`` steps: 200 to reach
h = 0.01) and for ``V̂`` to forget the start. It is a count of steps, not
epochs: 200 epochs of 5 steps on tiny data, 2 epochs of 469 steps on
Fashion-MNIST.

Where it runs. Inside the sampler's update, on three scalar optimizer
variables (:class:`StepSizeWarmup`), after the last variable's step: no
host work or synchronisation per step, the same code under ``model.fit``
on TensorFlow (graph or XLA) and JAX, under ``tf.distribute`` (the ratios
come from the all-reduced gradient, so every replica takes the same h), and
in a raw optimizer loop; a checkpoint taken during the warm-up resumes it.
The noise stays a pure function of (seed, variable, step), and the chosen h
a pure function of the chain, so it is reproducible from the seed. (A
per-epoch callback could not react within the ~10 steps an instability
takes, and would not exist outside ``fit``.) The thermostat ξ of SGNHT/ATMC
is a rate in units of 1/h and is carried across each change of h
(:meth:`StepSizeWarmup.change`).
"""

import math

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn.validation import check_fraction, check_int

#: The steady-state gradient-noise ratio the warm-up aims at (see module doc).
TARGET_NOISE_RATIO = 0.05
#: The auto step's value during the first step, before anything is measured.
INITIAL_STEP_SIZE = 1e-8
#: The largest factor by which h may grow in one warm-up step (×2 per 10 steps).
GROWTH_PER_STEP = 2.0 ** 0.1
#: The second noise measurement lowers a step factor only where ``r̄_v`` exceeds
#: this multiple of r* (:meth:`~keras_bnn.samplers.auto_step.AutoStepSize.lower_step_factors`).
REMEASURE_TOLERANCE = 1.25
#: ``r̂ > BLOW_UP_RATIO·r*`` in one step marks a blow-up.
BLOW_UP_RATIO = 4.0
#: After a blow-up h is cut to, and capped at, this fraction of the step it happened at.
BLOW_UP_BACKOFF = 0.25
#: Steps between two snapshots of the chain state during the warm-up.
ANCHOR_EVERY = 25
#: Steps without a blow-up after which a snapshot becomes the anchor a
#: blow-up returns to (an instability needs a few steps to show in r̂).
ANCHOR_CONFIRM = 5
#: A frozen h whose mean ratio ``h^k·ā`` is below this fraction of r*, and
#: below its stability ceiling, was still climbing when the warm-up ended
#: (:func:`climb_shortfall`).
SHORT_WARMUP_FRACTION = 0.1
#: A frozen h at its stability ceiling is stiff where the last step that blew
#: up (``ceiling/BLOW_UP_BACKOFF``) is more than this factor below the
#: noise-limited step ``h_r`` (:func:`stiffness_gap`).
STIFFNESS_GAP = 10.0
#: At the frozen steps a variable whose noise ratio is more than this factor
#: below the noisiest variable's says that the noisiest set h for variables
#: whose noise allows far longer steps: badly scaled inputs (:func:`noise_spread`).
NOISE_SPREAD = 3e4


class ShortWarmupWarning(UserWarning):
    """``step_size="auto"``'s warm-up ended while h was still climbing to its
    noise target (``warmup_steps`` too few): the chain moves with a far
    smaller step than the warm-up would choose (:func:`climb_shortfall`)."""


class StiffnessWarning(UserWarning):
    """``step_size="auto"``'s warm-up froze h far below the step the model
    needs: at its stability ceiling far below the step its gradient noise
    allows (:func:`stiffness_gap`), or set by the noisiest variables far
    below the step the others' noise allows (:func:`noise_spread`). The
    model is stiff or badly scaled, and a longer warm-up does not help."""


def auto_warmup_steps(noise_estimate_decay):
    """The default warm-up length: ten memory lengths of the noise estimate.

    Args:
        noise_estimate_decay: ρ of the sampler's ``V̂`` average.

    Returns:
        ``round(10/(1-ρ))`` (1000 at ρ = 0.99).
    """
    return int(round(10.0 / (1.0 - noise_estimate_decay)))


def noise_limited_step_size(step_size, ratio, target, exponent):
    """The step at which the noise ratio meets the target: ``h·(r*/r̂)^{1/k}``.

    ``r ∝ h^k`` at a fixed noise variance (see the module doc), so this is
    exact given ``r̂``.

    Args:
        step_size: h at which ``ratio`` was measured.
        ratio: r̂ ≥ 0; where it is 0 (nothing measured, or no noise) the
            result is ``+inf`` (no limit).
        target: r* > 0.
        exponent: k (1 or 2).

    Returns:
        Scalar tensor.
    """
    safe = ops.where(ratio > 0.0, ratio, 1.0)
    limited = step_size * ops.power(target / safe, 1.0 / exponent)
    return ops.where(ratio > 0.0, limited, float("inf"))


def climb_shortfall(step_size, ceiling, scales, sizes, target, exponent):
    """The steps the warm-up lacked to climb to its noise target, or 0.

    h starts at ``INITIAL_STEP_SIZE`` and grows by at most
    ``GROWTH_PER_STEP`` a step, so a warm-up of too few steps freezes an h
    far below the noise-limited ``h_r = (r*/ā)^{1/k}`` (``ā`` as in
    :func:`frozen_step_size`). It fell short when the frozen h gives a mean
    ratio ``h^k·ā < SHORT_WARMUP_FRACTION·r*`` while below its stability
    ceiling (a blow-up caps h on purpose); a warm-up that reached the target
    ends at ``h^k·ā ≈ r*`` (the averaged noise varies by tens of percent, not
    tenfold).

    Args:
        step_size: the frozen h (float).
        ceiling: the stability ceiling (float, inf without a blow-up).
        scales: the averaged noise scales ``a_v`` (floats).
        sizes: the variables' sizes ``d_v``.
        target: r*.
        exponent: k.

    Returns:
        ``(missing_steps, noise_limited_step)``: ``log(h_r/h)/log(GROWTH_PER_STEP)``
        rounded up, and ``h_r``; ``(0, h_r)`` where the warm-up reached it
        (or nothing was measured: ``ā = 0``, ``h_r = inf``).
    """
    limited = mean_noise_limited_step(scales, sizes, target, exponent)
    if (limited == math.inf or (step_size / limited) ** exponent >= SHORT_WARMUP_FRACTION
            or step_size >= 0.99 * ceiling):
        return 0, limited
    return math.ceil(math.log(limited / step_size) / math.log(GROWTH_PER_STEP)), limited


def mean_noise_limited_step(scales, sizes, target, exponent):
    """``h_r = (r*/ā)^{1/k}``, ``ā = Σ d_v·a_v / Σ d_v`` (host floats; see
    :func:`frozen_step_size`).

    Args:
        scales: the averaged noise scales ``a_v`` (floats).
        sizes: the variables' sizes ``d_v``.
        target: r*.
        exponent: k.

    Returns:
        float; ``inf`` where ``ā = 0`` (nothing measured).
    """
    mean = sum(a * d for a, d in zip(scales, sizes)) / float(sum(sizes))
    return (target / mean) ** (1.0 / exponent) if mean > 0.0 else math.inf


def stiffness_gap(step_size, ceiling, scales, sizes, target, exponent):
    """How far below the noise-limited step a blow-up capped h, or 0.

    A blow-up caps h at ``BLOW_UP_BACKOFF`` times the step that blew up,
    for good. On a well-scaled model that step is near the noise-limited
    ``h_r`` (:func:`mean_noise_limited_step`), where the climb stops
    (measured on standardised breast_cancer, wine and digits, 128-128-128
    MLPs: blow-ups 0.37–2.3 times below ``h_r``). Where it blew up more
    than ``STIFFNESS_GAP`` times below ``h_r``, stability, not noise, sets
    h: some directions are far stiffer than the noise says (badly scaled
    inputs), and the rest of the model moves with that step.

    Args:
        step_size, ceiling, scales, sizes, target, exponent: as for
            :func:`climb_shortfall`.

    Returns:
        ``(gap, noise_limited_step)``: ``gap = h_r·BLOW_UP_BACKOFF/ceiling``
        where h is at its ceiling and that exceeds ``STIFFNESS_GAP``, else
        0; and ``h_r``.
    """
    limited = mean_noise_limited_step(scales, sizes, target, exponent)
    if not math.isfinite(ceiling) or step_size < 0.99 * ceiling or limited == math.inf:
        return 0.0, limited
    gap = limited * BLOW_UP_BACKOFF / ceiling
    return (gap if gap > STIFFNESS_GAP else 0.0), limited


def noise_spread(step_size, scales, factors, exponent):
    """How far below the noisiest variable's noise ratio the quietest one's
    sits at the frozen steps, or 0.

    At the frozen steps variable v has the ratio ``r_v = (h·s_v)^k·a_v``
    (:func:`variable_step_factor`): at most r*, reached by the noisiest,
    which set h through ``ā`` (unless a blow-up capped it: that is
    :func:`stiffness_gap`'s cause, which this ratio of ratios leaves out),
    and ``max_u r_u/spread_v`` for the others, which could step
    ``spread_v^{1/k}`` times longer at the noisiest's ratio. The spread is
    a ratio of noise levels, so it does not depend on the sampler (SGLD and
    ATMC on the same model agree within 30 %). Measured
    at the library's defaults (batches of 64, 1000 warm-up steps): at most 12
    on standardised breast_cancer, wine and digits 30-32-c MLPs and a digits
    CNN, LSTM, GRU, ResNet++ and embedding model, 2–100 on their 128-128-128
    MLPs (above 12 only where a blow-up capped h); inputs ×s raise it about as s²
    (breast_cancer 30-32-2 MLP ×30: 700–820, ×100: 7 800–9 300, both at
    their posterior's NLL 2 000 steps after the warm-up; ×1000: 1.0–1.5·10⁶
    on the breast_cancer, wine and digits MLPs and 2.0–3.1·10⁵ on the CNN,
    whose chains crawl: NLL 0.2–970 2 000 steps after the warm-up; on
    breast_cancer explicit steps 8–350 times the frozen h reach NLL 0.01
    with a ratio below r*: the warm-up measured the noise far from the
    posterior). ``NOISE_SPREAD`` lies 3 times above ×100 and 7 times below
    the CNN ×1000. The spread flags the scale, not the cause: raising the
    quiet variables' factors to their own noise-limited steps left seven of
    those eight chains as slow.

    Args:
        step_size: the frozen h (float).
        scales: the averaged noise scales ``a_v`` (floats; 0: not measured,
            e.g. a variable without gradient, left out).
        factors: the step factors ``s_v`` (floats).
        exponent: k.

    Returns:
        ``(spread, ratios)``: ``max_v r_v/min_v r_v`` (over the measured
        variables) where that exceeds ``NOISE_SPREAD``, else 0; and the
        ratios ``r_v`` (0 where not measured).
    """
    ratios = [(step_size * f) ** exponent * a for a, f in zip(scales, factors)]
    quietest = min((r for r in ratios if r > 0.0), default=math.inf)
    spread = max(ratios, default=0.0) / quietest
    return (spread if spread > NOISE_SPREAD else 0.0), ratios


def frozen_step_size(scales, sizes, target, exponent, ceiling):
    """The frozen base step: ``h = min(ceiling, (r*/ā)^{1/k})``, ``ā = Σ d_v·a_v / Σ d_v``.

    See the module doc.

    Args:
        scales: the noise scales ``a_v`` ≥ 0 (ratio at h = 1), one scalar
            tensor per variable.
        sizes: the variables' sizes ``d_v`` (Python ints).
        target: r*.
        exponent: k.
        ceiling: the largest h allowed (stability).

    Returns:
        Scalar tensor; ``+inf`` when every ``a_v`` is 0 (nothing measured:
        keep the per-step rule's h).
    """
    mean = sum(scale * float(d) for scale, d in zip(scales, sizes)) / float(sum(sizes))
    limited = noise_limited_step_size(1.0, mean, target, exponent)
    return ops.where(ops.isfinite(limited), ops.minimum(limited, ceiling), limited)


def variable_step_factor(step_size, scale, target, exponent):
    """A variable's step factor at the frozen h: ``s_v = min(1, (r*/(h^k·a_v))^{1/k})``.

    Args:
        step_size: the frozen base step h (finite).
        scale: the variable's noise scale ``a_v`` ≥ 0.
        target: r*.
        exponent: k.

    Returns:
        Scalar tensor in (0, 1]; 1 where ``a_v = 0``.
    """
    ratio = ops.power(step_size, float(exponent)) * scale
    return ops.minimum(1.0, noise_limited_step_size(1.0, ratio, target, exponent))


def next_step_size(step_size, ceiling, ratio, target, exponent, blown_up=None):
    """One warm-up update of the step size and its stability ceiling.

    After a blow-up (``r̂ > BLOW_UP_RATIO·r*``) ``ceiling ← min(ceiling,
    BLOW_UP_BACKOFF·h)`` and ``h ← ceiling`` (that r̂ measures the explosion,
    not the noise); otherwise ``h ← min(GROWTH_PER_STEP·h, h·(r*/r̂)^{1/k},
    ceiling)``.

    Args:
        step_size: h of the step just taken.
        ceiling: the largest h allowed so far (``+inf`` before any blow-up).
        ratio: r̂ of the step just taken (at h).
        target: r*.
        exponent: k of the noise law.
        blown_up: whether this step is a blow-up (boolean scalar); None:
            ``r̂ > BLOW_UP_RATIO·r*``.

    Returns:
        ``(h_next, ceiling_next)``: scalar tensors.
    """
    if blown_up is None:
        blown_up = ratio > BLOW_UP_RATIO * target
    ceiling = ops.where(blown_up, ops.minimum(ceiling, BLOW_UP_BACKOFF * step_size), ceiling)
    step = ops.minimum(GROWTH_PER_STEP * step_size,
                       noise_limited_step_size(step_size, ratio, target, exponent))
    # A blow-up's r̂ measures the explosion, not the noise: h goes to the new ceiling.
    return ops.where(blown_up, ceiling, ops.minimum(step, ceiling)), ceiling


class StepSizeWarmup:
    """The state and rule of ``step_size="auto"``, owned by a sampler.

    Nine scalar optimizer variables: the base step h (``step_size``), the
    h of the step before (``previous``, for state kept in units of 1/h: see
    :meth:`change`), the stability ceiling, whether the last step was a
    blow-up (``blown_up``, 0 or 1) or the one before (``reestimate``), the
    r̂ of the last step (``previous_ratio``: 0 before the first measured
    one, which is not judged as a blow-up), the
    number of blow-ups so far, the number of steps averaged for the
    frozen steps (``averaged``), and whether the factors were re-measured
    at equilibrium (``remeasured``, 0 or 1, see
    :meth:`~keras_bnn.samplers.auto_step.AutoStepSize.lower_step_factors`; it
    checkpoints with the rest, so a resumed run does not measure again). During the first
    ``warmup_steps`` steps :meth:`update` applies :func:`next_step_size`
    after every step and, in
    the second half, sums each variable's noise scale; the last warm-up step
    sets h and the step factors (:func:`frozen_step_size`,
    :func:`variable_step_factor`); from then on both
    are constant.

    Args:
        warmup_steps: ``"auto"`` (:func:`auto_warmup_steps`) or an int ≥ 1.
        target_noise_ratio: r* in (0, 1).
        noise_estimate_decay: ρ of the sampler's noise estimate (for ``"auto"``).
        owner: the sampler's class name, for error messages.

    Raises:
        ValueError: for a bad ``warmup_steps`` or ``target_noise_ratio``.
    """

    def __init__(self, warmup_steps, target_noise_ratio, noise_estimate_decay, owner):
        self.warmup_steps = (
            auto_warmup_steps(noise_estimate_decay) if warmup_steps == "auto"
            else check_int(warmup_steps, "warmup_steps", 1, owner=owner))
        self.target_noise_ratio = check_fraction(target_noise_ratio, "target_noise_ratio", owner)
        self.step_size = None
        self.previous = None
        self.ceiling = None
        self.blown_up = None
        self.blow_ups = None
        #: The rise of a badly scaled chain's h (:mod:`keras_bnn.samplers.step_rise`),
        #: a host float, not checkpointed.
        self.rising = 0.0

    def build(self, optimizer):
        """Creates the variables on ``optimizer`` (they checkpoint with it)."""
        self.step_size = optimizer.add_variable(
            shape=(), initializer=keras.initializers.Constant(INITIAL_STEP_SIZE),
            name="auto_step_size")
        self.previous = optimizer.add_variable(
            shape=(), initializer=keras.initializers.Constant(INITIAL_STEP_SIZE),
            name="auto_step_size_previous")
        self.ceiling = optimizer.add_variable(
            shape=(), initializer=keras.initializers.Constant(float("inf")),
            name="auto_step_size_ceiling")
        (self.blown_up, self.reestimate, self.blow_ups, self.averaged, self.remeasured,
         self.previous_ratio) = (
            optimizer.add_variable(shape=(), initializer="zeros", name=name)
            for name in ("auto_step_size_blown_up", "auto_step_size_reestimate",
                         "auto_step_size_blow_ups", "auto_step_size_averaged",
                         "auto_step_size_remeasured", "auto_step_size_previous_ratio"))

    def update(self, iterations, ratio, exponent, layers):
        """Adapts h after step ``iterations`` while it is a warm-up step.

        Args:
            iterations: the step just taken (0-based).
            ratio: the gradient-noise ratio r̂ of that step.
            exponent: k of the sampler's noise law.
            layers: ``(ratios, scales, factors, sizes)``: the per-variable
                r̂_v of that step, the sums of the noise scales ``r̂_v/h^k``
                (scalar variables), the step factors ``s_v`` (scalar
                variables) and the sizes ``d_v``.
        """
        warming = ops.less(iterations, self.warmup_steps)
        # Read now (a copy): on TensorFlow ``.value`` is the variable itself,
        # read wherever it is used, after the assignments below.
        old_step, old_ceiling = ops.copy(self.step_size.value), ops.copy(self.ceiling.value)
        ratio = ops.cast(ratio, old_step.dtype)
        # The step after a recovery compares gradients at two different
        # points: its r̂ says nothing about stability. Nor does the first r̂
        # measured (the run's, or the first after a recovery: the r̂ before
        # it is 0): it has nothing to jump from, and its h was never fitted
        # to the noise; the noise law cuts h instead.
        fresh = ops.less(self.blown_up.value, 0.5)
        previous_ratio = ops.copy(self.previous_ratio.value)
        measured = ops.greater(previous_ratio, 0.0)
        blown_up = ops.logical_and(
            ops.logical_and(warming, ops.logical_and(fresh, measured)),
            ratio > BLOW_UP_RATIO * self.target_noise_ratio)
        step, ceiling = next_step_size(old_step, old_ceiling, ratio,
                                       self.target_noise_ratio, exponent, blown_up)
        self.step_size.assign(ops.where(warming, step, old_step))
        self._freeze(iterations, warming, blown_up, fresh, step, ceiling, exponent, old_step,
                     layers)
        self.ceiling.assign(ops.where(warming, ceiling, old_ceiling))
        blown_up = ops.cast(blown_up, old_step.dtype)
        self.reestimate.assign(self.blown_up.value)  # the step after next re-estimates V̂
        self.blown_up.assign(blown_up)
        self.blow_ups.assign(self.blow_ups + blown_up)
        self.previous.assign(old_step)
        self.previous_ratio.assign(ops.where(warming, ratio, previous_ratio))

    def _freeze(self, iterations, warming, blown_up, fresh, step, ceiling, exponent, old_step,
                layers):
        """Sums the noise scales over the warm-up's second half; at its last
        step sets h (:func:`frozen_step_size`), then the step factors at it
        (:func:`variable_step_factor`). Three conditional assignments
        (:func:`keras_bnn.backend.assign_where`): no per-variable work on
        the other steps, and O(variables) work on the last one."""
        ratios, scales, factors, sizes = layers
        # V̂ is 0 at steps 0–1 and right after a recovery: those r̂ measure nothing.
        counted = ops.logical_and(
            ops.logical_and(warming, ops.logical_not(blown_up)),
            ops.logical_and(ops.logical_and(fresh, ops.less(self.reestimate.value, 0.5)),
                            ops.greater_equal(iterations, max(
                                2, self.warmup_steps - self.warmup_steps // 2))))
        power = ops.power(old_step, float(exponent))
        backend.assign_where(
            counted, [*scales, self.averaged],
            [lambda r=r, a=a: a.value + ops.cast(r, power.dtype) / power
             for r, a in zip(ratios, scales)] + [lambda: self.averaged.value + 1.0])

        count = ops.maximum(self.averaged.value, 1.0)
        last = ops.logical_and(ops.equal(iterations, self.warmup_steps - 1),
                               ops.greater(self.averaged.value, 0.5))

        def frozen():
            # Stability is tested only up to one growth step above the last h.
            h = frozen_step_size([a.value / count for a in scales], sizes,
                                 self.target_noise_ratio, exponent,
                                 ops.minimum(ceiling, GROWTH_PER_STEP * old_step))
            return ops.where(ops.isfinite(h), h, step)

        backend.assign_where(last, [self.step_size], [frozen])
        # The factors at the h just frozen (read after its assignment).
        backend.assign_where(
            last, factors,
            [lambda a=a: variable_step_factor(self.step_size.value, a.value / count,
                                              self.target_noise_ratio, exponent)
             for a in scales])

    def change(self):
        """``h_prev/h``: the factor that carries a rate in units of 1/h across a change of h.

        A thermostat ξ is a friction: its natural scale is ``D ∝ 1/h``, so
        when h grows ×f, ξ must shrink ×f or it would dwarf the new D (and
        ATMC's noise ``α = max(D - ξ, 0)`` would overheat the momenta). The
        factor is exactly 1 once h is frozen.

        Returns:
            Scalar tensor.
        """
        return self.previous.value / self.step_size.value

    def get_config(self):
        return {"warmup_steps": self.warmup_steps, "target_noise_ratio": self.target_noise_ratio}
