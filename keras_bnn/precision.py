"""Which Keras dtype policies a sampled model may use, and float16's gradient scale.

Keras' mixed precision keeps the variables in float32 and computes in a
low-precision dtype. keras_bnn samples under:

* ``"float32"`` (the default) and ``"float64"``: variables, sampler state and
  noise in that dtype;
* ``"mixed_bfloat16"``: the forward and backward pass in bfloat16, the
  variables, the potential (Keras computes losses and the priors in
  float32), the sampler's state and noise in float32. bfloat16 has float32's
  exponent range: no gradient underflows and no potential overflows.
* ``"mixed_float16"`` (float16 compute, float32 variables: the fast policy
  on GPUs without fast bfloat16, such as T4 and V100): as under
  ``"mixed_bfloat16"``, and the potential is differentiated scaled
  (:func:`gradient_scale`): the gradients are those of ``S·U(θ)/n``, with
  ``S = 2^⌊log₂ n⌋`` (about the full potential ``U``), divided by ``S`` in
  float32 (exact: S is a power of two). float16's smallest normal number is
  2⁻¹⁴ ≈ 6·10⁻⁵: the per-example gradients of the mean-form potential
  ``mean NLL + (1/n)(-log p)``, of order 1/batch, lose their precision or
  flush to 0 unscaled. Where a scaled gradient overflows (float16's
  largest number is 65504) the backend recomputes it at ``S/2, S/4, ...``
  in the same traced step (only then) until it is finite: no step is
  skipped and the scale is a function of the weights and batch alone, not
  a state, so the chain stays a function of the seed. The sampler is kept
  out of Keras' ``LossScaleOptimizer`` (``compile(auto_scale_loss=False)``),
  whose dynamic scale skips steps on overflow and would unscale gradients it
  never scaled. A non-finite potential still stops the step
  (:mod:`keras_bnn.nonfinite`). Until 2026-11-29 float16 compute was
  refused.

and refuses, in ``BayesianModel.compile(sampler=...)``:

* ``keras.config.floatx()`` float16 or bfloat16: Keras computes every loss
  in floatx, so the potential would be: under ``set_floatx("float16")`` and
  ``"mixed_bfloat16"`` the prior term was a float16 8.7·10⁻⁴, the SGLD
  warm-up's step size 0 and the chain did not move (measured 2026-11-30;
  8.7·10⁻⁹ under floatx float32);
* low-precision variables (``"float16"``, ``"bfloat16"``): a sampler's
  steps are far below their 8- or 11-bit precision, so the chain would
  round them away;
* float64 under JAX without ``JAX_ENABLE_X64``: JAX truncates every float64
  array to float32 (with a warning of its own), so the chain runs in
  float32 while the model and its sample store declare float64 (the store
  then refuses its own samples).

and warns of a model that computes in float64 while ``keras.config.floatx()``
is not float64: Keras computes every loss in floatx, so the potential, its
gradients and HMC's energies are float32 numbers, and keras_bnn's prior term
is summed in the loss's dtype. With ``n = 2^20`` and a float32 mean-form
potential near 1, ``n·U/n`` has a spacing of 1/16: at a leapfrog step of
10⁻⁷, where float64 energies accept every transition, HMC rejected up to 11 %
(measured 2026-11-30); a TensorFlow and a JAX SGLD chain of 12 steps were
1.7·10⁻⁹ apart instead of 2.2·10⁻¹⁶. ``keras.config.set_floatx("float64")``
(before the model and its loss are made) samples in float64 throughout.
It also warns of HMC under a float16 or bfloat16 compute dtype
(:func:`check_metropolis_policy`).
"""

import warnings

import keras

#: Variable dtypes a sampler refuses.
_LOW_VARIABLES = ("float16", "bfloat16")
#: log₂ of the largest float16 gradient scale, reached at n = 2²⁴ ≈ 1.7·10⁷ examples.
_MAX_SCALE_EXPONENT = 24
#: The advice every refusal ends with.
_SUPPORTED = ("Sample under keras.config.set_dtype_policy('mixed_bfloat16') (bfloat16 "
              "compute, float32 variables: the fast policy on GPUs since Ampere and on "
              "TPUs), 'mixed_float16' (float16 compute, float32 variables: for GPUs "
              "without fast bfloat16, such as T4 and V100), 'float32' or 'float64', set "
              "before the model is built.")


def check_sampling_policy(model, owner="BayesianModel.compile"):
    """Refuses a model whose dtype policies a sampler cannot sample correctly.

    Every layer's dtype policy (``layer.dtype_policy``: its compute and
    variable dtype) and, where the model is built, every trainable
    variable's own dtype are checked; see the module docstring for why.

    Args:
        model: the ``keras.Model`` to be sampled.
        owner: the caller, for the message.

    Raises:
        ValueError: naming ``keras.config.floatx()`` where it is float16 or
            bfloat16 (Keras computes the loss in it); naming the first layer
            (or variable) that keeps
            trainable weights in float16 or bfloat16, its dtype policy and
            the policies to use instead; or a float64 layer
            under JAX without 64-bit arrays enabled.

    Warns:
        UserWarning: naming ``keras.config.set_floatx``, for a model whose
            dtype policy computes in float64 while ``keras.config.floatx()``
            is not float64 (the loss, so the potential, is computed in floatx).
    """
    floatx = keras.config.floatx()
    if floatx in _LOW_VARIABLES:
        raise ValueError(
            f"{owner}: keras.config.floatx() is {floatx!r}, the dtype Keras computes the "
            "loss in, so the potential U(θ), its gradients and the prior term "
            f"(1/n)·(-log p(θ)) would be {floatx} numbers, and the step size too small for "
            "them (a warm-up's h of 1e-8 is 0 in float16). Call "
            "keras.config.set_floatx('float32') (or 'float64') and keep the low precision "
            "to the dtype policy: keras.config.set_dtype_policy('mixed_bfloat16') or "
            "'mixed_float16', set before the model is built.")
    for layer in model._flatten_layers(include_self=True):
        policy = layer.dtype_policy
        if "float64" in (policy.compute_dtype, policy.variable_dtype) and not _has_float64():
            raise ValueError(
                f"{owner}: layer {layer.name!r} has dtype policy {policy.name!r}, but JAX "
                "truncates float64 to float32 unless 64-bit arrays are enabled: set the "
                "environment variable JAX_ENABLE_X64=1 (or "
                "jax.config.update('jax_enable_x64', True)) before the model is built.")
        if policy.variable_dtype in _LOW_VARIABLES and layer.trainable_weights:
            _refuse_variables(owner, f"layer {layer.name!r}", policy.variable_dtype,
                              f" (dtype policy {policy.name!r})")
    for variable in model.trainable_weights:
        if variable.dtype in _LOW_VARIABLES:
            _refuse_variables(owner, f"variable {variable.path!r}", variable.dtype, "")
    if model.dtype_policy.compute_dtype == "float64" and floatx != "float64":
        warnings.warn(
            f"{owner}: model {model.name!r} computes in float64 (dtype policy "
            f"{model.dtype_policy.name!r}) but keras.config.floatx() is {floatx!r}: Keras "
            f"computes the loss in floatx, so the potential U(θ), its gradients and HMC's "
            f"energies are {floatx} numbers (HMC rejects steps on their rounding). Call "
            "keras.config.set_floatx('float64') before building the model and creating "
            "its loss to sample in float64 throughout.", UserWarning, stacklevel=4)


def check_metropolis_policy(model, owner="BayesianModel.compile"):
    """Warns that HMC's Metropolis test would read float16 or bfloat16 rounding.

    Under ``"mixed_float16"`` or ``"mixed_bfloat16"`` the potential HMC
    accepts or rejects on is summed in float32 from logits of the
    low-precision forward pass: their rounding (8 or 11 bits), summed over
    ``train_size`` examples into ``n·U/n``, reaches nats and rejects
    transitions at any step size; the step-size adaptation then shrinks h in
    vain. Measured 2026-11-30 (TensorFlow, MLP 6-8-3, n = 4096 full batch,
    L = 5, 12 transitions): acceptance 1.0 throughout in float32 at h = 10⁻³
    and 10⁻⁴; under ``"mixed_bfloat16"`` 0.05-1 (mean 0.55) at h = 10⁻⁴,
    lower than at 10⁻³; adapting for 40 transitions ended at h = 0.0082 in
    float32 and 3.6·10⁻⁶ under ``"mixed_bfloat16"``.

    Args:
        model: the ``keras.Model`` compiled with HMC.
        owner: the caller, for the message.

    Warns:
        UserWarning: naming the layer that computes in float16 or bfloat16
            and the policies HMC samples correctly under.
    """
    for layer in model._flatten_layers(include_self=True):
        policy = layer.dtype_policy
        if policy.compute_dtype in _LOW_VARIABLES:
            warnings.warn(
                f"{owner}: layer {layer.name!r} computes in {policy.compute_dtype} (dtype "
                f"policy {policy.name!r}): HMC's Metropolis test reads the potential of that "
                "forward pass, whose rounding, summed over train_size="
                f"{getattr(model, 'train_size', '?')} examples, rejects transitions at any "
                "step size (and its adaptation shrinks the step toward 0). Sample HMC "
                "under 'float32' or 'float64'; the SG samplers take low-precision "
                "gradients.", UserWarning, stacklevel=4)
            return


def gradient_scale(model):
    """The power of two S a sampled float16 model's potential is differentiated at.

    ``S = 2^⌊log₂ n⌋`` (n = ``model.train_size``, at most 2²⁴): the
    gradients of ``S·(mean NLL + (1/n)(-log p(θ)))``, about those of the
    full potential ``U(θ)``, are in float16's normal range where the
    mean-form ones, of order 1/batch per example, underflow. The backends
    divide them by S in float32 and, where they overflow, recompute them at
    ``S/2^m`` (``backend.value_and_gradients``). A function of the model's
    compile arguments alone: a saved or resumed model keeps it.

    Args:
        model: a compiled :class:`keras_bnn.BayesianModel`.

    Returns:
        S as a Python float when ``model`` is compiled with a sampler and a
        layer computes in float16 (``"mixed_float16"``), else None (the
        gradients are taken unscaled, or, for the SGD/MAP baseline, by
        Keras' ``LossScaleOptimizer``).
    """
    if getattr(model, "sampler", None) is None or not any(
            layer.dtype_policy.compute_dtype == "float16"
            for layer in model._flatten_layers(include_self=True)):
        return None
    return float(2 ** min(int(model.train_size).bit_length() - 1, _MAX_SCALE_EXPONENT))


def keep_out_of_loss_scaling(model, kwargs, owner="BayesianModel.compile"):
    """Sets ``kwargs["auto_scale_loss"] = False``: no ``LossScaleOptimizer`` wraps a sampler.

    Under ``"mixed_float16"`` the backend scales a sampler's float16
    gradients itself, by the fixed ``S = 2^⌊log₂ n⌋`` (:func:`gradient_scale`);
    Keras' dynamic scale would skip steps on overflow and unscale
    gradients it never scaled. Keras' default (``auto_scale_loss`` not
    passed) is overridden silently; an explicit ``auto_scale_loss=True``
    under ``"mixed_float16"``, where Keras would have wrapped the sampler,
    warns that it is not honoured (until 2026-11-29 silently).

    Args:
        model: the ``keras.Model`` compiled with a sampler.
        kwargs: the ``**kwargs`` passed on to ``keras.Model.compile``
            (changed in place).
        owner: the caller, for the message.

    Warns:
        UserWarning: naming ``auto_scale_loss``, for ``auto_scale_loss=True``
            under a model dtype policy ``"mixed_float16"``.
    """
    if kwargs.get("auto_scale_loss") and model.dtype_policy.name == "mixed_float16":
        warnings.warn(
            f"{owner}: auto_scale_loss=True is not honoured with a sampler: Keras' "
            "LossScaleOptimizer (a dynamic scale that skips steps on overflow) would break "
            "the chain, so keras_bnn scales the float16 gradients itself by the fixed "
            f"S = 2^floor(log2 train_size) = {gradient_scale(model) or 1:.0f} (see "
            "keras_bnn.precision). Drop auto_scale_loss (or pass False) to silence this.",
            UserWarning, stacklevel=3)
    kwargs["auto_scale_loss"] = False


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
