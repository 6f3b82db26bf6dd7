"""Backend-specific operations, one small module per Keras backend.

Everything else in keras_bnn is written with ``keras.ops``. What Keras does not
offer portably lives here, with the same names on every backend:

* ``stateless_normal``: normal noise keyed on (seed, variable, step);
* ``fused``: kernel fusion of an elementwise sampler update;
* ``value_and_gradients``: the forward pass, the mean-form potential and its
  gradients at the current weights (a ``GradientTape``, or
  ``jax.value_and_grad``);
* ``potential_and_gradients``: the global potential and its gradients at
  any weight values, nothing assigned (HMC's leapfrog trajectory);
* ``batch_gradients``: a compiled function of a batch giving those
  gradients at the current weights (per-example gradients for
  :mod:`keras_bnn.directional_noise`);
* ``map_members``: ``keras.ops.map`` over an ensemble's members, each run
  once (Keras' TensorFlow ``ops.map`` runs one more for its output signature);
* ``predict_graph``: a function of a batch, compiled for Keras' predict
  loop once for any batch size (the posterior ensemble's predictions);
* ``finite_guard`` and ``apply_if_finite``: the two halves of the NaN/Inf
  policy of :mod:`keras_bnn.nonfinite` (raise at the step; skip the step);
* ``run_train_step``: runs the model's stateful step in the form the
  backend's trainer calls it (TensorFlow: directly; JAX: purely, on the
  state);
* ``loss_as_shard``: one output's loss on a replica, normalised by its
  shard's own denominator (masked timesteps, weights), rescaled to its
  share of the global batch's;
* ``num_replicas``, ``assign_replicated``, ``assign_where``: the replica
  count, one assignment of the same values on every replica (HMC's new
  state), and one that happens only where a scalar condition holds (the
  warm-up's recovery from a blow-up);
* ``adopt_current_strategy``: a sampler built under the ``tf.distribute``
  strategy current at build time, not at construction;
* ``to_numpy``: a value read on the host, mirrored variables inside a
  ``tf.distribute`` scope included;
* ``values_kept``: a model's weights kept where Keras' predict or evaluate
  loop raises (JAX's take them out of the variables during the loop);
* ``wide_float``: the widest float dtype available now (HMC's energies).

TensorFlow's ``tf.distribute`` helpers (``num_replicas``,
``adopt_current_strategy``, ``loss_as_shard``, ``assign_replicated``,
``assign_where``) are taken from their module,
:mod:`keras_bnn.backend.tensorflow_distribute`; the rest from
:mod:`keras_bnn.backend.tensorflow`. The JAX backend's are all
:mod:`keras_bnn.backend.jax`'s.
"""

import importlib

import keras

__all__ = ["adopt_current_strategy", "apply_if_finite", "assign_replicated", "assign_where",
           "batch_gradients", "finite_guard", "fused", "loss_as_shard", "map_members",
           "num_replicas", "potential_and_gradients", "predict_graph", "run_train_step",
           "stateless_normal", "to_numpy", "value_and_gradients", "values_kept",
           "wide_float"]

if keras.backend.backend() not in ("tensorflow", "jax"):  # pragma: no cover
    raise ImportError(
        "keras_bnn supports the 'tensorflow' and 'jax' Keras backends; "
        f"KERAS_BACKEND is {keras.backend.backend()!r}."
    )

# The names whose TensorFlow implementations are tensorflow_distribute.py's.
_DISTRIBUTED = ("adopt_current_strategy", "assign_replicated", "assign_where",
                "loss_as_shard", "num_replicas")

_implementation = importlib.import_module(f"keras_bnn.backend.{keras.backend.backend()}")
_distribute = (importlib.import_module("keras_bnn.backend.tensorflow_distribute")
               if keras.backend.backend() == "tensorflow" else _implementation)
globals().update({name: getattr(_distribute if name in _DISTRIBUTED else _implementation,
                                name) for name in __all__})
