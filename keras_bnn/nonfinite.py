"""What happens when the potential or a gradient becomes NaN or Inf.

One policy for every backend and compilation mode, with one error type:

* **Nothing changes.** The failing step leaves every weight, every piece of
  sampler state and the step counter exactly as they were, so the weights
  hold their last finite values, and samples already written to disk are
  untouched (they are written between steps, through temporary files).
* **Training stops with** :class:`NonFiniteError` (a ``FloatingPointError``)
  raised from ``BayesianModel.fit``, naming the step.
* **A step that overflows** (a finite potential and gradient, but a step
  size so large that the update is Inf: ``h = 3e38``) is not seen by the
  step's guard: its weights are NaN/Inf. ``CollectSamples`` and the run's
  backup (:class:`keras_bnn.runs.checkpoints.RunBackup`) check the weights
  first (:func:`check_weights`) and stop training with
  :class:`NonFiniteError`, so no sample or backup holds them (until
  2026-11-30, an overflow at an epoch's last step was backed up, and
  ``--resume`` restored the NaN/Inf weights).

When the stop happens depends on what the compiled step can do:

* TensorFlow graph mode (the default): the step raises at once (a
  ``check_numerics`` guard, :func:`keras_bnn.backend.finite_guard`), and
  :func:`translate` turns TensorFlow's error into :class:`NonFiniteError`.
* XLA (``jit_compile=True``) and JAX: a compiled step cannot raise without a
  host round-trip on every step. The step is skipped whole (TensorFlow:
  ``tf.cond``; JAX: every new state value is selected against the old one)
  and counted in the ``nonfinite_steps`` log, and :class:`StopOnNonFinite`
  raises at the end of that epoch, before any sample of it is collected.
"""

import contextlib

import keras
import numpy as np
from keras import ops

#: Marker in the message of a backend's own error for a non-finite step.
MARKER = "keras_bnn: non-finite potential or gradient"


class NonFiniteError(FloatingPointError):
    """The potential or a gradient became NaN/Inf; training stopped."""


def _stop_message(where):
    return (
        f"Training stopped: the potential or its gradient became NaN/Inf ({where}). "
        "The weights hold their last finite values and collected samples are intact. "
        "Lower the step size or check the data."
    )


def _overflow_message(where, path):
    return (
        f"Training stopped: the weights became NaN/Inf ({path}, {where}): a step whose "
        "potential and gradient were finite overflowed, so the step size is far too "
        "large. Nothing was stored from this state: collected samples and backups hold "
        "earlier, finite ones. Lower the step size."
    )


def all_finite(loss, gradients):
    """Whether the potential and every gradient are finite.

    Args:
        loss: scalar potential.
        gradients: list of gradient tensors (``None`` entries skipped).

    Returns:
        Boolean scalar tensor.
    """
    checks = [ops.all(ops.isfinite(loss))]
    checks += [ops.all(ops.isfinite(g)) for g in gradients if g is not None]
    return ops.all(ops.stack(checks))


def check_weights(model, where):
    """Raises :class:`NonFiniteError` when a floating weight of ``model`` is NaN/Inf.

    Called before a state is stored (a sample, a backup): the step's guard
    checks the potential and the gradients, not the updated weights.

    Args:
        model: a built Keras model.
        where: when the weights are read, for the message (``"end of epoch 3"``).

    Raises:
        NonFiniteError: naming the first such weight and ``where``.
    """
    floating = [w for w in model.weights if "float" in str(w.dtype)]
    if not floating or bool(all_finite(0.0, floating)):
        return
    path = next(w.path for w in floating
                if not np.all(np.isfinite(ops.convert_to_numpy(w))))
    raise NonFiniteError(_overflow_message(where, path))


def translate(error, step):
    """The :class:`NonFiniteError` for a backend error raised by a guarded step.

    Args:
        error: the exception ``fit`` caught.
        step: the optimizer step at which it happened (Python int).

    Returns:
        A :class:`NonFiniteError` when ``error`` comes from the step's
        finiteness guard, else ``None`` (re-raise ``error`` unchanged).
    """
    if not isinstance(error, NonFiniteError) and MARKER in str(error):
        return NonFiniteError(_stop_message(f"at optimizer step {step}"))
    return None


@contextlib.contextmanager
def translated(step):
    """Raises :class:`NonFiniteError` in place of a guarded step's backend error.

    ``BayesianModel.fit`` and ``train_on_batch`` run Keras' loop inside it.

    Args:
        step: a function of no argument that returns the optimizer step
            (Python int) at which the error happened; read only on an error.

    Raises:
        NonFiniteError: for an error from the step's finiteness guard
            (:func:`translate`); any other error passes unchanged.
    """
    try:
        yield
    except Exception as error:  # the backend's own error types
        stop = translate(error, step())
        if stop is None:
            raise
        raise stop from error


def raise_if_skipped(logs, where):
    """Raises :class:`NonFiniteError` when ``logs`` count skipped steps.

    Args:
        logs: the logs of an epoch or of one ``train_on_batch`` (XLA, JAX:
            their ``nonfinite_steps``).
        where: what the steps were part of, for the message (``"epoch 3"``).

    Raises:
        NonFiniteError: when ``logs["nonfinite_steps"]`` is not 0.
    """
    skipped = int(round(float((logs or {}).get("nonfinite_steps", 0.0))))
    if skipped:
        raise NonFiniteError(_stop_message(f"{skipped} step(s) of {where} were skipped"))


class StopOnNonFinite(keras.callbacks.Callback):
    """Raises :class:`NonFiniteError` after an epoch in which steps were skipped.

    Used where the compiled step skips non-finite steps instead of raising
    (XLA, JAX): it reads the epoch's ``nonfinite_steps`` log. ``fit`` puts it
    first among the callbacks, so no sample of that epoch is collected.
    """

    def on_epoch_end(self, epoch, logs=None):
        raise_if_skipped(logs, f"epoch {epoch}")
