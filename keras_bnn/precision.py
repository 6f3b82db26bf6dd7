"""Which Keras dtype policies a sampled model may use.

Keras' mixed precision keeps the variables in float32 and computes in a
low-precision dtype. keras_bnn samples under:

* ``"float32"`` (the default) and ``"float64"``: variables, sampler state and
  noise in that dtype;
* ``"mixed_bfloat16"``: the forward and backward pass in bfloat16, the
  variables, the potential (Keras computes losses and the priors in
  float32), the sampler's state and noise in float32. bfloat16 has float32's
  exponent range: no gradient underflows and no potential overflows.

and refuses, in ``BayesianModel.compile(sampler=...)``:

* float16 compute (``"mixed_float16"``, ``dtype="float16"``): float16
  gradients of the mean-form potential underflow without loss scaling, and
  Keras' ``LossScaleOptimizer`` would wrap the sampler, unscale gradients
  that were never scaled (every step 2¹⁵ times too small, measured) and
  skip steps on overflow, which biases a chain;
* low-precision variables (``"float16"``, ``"bfloat16"``): a sampler's
  steps are far below their 8- or 11-bit precision, so the chain would
  round them away;
* float64 under JAX without ``JAX_ENABLE_X64``: JAX truncates every float64
  array to float32 (with a warning of its own), so the chain runs in
  float32 while the model and its sample store declare float64 (the store
  then refuses its own samples).
"""

import keras

#: Compute dtypes a sampler refuses.
_LOW_COMPUTE = ("float16",)
#: Variable dtypes a sampler refuses.
_LOW_VARIABLES = ("float16", "bfloat16")
#: The advice every refusal ends with.
_SUPPORTED = ("Sample under keras.config.set_dtype_policy('mixed_bfloat16') (bfloat16 "
              "compute, float32 variables: the fast policy on GPUs since Ampere and on "
              "TPUs), 'float32' or 'float64', set before the model is built.")


def check_sampling_policy(model, owner="BayesianModel.compile"):
    """Refuses a model whose dtype policies a sampler cannot sample correctly.

    Every layer's dtype policy (``layer.dtype_policy``: its compute and
    variable dtype) and, where the model is built, every trainable
    variable's own dtype are checked; see the module docstring for why.

    Args:
        model: the ``keras.Model`` to be sampled.
        owner: the caller, for the message.

    Raises:
        ValueError: naming the first layer (or variable) that computes in
            float16 or keeps trainable weights in float16 or bfloat16, its
            dtype policy and the policies to use instead; or a float64 layer
            under JAX without 64-bit arrays enabled.
    """
    for layer in model._flatten_layers(include_self=True):
        policy = layer.dtype_policy
        if "float64" in (policy.compute_dtype, policy.variable_dtype) and not _has_float64():
            raise ValueError(
                f"{owner}: layer {layer.name!r} has dtype policy {policy.name!r}, but JAX "
                "truncates float64 to float32 unless 64-bit arrays are enabled: set the "
                "environment variable JAX_ENABLE_X64=1 (or "
                "jax.config.update('jax_enable_x64', True)) before the model is built.")
        if policy.compute_dtype in _LOW_COMPUTE:
            _refuse(owner, f"layer {layer.name!r} computes in {policy.compute_dtype} "
                    f"(dtype policy {policy.name!r})", "float16 gradients underflow without "
                    "loss scaling, and Keras' LossScaleOptimizer cannot wrap a sampler (it "
                    "skips steps and rescales gradients, which biases the chain)")
        if policy.variable_dtype in _LOW_VARIABLES and layer.trainable_weights:
            _refuse_variables(owner, f"layer {layer.name!r}", policy.variable_dtype,
                              f" (dtype policy {policy.name!r})")
    for variable in model.trainable_weights:
        if variable.dtype in _LOW_VARIABLES:
            _refuse_variables(owner, f"variable {variable.path!r}", variable.dtype, "")


def check_baseline_policy(model, owner="BayesianModel.compile"):
    """Refuses the SGD/MAP baseline under ``"mixed_float16"`` on the JAX backend.

    Keras then wraps the baseline's optimizer in a ``LossScaleOptimizer``,
    whose conditional rescaling leaks JAX tracers out of keras_bnn's
    stateful training step (the step fails with a JAX
    ``UnexpectedTracerError``). Under TensorFlow the baseline is loss-scaled
    (``backend.value_and_gradients``).

    Args:
        model: the ``keras.Model`` compiled with a plain optimizer.
        owner: the caller, for the message.

    Raises:
        ValueError: under JAX for a model whose dtype policy is
            ``"mixed_float16"``.
    """
    if keras.backend.backend() == "jax" and model.dtype_policy.name == "mixed_float16":
        raise ValueError(
            f"{owner}: the SGD/MAP baseline under dtype policy 'mixed_float16' is not "
            "supported on the JAX backend (Keras' LossScaleOptimizer fails in keras_bnn's "
            "training step there). Use 'mixed_bfloat16' (no loss scaling needed) or "
            "'float32', or KERAS_BACKEND=tensorflow.")


def _has_float64():
    """Whether the backend computes float64 as float64 (JAX only with x64 enabled)."""
    if keras.backend.backend() != "jax":
        return True
    import jax  # only under the JAX backend

    return bool(jax.config.read("jax_enable_x64"))


def _refuse_variables(owner, what, dtype, policy):
    _refuse(owner, f"{what} keeps its trainable weights in {dtype}{policy}",
            "a sampler's steps are far below the precision of those weights and would be "
            "rounded away")


def _refuse(owner, what, why):
    raise ValueError(f"{owner}: {what}; keras_bnn's samplers do not support it: {why}. "
                     f"{_SUPPORTED}")
