"""What a sampler reads from its own state: a mixin of :class:`keras_bnn.samplers.Sampler`.

Kinetic and configurational temperatures, per variable and overall, and the
gradient-noise ratio: each a reading of the slots the update step keeps
(``kinetic``, ``virial``, ``virial_total``, ``virial_carry``, ``noise_ratio``), no
step of its own, and the compensated addition that keeps the running sums.
"""

import math

from keras import ops

from keras_bnn import backend


def compensated_add(total, carry, value):
    """Kahan's compensated addition: one more term of a float32 running sum.

    The sum is ``total − carry``: ``carry`` holds what the additions so far
    rounded away, so the error stays at a few float32 roundings of the sum
    however many terms it has (a plain running sum's grows with their number).

        y = value − carry,  total' = total + y,  carry' = (total' − total) − y

    Args:
        total, carry: the running sum's two parts (scalars).
        value: the term to add.

    Returns:
        ``(total', carry')``.
    """
    y = value - carry
    new_total = total + y
    return new_total, (new_total - total) - y


class SamplerReadouts:
    """Readings of a built :class:`keras_bnn.samplers.Sampler`'s diagnostic slots.

    Needs ``self._trainable_variables``, ``self.slots(name)`` and
    ``self.has_momentum`` from the sampler.
    """

    def _sizes(self):
        return [int(math.prod(v.shape)) for v in self._trainable_variables]

    def kinetic_temperatures(self):
        """Per-variable kinetic temperature ``T_kin = mean(p·∇K(p))``.

        At equilibrium ``E[p·∇K(p)] = T`` for every coordinate (equipartition),
        so each value estimates T. For Gaussian momenta ``d·T_kin/T ~ χ²_d``;
        :func:`keras_bnn.temperature_report.temperature_band` gives the band. The
        sums are taken by the last step from its new momenta (0 before the
        first step).

        Returns:
            List of ``(variable_path, T_kin scalar tensor, d)`` in the order of
            the trainable variables; empty for samplers without momentum.
        """
        if not self.has_momentum:
            return []
        return [
            (getattr(v, "path", v.name), ops.divide(total, float(d)), d)
            for v, total, d in zip(self._trainable_variables, self.slots("kinetic"), self._sizes())
        ]

    def kinetic_temperature(self):
        """Overall kinetic temperature: ``Σ_i p_i·∇K(p_i) / Σ d`` (a scalar).

        Returns:
            Scalar tensor, or ``None`` for samplers without momentum.
        """
        if not self.has_momentum:
            return None
        return ops.divide(sum(self.slots("kinetic")), float(sum(self._sizes())))

    def gradient_noise_ratios(self):
        """Per-variable gradient-noise ratio ``r`` of the last step.

        ``r`` is the variance that minibatch gradient noise adds to the update
        in one step over the variance the sampler itself injects per step
        (at its nominal friction), averaged over the variable's parameters,
        from the online estimate ``V̂``
        (:func:`~keras_bnn.samplers.integrators.gradient_noise_update`). The
        samplers are exact only as ``r → 0``; above
        :data:`keras_bnn.samplers.NOISE_RATIO_LIMIT` they are measurably
        biased (ATMC too narrow in weakly determined directions, SGLD/SGHMC
        too wide in strongly determined ones). ``r`` grows as ``h²/T`` (SGHMC, ATMC at their
        default friction ∝ 1/h) or ``h/T`` (SGLD): lower the step size or
        raise the batch size.

        Returns:
            List of ``(variable_path, r scalar tensor, d)``.
        """
        ratios = self.slots("noise_ratio")
        return [
            (getattr(v, "path", v.name), ratio, d)
            for v, ratio, d in zip(self._trainable_variables, ratios, self._sizes())
        ]

    def gradient_noise_ratio(self):
        """Overall gradient-noise ratio: ``Σ_v d_v·r_v / Σ_v d_v`` (a scalar tensor).

        See :meth:`gradient_noise_ratios`.
        """
        sizes = self._sizes()
        return ops.divide(
            sum(ratio * float(d) for ratio, d in zip(self.slots("noise_ratio"), sizes)),
            float(sum(sizes)),
        )

    def configurational_temperature(self):
        """Configurational temperature ``Σ θ·∇U(θ) / Σ d`` of the last step.

        At equilibrium ``E[θ_i ∂_i U] = T`` (integration by parts), so this
        estimates T from positions alone; with the minibatch gradient ``G``
        it is an unbiased but noisy estimate. Each step sums ``θ·G`` with θ
        before its update (the point where G was evaluated); under
        ``tf.distribute`` G is the gradient of the global batch.

        Returns:
            Scalar tensor (0 before the first step).
        """
        return ops.divide(sum(self.slots("virial")), float(sum(self._sizes())))

    def virial_sums(self):
        """Each variable's running sum ``Σ_steps Σ θ·G`` since the first step.

        Two readings give each variable's configurational temperature
        averaged over the steps between them
        (:meth:`configurational_temperatures_between`): one step's sum is a
        noisy minibatch estimate, a mean over an epoch's steps is not.
        Each sum is kept in float32 as ``virial_total − virial_carry``
        (:func:`compensated_add`) and read here in float64: a plain float32
        running sum rounds every step's addition to its spacing, which put an
        epoch's difference off by 0.5 % after 10⁵ steps, 4 % after 10⁶ and
        31 % after 10⁷ (469 steps' increments of layers of 10³–2.4·10⁷
        weights at T = 1; ``tests/test_diag39.py``).

        Returns:
            List of Python floats in the order of the trainable variables.

        Raises:
            ValueError: before the first step.
        """
        return [float(backend.to_numpy(total)) - float(backend.to_numpy(carry))
                for total, carry in zip(self.slots("virial_total"), self.slots("virial_carry"))]

    def configurational_temperatures_between(self, begin, end, steps):
        """Each variable's configurational temperature averaged over ``steps`` steps.

        ``T_v = (S_v(end) − S_v(begin)) / (steps · d_v)`` with ``S_v`` the
        running sum of :meth:`virial_sums`: the mean of ``θ·∇U(θ)`` per
        parameter of v over those steps, which is T for every variable at
        equilibrium (integration by parts, coordinate by coordinate). A
        variable far below T is still moving out of its initialisation (its
        weights growing towards the posterior's scale), one far above it
        still shrinking towards it.

        Args:
            begin, end: two readings of :meth:`virial_sums`.
            steps: the steps between them, ≥ 1.

        Returns:
            List of ``(variable_path, T_v, d_v)`` in the order of the
            trainable variables.
        """
        return [(getattr(v, "path", v.name), (b - a) / (steps * d), d)
                for v, a, b, d in zip(self._trainable_variables, begin, end, self._sizes())]
