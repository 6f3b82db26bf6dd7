"""Hamiltonian Monte Carlo: the exact, Metropolis-corrected reference sampler."""

import math
import warnings

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import nonfinite
from keras_bnn.fit_data import array_examples
from keras_bnn.samplers.base import Sampler
from keras_bnn.samplers.kernel import Transition
from keras_bnn.samplers.readouts import compensated_add
from keras_bnn.validation import argument_error, check_fraction, check_int

# Dual-averaging constants of Hoffman & Gelman (2014), Algorithm 5.
_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75
# Gain c/(k + k0) of the Robbins-Monro refinement (Andrieu & Thoms 2008, §5.1)
# that ends the adaptation: its iterates' spread shrinks as 1/k, so the frozen
# step's own acceptance is the target. c = 2 keeps c·|dα/dlog h| > 1/2 (the 1/k
# rate) for slopes from 0.4 (a high-dimensional Gaussian's limit, Beskos et al.
# 2013) to 0.8 (breast_cancer's regression; wine's MLP: 0.6).
_RM_GAIN, _RM_OFFSET = 2.0, 10.0


def dual_averaging_update(log_step_avg, error_avg, accept_prob, count, log_step0, target):
    """One dual-averaging update of the step size (Hoffman & Gelman 2014, eq. 6).

    With ``m = count`` (1-based), ``μ = log(10·h0)``, γ = 0.05, t0 = 10, κ = 0.75:
    ``H̄ ← (1 - 1/(m+t0))·H̄ + (δ - α)/(m+t0)``, ``log h ← μ - sqrt(m)/γ·H̄``,
    ``log h̄ ← m^-κ·log h + (1 - m^-κ)·log h̄``.

    Args:
        log_step_avg, error_avg: ``log h̄`` and ``H̄``.
        accept_prob: α, the acceptance probability of the last transition.
        count: m ≥ 1, float tensor.
        log_step0: ``log h0``.
        target: δ, the target acceptance probability.

    Returns:
        ``(log_step, log_step_avg, error_avg)`` after the update.
    """
    weight = 1.0 / (count + _T0)
    error_avg = (1.0 - weight) * error_avg + weight * (target - accept_prob)
    log_step = math.log(10.0) + log_step0 - ops.sqrt(count) / _GAMMA * error_avg
    eta = ops.power(count, -_KAPPA)
    return log_step, eta * log_step + (1.0 - eta) * log_step_avg, error_avg


def robbins_monro_update(log_step, accept_prob, count, target):
    """One Robbins-Monro step of ``log h`` toward acceptance δ (Andrieu & Thoms 2008).

    ``log h ← log h + c/(k + k0)·(α - δ)`` with c = 2, k0 = 10: the gain
    falls as 1/k, so the iterates settle on the h whose mean acceptance is
    δ (dual averaging's iterates keep a spread of ~0.3 in log h after 300
    transitions, and its average h̄ then accepts more than δ: α is concave
    in log h near δ).

    Args:
        log_step: ``log h``.
        accept_prob: α, the acceptance probability of the last transition.
        count: k ≥ 1, the refinement's transition count (float tensor).
        target: δ, the target acceptance probability.

    Returns:
        The updated ``log h``.
    """
    return log_step + _RM_GAIN / (count + _RM_OFFSET) * (accept_prob - target)


class MinibatchHMCWarning(UserWarning):
    """HMC run on minibatches of fewer than ``train_size`` examples: each
    transition targets that batch's posterior, so the chain is not exact."""


@keras.saving.register_keras_serializable(package="keras_bnn")
class HMC(Sampler):
    """Full-batch Hamiltonian Monte Carlo on ``p(θ) ∝ exp(-U(θ)/T)``.

    A transition kernel of its own (:class:`~keras_bnn.samplers.kernel.TransitionKernel`;
    it shares only the configuration of :class:`Sampler`: step size,
    temperature, ``train_size``, seed). One ``train_step`` of a
    :class:`keras_bnn.BayesianModel` is one whole HMC transition on its
    batch (the model hands :meth:`transition` the batch's potential as a
    function of the weights): with unit mass, momentum ``p ~ N(0, I)`` and
    Hamiltonian ``H(θ, p) = U(θ)/T + ½‖p‖²``, ``L`` leapfrog steps of size h

        p ← p - (h/2)·∇U(θ)/T;  L × [θ ← θ + h·p;  p ← p - h·∇U(θ)/T];
        p ← p + (h/2)·∇U(θ)/T

    (each gradient a forward and backward pass on the same batch), then the
    proposal is accepted with probability ``α = min(1, exp(H(θ, p) - H(θ', p')))``;
    otherwise the weights stay bitwise at the old state. A non-finite
    proposal (a divergent trajectory) is rejected. ``U = n·(mean NLL +
    (1/n)·(-log p(θ)))`` is the mean-form loss times ``train_size``; under
    ``tf.distribute`` it and its gradient are summed over replicas, so every
    replica takes the same decision. ``model.fit(x, y, batch_size=len(x),
    epochs=S)`` therefore yields S transitions of a Markov chain that leaves
    the tempered posterior exactly invariant. With a minibatch it is not
    exact (each step targets that batch's posterior): ``fit`` warns.

    Randomness follows the package's stateless rule: the momentum of variable
    i is ``stateless_normal(seed, i, iterations)`` and the accept uniform is
    ``Φ(z)`` with ``z = stateless_normal(seed, num_variables, iterations)``
    (a reserved index; the float64 draw, the same z on both backends), so a
    resumed run continues the same chain. Energies
    are summed in ``backend.wide_float()`` (float64; under JAX float32 unless
    ``jax_enable_x64``, read when the step is traced).

    Step size: constant h (the ``step_size``), or, with
    ``num_adaptation_steps > 0``, adapted toward ``target_accept_rate``
    during the first ``num_adaptation_steps`` transitions (dual averaging,
    Hoffman & Gelman 2014, over the first half; a Robbins-Monro refinement
    of its average over the second), then frozen: a chain stationary by
    then accepts the target on average. Transitions taken
    while adapting do not leave the posterior invariant: treat them as
    burn-in. Runs on the TensorFlow and JAX backends. A NaN/Inf potential or
    gradient at the current state stops ``fit`` with ``FloatingPointError``
    before anything changes; under XLA (``jit_compile=True``) and JAX, where
    that check cannot raise, the step changes nothing (weights, step size
    state, step counter), is counted in ``nonfinite_steps``, and ``fit``
    stops at the end of the epoch.

    Args:
        step_size: initial leapfrog step size h > 0 (a float or a
            ``LearningRateSchedule``; not ``"auto"``).
        num_leapfrog_steps: L ≥ 1.
        num_adaptation_steps: transitions of step-size adaptation (0: none).
        target_accept_rate: δ in (0, 1) for the adaptation.
        **kwargs: ``temperature``, ``train_size``, ``seed``, ``name`` (see
            :class:`Sampler`).

    Raises:
        ValueError: for ``num_leapfrog_steps < 1``, a negative
            ``num_adaptation_steps``, ``target_accept_rate`` outside (0, 1),
            a string step size (``"auto"``: until 2026-11-30 the SG samplers'
            warm-up, which HMC never ran, left h at 1e-8 and the chain
            still), or a non-positive step size, temperature or train size.
    """

    has_momentum = False  # p is redrawn each transition: no kinetic temperature to log
    full_batch = True
    metric_names = ("step_size", "configurational_temperature", "acceptance_rate")
    fixed_attributes = {**Sampler.fixed_attributes, **{name: name for name in (
        "num_leapfrog_steps", "num_adaptation_steps", "target_accept_rate")}}
    fixed_arguments = ("step_size",)  # a method here; HMC has no warm-up arguments

    def __init__(self, step_size=0.01, num_leapfrog_steps=10, num_adaptation_steps=0,
                 target_accept_rate=0.8, **kwargs):
        leapfrog_steps = check_int(num_leapfrog_steps, "num_leapfrog_steps", 1, owner="HMC")
        adaptation_steps = check_int(num_adaptation_steps, "num_adaptation_steps", 0, owner="HMC")
        target = check_fraction(target_accept_rate, "target_accept_rate", "HMC")
        if isinstance(step_size, str):  # the SG samplers' "auto" froze h at 1e-8 here
            raise argument_error(
                "step_size", "be a number > 0 or a LearningRateSchedule (HMC has no 'auto' "
                "warm-up: num_adaptation_steps > 0 tunes h toward target_accept_rate)",
                step_size, "HMC")
        super().__init__(step_size=step_size, **kwargs)
        self.num_leapfrog_steps = leapfrog_steps
        self.num_adaptation_steps = adaptation_steps
        self.target_accept_rate = target
        self._log_step0 = math.log(self.initial_step_size)  # read eagerly, not in a trace
        self._minibatch_warned = False  # in this fit (check_batch_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_leapfrog_steps=self.num_leapfrog_steps,
            num_adaptation_steps=self.num_adaptation_steps,
            target_accept_rate=self.target_accept_rate,
        )
        return config

    def build_state(self, var_list):
        log_step0 = self._log_step0
        # log h, log h̄ and H̄ of the dual averaging (unused without adaptation).
        self._log_step = self.add_variable(
            shape=(), initializer=keras.initializers.Constant(log_step0), name="log_step_size")
        self._log_step_avg = self.add_variable(
            shape=(), initializer=keras.initializers.Constant(log_step0),
            name="log_step_size_average")
        self._error_avg = self.add_variable(shape=(), name="acceptance_error_average")

    @property
    def step_size_value(self):
        """The leapfrog step h as a Python float: h0 without adaptation (or
        before the first transition), else :meth:`step_size` (the adapted h,
        then the frozen h̄)."""
        if not self.num_adaptation_steps or not self.built:
            return super().step_size_value
        return float(backend.to_numpy(self.step_size()))

    def step_size(self):
        """The leapfrog step size h of the next transition (a scalar tensor).

        The schedule's value without adaptation; ``exp(log h)`` while adapting
        and the frozen ``exp(log h̄)`` (the refinement's last iterate) afterwards.
        """
        if not self.num_adaptation_steps:
            return ops.cast(self.learning_rate, "float32")
        adapting = ops.less(self.iterations, self.num_adaptation_steps)
        return ops.exp(ops.where(adapting, ops.convert_to_tensor(self._log_step),
                                 ops.convert_to_tensor(self._log_step_avg)))

    def _get_current_learning_rate(self):
        """``learning_rate`` (what Keras' callbacks log, ``TensorBoard``'s
        ``epoch_learning_rate``): the h of the next transition,
        :meth:`step_size`, also while and after adapting (not the
        schedule's initial h)."""
        if not self.num_adaptation_steps or not self.built:
            return super()._get_current_learning_rate()
        return self.step_size()

    def apply(self, grads, trainable_variables=None):
        """Refused: an HMC transition is not a step from one gradient.

        It evaluates the potential along a leapfrog trajectory and accepts or
        rejects, so it needs the potential as a function of the weights
        (:meth:`transition`), which ``BayesianModel.fit`` and
        ``train_on_batch`` hand it. ``apply_gradients`` calls this too.

        Raises:
            TypeError: always, saying what to use instead.
        """
        raise TypeError(
            "HMC.apply / apply_gradients: an HMC transition cannot step from gradients: it "
            "evaluates the potential along a leapfrog trajectory and accepts or rejects. Run "
            "it with model.fit(...) or model.train_on_batch(x, y) of a kb.BayesianModel "
            "compiled with sampler=HMC(...) (one transition per batch); for a step from "
            "gradients in a custom loop use an SG sampler (SGHMC, ATMC, SGLD, SGNHT).")

    def check_batch_size(self, x=None, batch_size=None, terms=None):
        """Warns when a transition would see fewer than ``train_size`` examples (or terms).

        ``BayesianModel.fit`` calls it with its ``x`` and ``batch_size``
        (Keras' default batch is 32 for arrays), or for a dataset or
        generator with the size of its first batch, and, where the loss
        averages over other terms than examples (a per-timestep output's
        unmasked timesteps, the labels an ``ignore_class`` loss scores:
        ``train_size`` counts those), that batch's terms; :meth:`transition`
        with the traced batch size when it is static (``train_on_batch``, which
        no ``fit`` checked), where it warns only if ``fit``'s call did not:
        once per ``fit``, not again at each trace (under JAX every batch
        shape is traced: the first and a smaller last one). Until 2026-11-29
        a full batch of such a loss (16 sequences of 66 tokens,
        ``train_size=66``) warned as a minibatch of 16 < 66.

        Args:
            x: the training inputs (``fit``'s call), or None (a trace's).
            batch_size: ``fit``'s ``batch_size`` for arrays, else the batch
                size itself (None: unknown).
            terms: the loss terms of that batch, compared with
                ``train_size`` instead where not None.

        Warns:
            MinibatchHMCWarning: for a batch of fewer than ``train_size``
                examples (or terms).
        """
        if x is not None:  # fit's call: a new fit
            self._minibatch_warned = False
        count = None if x is None else array_examples(x)
        if count is not None:
            batch_size = min(batch_size or 32, count)
        seen = batch_size if terms is None else terms
        if seen is not None and seen < self.train_size and not self._minibatch_warned:
            self._minibatch_warned = True
            n = int(self.train_size)
            batch, full = (f"{batch_size} < train_size={n} examples",
                           f"train_size); keras-bnn: --batch-size {n}") if terms is None else (
                f"{batch_size} examples of {terms} loss terms < train_size={n} terms",
                "the number of training examples)")
            warnings.warn(
                f"HMC on a minibatch of {batch} is not exact: each transition targets that "
                f"batch's posterior. Use full batches (fit(..., batch_size={full} for the "
                "exact chain.",
                MinibatchHMCWarning, stacklevel=3,
            )

    def _momenta(self, variables):
        return [
            backend.stateless_normal(v.shape, self.seed, i, self.iterations, v.dtype)
            for i, v in enumerate(variables)
        ]

    def _trajectory(self, potential, theta, p, u, grads, h, force_scale):
        """L leapfrog steps from ``(θ, p)``; ``force_scale·grads`` is ∇(U/T) = n·∇/T.

        Returns:
            ``(θ', p', u')``: the end point and its mean-form potential.
        """

        def kick(momenta, gradients, size):
            return [q - ops.cast(size * force_scale, q.dtype) * g
                    for q, g in zip(momenta, gradients)]

        def step(state):
            theta, p, _, grads = state
            theta = [t + ops.cast(h, t.dtype) * q for t, q in zip(theta, p)]
            u, grads, _ = potential.at(theta)
            return theta, kick(p, grads, h), u, grads

        state = (theta, kick(p, grads, 0.5 * h), u, grads)
        if backend.num_replicas() > 1:
            # tf.distribute forbids the all-reduce of each gradient inside a
            # while loop: trace the L steps one after another instead.
            for _ in range(self.num_leapfrog_steps):
                state = step(state)
        else:
            state = ops.fori_loop(0, self.num_leapfrog_steps, lambda i, s: step(s), state)
        theta, p, u, grads = state
        return theta, kick(p, grads, -0.5 * h), u

    def _adapted(self, state, accept_prob, finite):
        """The step-size state ``(log h, log h̄, H̄)`` after this transition.

        Dual averaging (Hoffman & Gelman 2014) over the first ``ceil(N/2)``
        of the N adaptation transitions finds the scale from far away; its
        average h̄ then starts a Robbins-Monro refinement over the rest
        (:func:`robbins_monro_update`), whose iterate is both ``log h`` and
        the ``log h̄`` that is frozen after the adaptation (until 2026-12-01
        the frozen value was dual averaging's h̄ itself, which accepted 0.90
        against δ = 0.8 on breast_cancer's regression, as TFP's
        ``DualAveragingStepSizeAdaptation`` does). Nothing changes after the
        adaptation or for a non-finite start.
        """
        count = ops.cast(self.iterations + 1, "float32")
        averaging_steps = self.num_adaptation_steps - self.num_adaptation_steps // 2
        log_step, log_step_avg, error_avg = dual_averaging_update(
            state[1], state[2], accept_prob, count, self._log_step0, self.target_accept_rate)
        # The last averaging transition hands its h̄ to the refinement.
        log_step = ops.where(ops.equal(count, averaging_steps), log_step_avg, log_step)
        refined = robbins_monro_update(ops.convert_to_tensor(state[0]), accept_prob,
                                       count - averaging_steps, self.target_accept_rate)
        averaging = ops.less_equal(count, averaging_steps)
        updated = [ops.where(averaging, log_step, refined),
                   ops.where(averaging, log_step_avg, refined),
                   ops.where(averaging, error_avg, ops.convert_to_tensor(state[2]))]
        adapting = ops.logical_and(finite, ops.less(self.iterations, self.num_adaptation_steps))
        return [ops.where(adapting, new, ops.convert_to_tensor(old))
                for new, old in zip(updated, state)]

    def transition(self, potential, variables, skip_nonfinite):
        """One HMC transition of the trainable weights on a batch.

        See :meth:`keras_bnn.samplers.kernel.TransitionKernel.transition`:
        the trajectory evaluates ``potential.at`` (the whole batch's
        potential at weight values; all of the data for an exact chain).
        A non-finite potential or gradient at the current state raises
        (TensorFlow graph mode, ``InvalidArgumentError`` with
        :data:`keras_bnn.nonfinite.MARKER`) or, with ``skip_nonfinite``,
        changes nothing.

        Returns:
            :class:`~keras_bnn.samplers.kernel.Transition` whose logs are
            ``step_size`` h, ``configurational_temperature`` (at the state
            the transition started from) and ``acceptance_rate`` α.
        """
        del skip_nonfinite  # both halves of the policy are applied below
        variables = list(variables)
        if not self.built:
            self.build(variables)
        self.check_batch_size(batch_size=potential.batch_size)
        n = float(self.train_size)
        temperature = ops.cast(self._temperature, "float32")
        h = self.step_size()
        theta0 = [ops.copy(v) for v in variables]  # a read: the old state
        u0, grads0, (y_pred, loss, prior_term) = potential.at(theta0)
        p0 = self._momenta(variables)
        theta1, p1, u1 = self._trajectory(potential, theta0, p0, u0, grads0, h, n / temperature)
        wide = backend.wide_float()

        def energy(u, momenta):  # H = U/T + ½‖p‖²
            kinetic = sum(ops.sum(ops.square(ops.cast(q, wide))) for q in momenta)
            return ops.cast(u, wide) * n / ops.cast(temperature, wide) + 0.5 * kinetic

        log_ratio = energy(u0, p0) - energy(u1, p1)
        log_ratio = ops.where(ops.isfinite(log_ratio), log_ratio, -math.inf)
        accept_prob = ops.exp(ops.minimum(log_ratio, 0.0))
        # The float64 draw on both backends (in float32 under JAX without x64): the same z.
        z = backend.stateless_normal((), self.seed, len(variables), self.iterations,
                                     "float64")
        uniform = 0.5 * (1.0 + ops.erf(z / math.sqrt(2.0)))
        # A non-finite start (where the guard below cannot raise) keeps everything.
        finite = nonfinite.all_finite(u0, grads0)
        accept = ops.logical_and(finite, ops.less(uniform, accept_prob))
        accept_prob = ops.cast(accept_prob, "float32")
        targets = list(variables)
        values = [ops.where(accept, t1, t0) for t0, t1 in zip(theta0, theta1)]
        # Σθ·∇U at the starting state, for the configurational temperature (in
        # the sums' float32 for float64 weights).
        virials = [ops.cast(ops.sum(t * g) * n, s.dtype)
                   for t, g, s in zip(theta0, grads0, self._virials)]
        targets += self._virials + self._virial_totals + self._virial_carries
        sums = [compensated_add(ops.convert_to_tensor(total), ops.convert_to_tensor(carry), new)
                for new, total, carry in zip(virials, self._virial_totals, self._virial_carries)]
        values += [ops.where(finite, new, ops.convert_to_tensor(old))
                   for new, old in zip(virials, self._virials)]
        values += [ops.where(finite, total, ops.convert_to_tensor(old))
                   for (total, _), old in zip(sums, self._virial_totals)]
        values += [ops.where(finite, carry, ops.convert_to_tensor(old))
                   for (_, carry), old in zip(sums, self._virial_carries)]
        if self.num_adaptation_steps:
            state = [self._log_step, self._log_step_avg, self._error_avg]
            targets += state
            values += self._adapted(state, accept_prob, finite)
        message = f"{nonfinite.MARKER} (HMC: potential or gradient at the current state)"
        with backend.finite_guard([u0, *grads0], [message] * (1 + len(grads0))):
            backend.assign_replicated(targets, values)
            self.iterations.assign_add(ops.cast(finite, self.iterations.dtype))
        return Transition(
            y_pred, loss, prior_term, 1.0 - ops.cast(finite, "float32"),
            {"step_size": h, "configurational_temperature": self.configurational_temperature(),
             "acceptance_rate": accept_prob})
