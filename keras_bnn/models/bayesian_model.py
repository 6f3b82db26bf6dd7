"""The Keras model that trains by sampling the tempered posterior."""

import math
import warnings

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import distribute
from keras_bnn import priors as priors_lib
from keras_bnn import samplers as samplers_lib
from keras_bnn.validation import check_fit_data

#: Text of the error raised when the potential becomes NaN or Inf.
NONFINITE_POTENTIAL = "keras_bnn: non-finite potential (loss is NaN or Inf)"
_TRACKED = (
    "nll",
    "prior",
    "step_size",
    "kinetic_temperature",
    "configurational_temperature",
    "gradient_noise_ratio",
    "acceptance_rate",
)


class _StopOnSkippedSteps(keras.callbacks.Callback):
    """Under XLA: ends training after an epoch in which steps were skipped as NaN/Inf."""

    def on_epoch_end(self, epoch, logs=None):
        skipped = int(round(float((logs or {}).get("nonfinite_steps", 0.0))))
        if skipped:
            raise FloatingPointError(
                f"Training stopped: {skipped} step(s) of epoch {epoch} had a NaN/Inf "
                "potential or gradient (XLA: those steps were skipped, the weights hold "
                "their last finite values and collected samples are intact). Lower the "
                "step size or check the data."
            )


class GradientNoiseWarning(UserWarning):
    """Minibatch gradient noise is large enough to bias the sampled posterior."""


class _WarnOnGradientNoise(keras.callbacks.Callback):
    """Warns once per ``fit`` when an epoch's ``gradient_noise_ratio`` exceeds the limit."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit
        self.warned = False

    def on_epoch_end(self, epoch, logs=None):
        ratio = float((logs or {}).get("gradient_noise_ratio", 0.0))
        if ratio > self.limit and not self.warned:
            self.warned = True
            warnings.warn(
                f"keras_bnn: gradient_noise_ratio = {ratio:.3g} in epoch {epoch} is above "
                f"{self.limit}: minibatch gradient noise is a large share of the sampler's "
                "noise, so the posterior is biased (ATMC/SGNHT too narrow in weakly "
                "determined directions, SGLD/SGHMC too wide in strongly determined "
                "ones). Lower the step size (the ratio scales as h² for SGHMC/ATMC at "
                "their default friction, h for SGLD) or raise the batch size; see "
                "'Sampling cold posteriors' in the README.",
                GradientNoiseWarning,
                stacklevel=2,
            )


def _check_train_size(train_size):
    if train_size is None or isinstance(train_size, bool):
        raise ValueError(
            "`train_size` is required: the number n of training examples, "
            "used to scale the prior as (1/n)·(-log p(θ)) and the minibatch "
            f"gradient by n. Received train_size={train_size!r}."
        )
    if not (isinstance(train_size, (int, float)) and math.isfinite(train_size)
            and train_size > 0):
        raise ValueError(
            "`train_size` must be a positive number of training examples; "
            f"received train_size={train_size!r}."
        )
    return int(train_size)


@keras.saving.register_keras_serializable(package="keras_bnn")
class BayesianModel(keras.Model):
    """A ``keras.Model`` whose ``fit`` samples ``p(θ|D) ∝ exp(-U(θ)/T)``.

    ``U(θ) = -Σ_i log p(y_i|x_i,θ) - log p(θ)`` over the ``n`` training
    examples. Keras' compiled loss is the per-example mean NLL and every prior
    adds ``(1/n)·(-log p(θ))`` as a layer loss, so the standard loss is the
    mean-form potential ``U(θ)/n`` on a minibatch; samplers multiply its
    gradient by ``n`` themselves.

    Use it functionally (``BayesianModel(inputs, outputs)``; the builders in
    :mod:`keras_bnn.models` return one) or by subclassing.
    """

    def compile(
        self,
        optimizer=None,
        loss=None,
        *,
        sampler=None,
        temperature=None,
        train_size=None,
        **kwargs,
    ):
        """Configures the model for sampling (or for an SGD/MAP baseline).

        Args:
            optimizer: a plain Keras optimizer (or name) for the SGD/MAP
                baseline. Mutually exclusive with ``sampler``.
            loss: the per-example negative log-likelihood, as in Keras.
            sampler: a :class:`keras_bnn.samplers.Sampler` or one of the names
                ``"sgld", "sghmc", "sgnht", "atmc", "hmc"``.
            temperature: posterior temperature T > 0 (default: the sampler's,
                1.0 unless set). Only meaningful with a sampler.
            train_size: number n of training examples; required.
            **kwargs: passed to ``keras.Model.compile`` (``metrics``, ...).

        Raises:
            ValueError: if both ``sampler`` and ``optimizer`` are given, if
                ``train_size`` is missing or not positive, if ``temperature``
                is not positive or is given without a sampler, or for an
                unknown sampler name.
        """
        if isinstance(optimizer, samplers_lib.Sampler) and sampler is None:
            sampler, optimizer = optimizer, None  # from compile_from_config
        if sampler is not None and optimizer is not None:
            raise ValueError(
                "Pass either `sampler=` (posterior sampling) or `optimizer=` "
                f"(SGD/MAP baseline), not both; received sampler={sampler!r} "
                f"and optimizer={optimizer!r}."
            )
        self.train_size = _check_train_size(train_size)
        if sampler is not None:
            sampler = samplers_lib.get(sampler)
            sampler.configure(train_size=self.train_size, temperature=temperature)
            optimizer = sampler
        elif temperature is not None:
            raise ValueError(
                "`temperature` applies to posterior sampling only; pass a "
                f"`sampler=` or drop temperature={temperature!r}."
            )
        self.sampler = sampler
        if not hasattr(self, "_sampling_trackers"):
            self._sampling_trackers = {
                name: keras.metrics.Mean(name=name) for name in _TRACKED
            }
            self._sampling_trackers["nonfinite_steps"] = keras.metrics.Sum(
                name="nonfinite_steps"
            )
        super().compile(
            optimizer=optimizer if optimizer is not None else "sgd",
            loss=loss,
            **kwargs,
        )
        self._compile_config.config.update(train_size=self.train_size)
        if self.built:
            priors_lib.set_loss_weight(self, 1.0 / self.train_size)

    def compile_from_config(self, config):
        """Re-compiles from :meth:`get_compile_config` (sampler, n included).

        Args:
            config: the dict saved with the model.
        """
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @property
    def metrics(self):
        metrics = super().metrics
        trackers = getattr(self, "_sampling_trackers", {})
        wanted = ["nll", "prior"]
        if self.compiled and self.sampler is not None:
            wanted.append("step_size")
            if self.sampler.has_momentum:
                wanted.append("kinetic_temperature")
            wanted.append("configurational_temperature")
            # HMC is exact (full batch, Metropolis test): no gradient noise to report.
            wanted.append("acceptance_rate" if self.sampler.exact else "gradient_noise_ratio")
        if self.compiled and self._uses_xla():
            wanted.append("nonfinite_steps")
        extra = [trackers[name] for name in wanted if name in trackers]
        return [m for m in metrics if all(m is not t for t in trackers.values())] + extra

    def train_step(self, *args):
        """One sampler (or optimizer) step on a batch, with sampling diagnostics.

        On the TensorFlow backend the step computes the mean-form potential
        ``mean NLL + (1/n)·(-log p(θ))``, stops with ``InvalidArgumentError``
        (turned into ``FloatingPointError`` by :meth:`fit`) before any weight
        changes when it is NaN/Inf, applies the sampler, and logs ``loss``,
        ``nll``, ``prior`` (``-log p(θ)``), ``step_size``,
        ``kinetic_temperature``, ``configurational_temperature`` and
        ``gradient_noise_ratio`` (see
        :meth:`keras_bnn.samplers.Sampler.gradient_noise_ratio`) as epoch
        means. Other backends use Keras' stock step (same update, no extra
        logs).
        """
        if keras.backend.backend() != "tensorflow":
            return super().train_step(*args)
        (data,) = args
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        trackers = self._sampling_trackers
        if getattr(self.sampler, "exact", False):  # HMC: one whole Metropolis transition
            y_pred, loss, prior_term, logs = self.sampler.transition(
                self, x, y, sample_weight, NONFINITE_POTENTIAL)
            trackers["acceptance_rate"].update_state(logs["acceptance_rate"])
            if self._uses_xla():  # the NaN/Inf check is compiled away: count instead
                trackers["nonfinite_steps"].update_state(
                    ops.cast(ops.logical_not(ops.isfinite(loss)), "float32"))
            return self._log_step(x, y, sample_weight, y_pred, loss, prior_term,
                                  logs["step_size"])
        step_size = self.optimizer.learning_rate
        y_pred, loss, prior_term, gradients = backend.gradient_tape_step(
            self, x, y, sample_weight, NONFINITE_POTENTIAL
        )
        if self._uses_xla():  # check_numerics is compiled away: skip and count
            trackers["nonfinite_steps"].update_state(
                backend.apply_if_finite(
                    self.optimizer, loss, gradients, self.trainable_variables
                )
            )
        else:
            self.optimizer.apply(gradients, self.trainable_variables)
        return self._log_step(x, y, sample_weight, y_pred, loss, prior_term, step_size)

    def _log_step(self, x, y, sample_weight, y_pred, loss, prior_term, step_size):
        """Updates the loss and sampling trackers; returns the step's logs."""
        trackers = self._sampling_trackers
        batch_size = ops.shape(keras.tree.flatten(x)[0])[0]
        self._loss_tracker.update_state(loss, sample_weight=batch_size)
        trackers["nll"].update_state(loss - prior_term, sample_weight=batch_size)
        trackers["prior"].update_state(prior_term * float(self.train_size))
        if self.sampler is not None:
            trackers["step_size"].update_state(step_size)
            if self.sampler.has_momentum:
                trackers["kinetic_temperature"].update_state(
                    self.sampler.kinetic_temperature()
                )
            trackers["configurational_temperature"].update_state(
                self.sampler.configurational_temperature()
            )
            if not self.sampler.exact:
                trackers["gradient_noise_ratio"].update_state(
                    self.sampler.gradient_noise_ratio())
        return distribute.reducible_logs(
            self.compute_metrics(x, y, y_pred, sample_weight=sample_weight),
            self.distribute_strategy,
        )

    def test_step(self, *args):
        logs = super().test_step(*args)
        if keras.backend.backend() != "tensorflow":
            return logs
        return distribute.reducible_logs(logs, self.distribute_strategy)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # keras#20585 workaround 1 (see keras_bnn.distribute).
        if iterator is not None and distribute.is_multi_worker(self.distribute_strategy):
            iterator, data_batch = None, distribute.local_batch(iterator, self.distribute_strategy)
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def _uses_xla(self):
        return keras.backend.backend() == "tensorflow" and self.jit_compile is True

    def fit(self, *args, **kwargs):
        """``keras.Model.fit``; a NaN/Inf potential raises ``FloatingPointError``.

        With a sampler, a :class:`GradientNoiseWarning` is issued (once) when an
        epoch's ``gradient_noise_ratio`` exceeds
        :data:`keras_bnn.samplers.NOISE_RATIO_LIMIT`.

        Without XLA the failing step raises at once. Under XLA
        (``jit_compile=True``, which cannot raise inside the compiled step)
        non-finite steps are skipped and counted (``nonfinite_steps`` in the
        logs), and training stops at the end of that epoch.

        With :class:`keras_bnn.samplers.HMC`, warns when a batch holds fewer
        than ``train_size`` examples (the chain is then not exact).

        Raises:
            ValueError: for empty inputs or, with a sparse categorical loss,
                labels that are not class indices of the output
                (:func:`keras_bnn.validation.check_fit_data`).
            FloatingPointError: when the potential or a gradient becomes
                NaN/Inf; the weights keep their last finite values, and
                samples already collected to disk are untouched.
        """
        check_fit_data(self, args, kwargs)
        extra = [_StopOnSkippedSteps()] if self._uses_xla() else []
        if getattr(self.sampler, "exact", False):
            self.sampler.warn_if_minibatch(  # fit(x, y, batch_size, ...)
                args[0] if args else kwargs.get("x"),
                args[2] if len(args) > 2 else kwargs.get("batch_size"))
        elif self.sampler is not None:
            extra.append(_WarnOnGradientNoise(samplers_lib.NOISE_RATIO_LIMIT))
        if extra:
            kwargs["callbacks"] = list(kwargs.get("callbacks") or []) + extra
        try:
            return super().fit(*args, **kwargs)
        except Exception as error:  # backend-specific error types
            text = str(error)
            if NONFINITE_POTENTIAL in text or "non-finite gradient" in text:
                raise FloatingPointError(
                    "Training stopped: the potential or its gradient became NaN/Inf "
                    f"(at optimizer step {int(self.optimizer.iterations)}). Lower the "
                    "step size or check the data; the weights hold their last "
                    "finite values and collected samples are intact."
                ) from error
            raise

    def build(self, *args, **kwargs):
        super().build(*args, **kwargs)
        if getattr(self, "train_size", None):
            priors_lib.set_loss_weight(self, 1.0 / self.train_size)
