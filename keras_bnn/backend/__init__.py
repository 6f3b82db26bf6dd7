"""Backend-specific operations, one small module per Keras backend.

Everything else in keras_bnn is written with ``keras.ops``. What Keras does not
offer portably lives here, with the same names on every backend:

* ``stateless_normal``: normal noise keyed on (seed, variable, step);
* ``fused``: kernel fusion of an elementwise sampler update;
* ``value_and_gradients``: the forward pass, the mean-form potential and its
  gradients (a ``GradientTape``, or ``jax.value_and_grad``);
* ``finite_guard`` and ``apply_if_finite``: the two halves of the NaN/Inf
  policy of :mod:`keras_bnn.nonfinite` (raise at the step; skip the step);
* ``run_train_step``: runs the model's stateful step in the form the
  backend's trainer calls it (TensorFlow: directly; JAX: purely, on the
  state);
* ``num_replicas``, ``potential_and_gradients``, ``assign_replicated``:
  what :class:`keras_bnn.samplers.HMC` needs (its transition runs on
  TensorFlow only; under JAX the latter two raise ``NotImplementedError``).
"""

import keras

if keras.backend.backend() == "tensorflow":
    from keras_bnn.backend.tensorflow import (
        apply_if_finite,
        assign_replicated,
        finite_guard,
        fused,
        num_replicas,
        potential_and_gradients,
        stateless_normal,
        run_train_step,
        value_and_gradients,
    )
elif keras.backend.backend() == "jax":
    from keras_bnn.backend.jax import (
        apply_if_finite,
        assign_replicated,
        finite_guard,
        fused,
        num_replicas,
        potential_and_gradients,
        stateless_normal,
        run_train_step,
        value_and_gradients,
    )
else:  # pragma: no cover - guarded at import time
    raise ImportError(
        "keras_bnn supports the 'tensorflow' and 'jax' Keras backends; "
        f"KERAS_BACKEND is {keras.backend.backend()!r}."
    )

__all__ = ["apply_if_finite", "assign_replicated", "finite_guard", "fused", "num_replicas",
           "potential_and_gradients", "stateless_normal", "run_train_step",
           "value_and_gradients"]
