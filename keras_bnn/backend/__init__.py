"""Backend-specific operations, one small module per Keras backend.

Everything else in keras_bnn is written with ``keras.ops``. What Keras does not
offer portably lives here: a stateless normal keyed on (seed, variable, step),
a finiteness check that stops a step with a clear error, kernel fusion of an
elementwise sampler update, and (TensorFlow) the gradient computation of
``BayesianModel.train_step``.
"""

import keras

if keras.backend.backend() == "tensorflow":
    from keras_bnn.backend.tensorflow import (
        apply_if_finite,
        assign_replicated,
        finite_guard,
        fused,
        gradient_tape_step,
        num_replicas,
        potential_and_gradients,
        stateless_normal,
    )
elif keras.backend.backend() == "jax":
    from keras_bnn.backend.jax import (
        finite_guard,
        fused,
        stateless_normal,
    )
else:  # pragma: no cover - guarded at import time
    raise ImportError(
        "keras_bnn supports the 'tensorflow' and 'jax' Keras backends; "
        f"KERAS_BACKEND is {keras.backend.backend()!r}."
    )

__all__ = ["finite_guard", "fused", "stateless_normal"]
