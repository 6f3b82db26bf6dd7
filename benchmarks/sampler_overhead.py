"""Time per training step of each sampler against SGD with momentum.

Models (batch 128, 10 classes, train_size 50 000):

* ``resnet_pp(input_shape=(32, 32, 3), num_classes=10, depth=20)``;
* ``mlp(input_shape=(784,), num_classes=10, hidden=(512, 512))``.

Each model is built once per optimizer (same initial weights) and compiled
with ``sampler=`` SGLD, SGHMC, SGNHT or ATMC at an explicit step size, the
same four at their default ``step_size="auto"`` (rows "auto"; a warm-up of
``AUTO_WARMUP_STEPS`` steps, finished before timing starts, so they time the
step after the warm-up: the frozen h plus the gated warm-up code), or
``optimizer=keras.optimizers.SGD(momentum=0.9)``, all with
``loss=SparseCategoricalCrossentropy(from_logits=True)`` and
``train_size=50_000``. One timed unit is, by default (``--unit
train_on_batch``), ``model.train_on_batch`` on a fixed in-memory batch
(tensors, so no host conversion is timed); with ``--unit fit`` it is one
``model.fit`` epoch over ``steps-per-round`` batches of in-memory arrays
(``shuffle=False``, ``verbose=0``), the way a user trains. The two differ on
the JAX backend: ``train_on_batch`` writes every model, optimizer and metric
variable back from the jitted step's outputs at every call, ``fit`` only at
the end of an epoch, so per-call host work that grows with the sampler's
slot variables is timed in the first and amortised in the second. After warm-up the
configurations are timed in turn, round after round (a round is 2 ResNet or
10 MLP steps per configuration), so they share the machine's load; the
reported time is the median over rounds of the mean step time in a round,
both wall-clock and process CPU time (all threads; steadier than wall time on
a shared machine, and the cost that matters when every core is busy), and
the fastest round's wall time (``min``: the round least disturbed by other
work on the machine). The ratios are against SGD of the same model, in the
same run. ``--repeat N`` builds and times every configuration N times: the
spread between identical copies is the difference the run can resolve.

Targets (``TARGETS``; the table's ``target`` column, and ⚠ where a row's
median wall-clock ratio is above it): ResNet++ ≤ 1.10× SGD on a CPU and
≤ 1.05× on a GPU, where the convolutions dominate the step; the
Fashion-MNIST MLP ≤ 1.6× with TensorFlow on a CPU (issue #19: the SGD step
plus one N(0, 1) draw per weight and one fused pass). The 784-512-512 MLP
has none: on a CPU its step is bound by the noise draw (see the README,
"Benchmarks"), and on a GPU every step of these sizes is bound by per-array
and per-kernel overhead (README, "Sampler overhead on a GPU").

Runs under either Keras backend (TensorFlow by default); ``--breakdown``
needs TensorFlow:

    python benchmarks/sampler_overhead.py            # full run
    python benchmarks/sampler_overhead.py --quick    # fewer rounds
    python benchmarks/sampler_overhead.py --models mlp --rounds 30
    python benchmarks/sampler_overhead.py --unit fit --optimizers SGD ATMC
    KERAS_BACKEND=jax python benchmarks/sampler_overhead.py   # e.g. on a GPU

Prints a Markdown table.
"""

import argparse
import os
import time
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_bnn as kb  # noqa: E402
from keras_bnn import samplers  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402

BATCH = 128
TRAIN_SIZE = 50_000
NUM_CLASSES = 10

# Step sizes on the scale of each sampler's update with G = n·∇ (n = 5e4):
# SGLD moves θ by h·G (h·n = 0.05, an SGD learning rate); SGHMC/SGNHT/ATMC
# (unit mass, momentum decay ≈ 0.9 per step) act like SGD with momentum 0.9
# and learning rate h²·n = 0.05; h = 1e-3 is the ATMC paper's h0 on CIFAR-10.
# (The timing does not depend on these values.)
OPTIMIZERS = {
    "SGD(momentum=0.9)": lambda: dict(optimizer=keras.optimizers.SGD(0.01, momentum=0.9)),
    "SGLD": lambda: dict(sampler=samplers.SGLD(step_size=1e-6)),
    "SGHMC": lambda: dict(sampler=samplers.SGHMC(step_size=1e-3)),
    "SGNHT": lambda: dict(sampler=samplers.SGNHT(step_size=1e-3)),
    "ATMC": lambda: dict(sampler=samplers.ATMC(step_size=1e-3)),
}
# The defaults (step_size="auto"), with a warm-up short enough to end before timing.
AUTO_WARMUP_STEPS = 20
OPTIMIZERS.update({
    f"{name} auto": (lambda cls: lambda: dict(sampler=cls(warmup_steps=AUTO_WARMUP_STEPS)))(cls)
    for name, cls in (("SGLD", samplers.SGLD), ("SGHMC", samplers.SGHMC),
                      ("SGNHT", samplers.SGNHT), ("ATMC", samplers.ATMC))
})

# (model name, "cpu" or "gpu", Keras backend or None for any): the largest
# sampler/SGD ratio of the median wall-clock step; see the module doc.
TARGETS = {
    ("resnet_pp20", "cpu", None): 1.10,
    ("resnet_pp20", "gpu", None): 1.05,
    ("fmnist_mlp 784-256-256-10", "cpu", "tensorflow"): 1.6,
}

# name: (input shape, builder, steps per timed round)
MODELS = {
    "resnet_pp20": (
        (32, 32, 3),
        lambda: kb.models.resnet_pp(input_shape=(32, 32, 3), num_classes=NUM_CLASSES, depth=20),
        2,
    ),
    "mlp 784-512-512-10": (
        (784,),
        lambda: kb.models.mlp(input_shape=(784,), num_classes=NUM_CLASSES, hidden=(512, 512)),
        10,
    ),
    "fmnist_mlp 784-256-256-10": (
        (784,),
        lambda: kb.models.mlp(input_shape=(784,), num_classes=NUM_CLASSES, hidden=(256, 256)),
        10,
    ),
}


def _compiled(build, compile_args, jit_compile):
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        train_size=TRAIN_SIZE,
        jit_compile=jit_compile,
        **compile_args,
    )
    return model


def _round_runner(unit, input_shape, steps_per_round):
    """``run(model)``: one timed round of ``steps_per_round`` training steps."""
    rng = np.random.default_rng(0)
    if unit == "fit":
        size = steps_per_round * BATCH
        x = rng.normal(size=(size,) + input_shape).astype(np.float32)
        y = rng.integers(0, NUM_CLASSES, size=size).astype(np.int32)
        return lambda model: model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False,
                                       verbose=0)
    x = keras.ops.convert_to_tensor(rng.normal(size=(BATCH,) + input_shape).astype(np.float32))
    y = keras.ops.convert_to_tensor(rng.integers(0, NUM_CLASSES, size=BATCH).astype(np.int32))

    def run(model):
        for _ in range(steps_per_round):
            model.train_on_batch(x, y)

    return run


def time_model(input_shape, build, optimizers, rounds, steps_per_round, warmup, jit_compile,
               unit="train_on_batch", repeat=1):
    """Seconds per step for each optimizer in ``optimizers`` on one model.

    Returns ``(params, {label: (median wall, median CPU, min wall, state
    arrays)})``. With ``repeat`` > 1 every optimizer is built and timed
    ``repeat`` times as separate models (labels ``"NAME #k"``): identical
    configurations, whose spread is what the machine can resolve.

    Warm-up: ``max(1, ceil((warmup + AUTO_WARMUP_STEPS) / steps_per_round))``
    untimed rounds, so the "auto" rows' warm-up has ended before timing; with
    ``unit="fit"`` one more, because ``fit`` retraces the step without the
    warm-up's code at the end of the first epoch past it
    (``Sampler.leave_warmup``) and the new step is traced at its next call.
    """
    run = _round_runner(unit, input_shape, steps_per_round)
    models = {_label(key, copy, repeat): _compiled(build, OPTIMIZERS[key](), jit_compile)
              for key in optimizers for copy in range(repeat)}
    params = next(iter(models.values())).count_params()
    warmup_rounds = max(1, -(-(warmup + AUTO_WARMUP_STEPS) // steps_per_round)) + (unit == "fit")
    for model in models.values():
        for _ in range(warmup_rounds):
            run(model)
    wall = {key: [] for key in models}
    cpu = {key: [] for key in models}
    for _ in range(rounds):
        for key, model in models.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            run(model)
            wall[key].append((time.perf_counter() - start) / steps_per_round)
            cpu[key].append((time.process_time() - start_cpu) / steps_per_round)
    return params, {key: (float(np.median(wall[key])), float(np.median(cpu[key])),
                          float(np.min(wall[key])), _state_arrays(model))
                    for key, model in models.items()}


def _label(key, copy, repeat):
    """A row's name: the optimizer's, numbered ``#1``… when it is timed ``repeat`` > 1 times."""
    return key if repeat == 1 else f"{key} #{copy + 1}"


def _state_arrays(model):
    """How many arrays a compiled training step takes and returns: the model's
    trainable variables, the optimizer's and the metrics' variables (on a GPU
    each costs dispatch and kernel launches; see the README)."""
    return (len(model.trainable_variables) + len(model.non_trainable_variables)
            + len(model.optimizer.variables) + len(model.metrics_variables))


def breakdown(model_key, repeats=30):
    """Per-step cost of the parts of each sampler's update on an MLP's variables.

    ``apply`` is the whole optimizer step (finiteness guard, noise, update);
    ``apply, zero noise`` the same with the noise draw replaced by zeros (so
    ``apply`` minus it is what the draw costs inside the step); ``noise``
    draws the N(0, 1) noise of every variable (``Sampler.noise``, one draw
    per variable); ``diagnostics`` is what
    ``BayesianModel.train_step`` adds per step (reading the kinetic and
    configurational temperature sums that the update itself takes). Shared
    parts: the gradient-noise estimate ``V̂`` (its update of every
    variable), the virial sums ``Σθ·G``, those two with ``G = n·g`` as the
    samplers run them and fused into one XLA kernel per variable, the
    NaN/Inf guard, and four ways
    to draw the same number of normals: the backend's Threefry draw under
    XLA per variable (what the samplers do, :mod:`keras_bnn.backend.threefry`),
    one flat Threefry draw of all of them, TensorFlow's Philox
    ``stateless_normal`` per variable (the samplers' draw before 2026-11-27),
    and that kernel under XLA. TensorFlow backend only.
    """
    import tensorflow as tf  # noqa: PLC0415 - the breakdown times tf.functions

    from keras_bnn import backend  # noqa: PLC0415
    from keras_bnn.samplers.integrators import gradient_noise_update  # noqa: PLC0415

    model = MODELS[model_key][1]()
    variables = model.trainable_variables
    size = model.count_params()
    grads = [tf.random.normal(v.shape, stddev=1e-3) for v in variables]
    parts = {}
    sgd = keras.optimizers.SGD(0.01, momentum=0.9)
    sgd.build(variables)
    parts["SGD(momentum=0.9) apply"] = tf.function(lambda: sgd.apply(grads, variables))
    for name, make in list(OPTIMIZERS.items())[1:]:
        sampler, quiet = make()["sampler"], make()["sampler"]
        for s in (sampler, quiet):
            s.configure(train_size=TRAIN_SIZE)
            s.build(variables)
        quiet.noise = lambda v: tf.zeros(v.shape, v.dtype)
        parts[f"{name} apply"] = tf.function(lambda s=sampler: s.apply(grads, variables))
        parts[f"{name} apply, zero noise"] = tf.function(lambda s=quiet: s.apply(grads, variables))
        parts[f"{name} noise"] = tf.function(
            lambda s=sampler: tf.add_n([tf.reduce_sum(s.noise(v)) for v in variables]))
        parts[f"{name} diagnostics"] = tf.function(
            lambda s=sampler: (s.kinetic_temperature() if s.has_momentum else 0.0)
            + s.configurational_temperature())
    previous = [tf.Variable(tf.zeros(v.shape)) for v in variables]
    estimate = [tf.Variable(tf.zeros(v.shape)) for v in variables]
    parts["gradient-noise estimate V̂ (all variables)"] = tf.function(lambda: [
        e.assign(gradient_noise_update(g, p, e, 0.99))
        for g, p, e in zip(grads, previous, estimate)])
    parts["virial sums Σθ·G"] = tf.function(
        lambda: tf.add_n([tf.reduce_sum(v * g) for v, g in zip(variables, grads)]))

    def bookkeeping(v, g, p, e):  # G = n·g, Σθ·G and the new V̂ of one variable
        potential_grad = g * TRAIN_SIZE
        return (potential_grad, tf.reduce_sum(v * potential_grad),
                gradient_noise_update(potential_grad, p, e, 0.99))

    def bookkept(function):
        def run():
            sums = []
            for v, g, p, e in zip(variables, grads, previous, estimate):
                potential_grad, virial, new_estimate = function(
                    tf.convert_to_tensor(v), g, tf.convert_to_tensor(p), tf.convert_to_tensor(e))
                e.assign(new_estimate)
                p.assign(potential_grad)
                sums.append(virial)
            return tf.add_n(sums)
        return tf.function(run)

    parts["G = n·g, Σθ·G and V̂ (TensorFlow kernels)"] = bookkept(bookkeeping)
    parts["G = n·g, Σθ·G and V̂ (one XLA kernel per variable)"] = bookkept(
        tf.function(bookkeeping, jit_compile=True, autograph=False))
    step = tf.Variable(0, dtype=tf.int64)

    def philox_draw(v, i):
        key = tf.random.experimental.stateless_fold_in(tf.constant([0, i], tf.int64), step)
        return tf.reduce_sum(tf.random.stateless_normal(v.shape, seed=key))

    parts["draw: Threefry under XLA per variable (what the samplers do)"] = tf.function(
        lambda: tf.add_n([tf.reduce_sum(backend.stateless_normal(v.shape, 0, i, step, v.dtype))
                          for i, v in enumerate(variables)]))
    parts["draw: one flat Threefry draw of all parameters"] = tf.function(
        lambda: tf.reduce_sum(backend.stateless_normal((size,), 0, 0, step, "float32")))
    parts["draw: tf stateless_normal (Philox) per variable (before 2026-11-27)"] = tf.function(
        lambda: tf.add_n([philox_draw(v, i) for i, v in enumerate(variables)]))
    parts["draw: tf stateless_normal (Philox) under XLA"] = tf.function(
        lambda: tf.reduce_sum(tf.random.stateless_normal((size,), seed=[0, step])),
        jit_compile=True)

    def guard():
        with backend.finite_guard(grads, ["x"] * len(grads)):
            return tf.identity(0.0)

    parts["guard (all gradients)"] = tf.function(guard)
    times = {key: [] for key in parts}
    for function in parts.values():
        function()
    for _ in range(repeats):
        for key, function in parts.items():
            start = time.process_time()
            function()
            times[key].append(time.process_time() - start)
    print(f"\nUpdate cost on the MLP's {size:,} parameters (CPU time, median of {repeats}):\n")
    print("| part | CPU ms |")
    print("|---|---:|")
    for key, values in times.items():
        print(f"| {key} | {1e3 * np.median(values):.2f} |")


def target(model_key, device, backend):
    """The ratio ``model_key``'s samplers must stay under here, or None (``TARGETS``).

    Args:
        model_key: a key of ``MODELS``.
        device: ``"cpu"`` or ``"gpu"``.
        backend: the Keras backend's name.

    Returns:
        float or None.
    """
    return TARGETS.get((model_key, device, backend), TARGETS.get((model_key, device, None)))


def device_kind():
    """``"gpu"`` when the Keras backend computes on a GPU, else ``"cpu"``."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax  # noqa: PLC0415

        return "gpu" if jax.default_backend() == "gpu" else "cpu"
    if backend == "tensorflow":
        import tensorflow as tf  # noqa: PLC0415

        return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    return "cpu"


def describe_backend():
    """One line: the Keras backend, its version and its devices."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax  # noqa: PLC0415

        return f"JAX {jax.__version__}, devices: {[str(d) for d in jax.devices()]}"
    if backend == "tensorflow":
        import tensorflow as tf  # noqa: PLC0415

        return (f"TensorFlow {tf.__version__}, devices: "
                f"{[d.device_type for d in tf.config.list_logical_devices()]}")
    return f"backend {backend}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    parser.add_argument("--models", nargs="+", choices=["resnet", "mlp", "fmnist_mlp"],
                        default=["resnet", "mlp"])
    parser.add_argument("--rounds", type=int_at_least(1), default=None)
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the parts of each update (noise, guard, ...) on the MLP")
    parser.add_argument("--steps-per-round", type=int_at_least(1), default=None,
                        help="default: 2 for ResNet++, 10 for the MLP")
    parser.add_argument("--unit", choices=["train_on_batch", "fit"], default="train_on_batch",
                        help="what one timed round calls (see the module docstring)")
    parser.add_argument("--optimizers", nargs="+", metavar="NAME",
                        help="time only the rows whose name starts with one of these "
                             "(SGD is always timed: it is the baseline)")
    parser.add_argument("--repeat", type=int_at_least(1), default=1,
                        help="time every configuration this many times, as separate models "
                             "(the spread between copies is the machine's resolution)")
    parser.add_argument("--jit-compile", default="auto", type=str.lower,
                        choices=("auto", "true", "false"),
                        help="passed to compile: auto (Keras' default), true, false")
    args = parser.parse_args(argv)
    # Random labels at arbitrary steps: the samplers' gradient-noise warning is expected.
    warnings.filterwarnings("ignore", category=kb.GradientNoiseWarning)
    unknown = [name for name in args.optimizers or ()
               if not any(key.startswith(name) for key in OPTIMIZERS)]
    if unknown:
        parser.error(f"--optimizers {unknown} start no row's name: {list(OPTIMIZERS)}")
    if args.breakdown and keras.backend.backend() != "tensorflow":
        parser.error("--breakdown times tf.functions: run it with KERAS_BACKEND=tensorflow")
    rounds = args.rounds or (3 if args.quick else 15)
    warmup = 2 if args.quick else 3
    jit = {"auto": "auto", "true": True, "false": False}[args.jit_compile]

    selected = [k for k in MODELS if k.split()[0].startswith(tuple(args.models))]
    optimizers = [k for k in OPTIMIZERS if k.startswith("SGD(")
                  or not args.optimizers or k.startswith(tuple(args.optimizers))]
    print(f"{describe_backend()}, Keras {keras.__version__}, jit_compile={jit}, "
          f"unit {args.unit}, {rounds} rounds after {warmup + AUTO_WARMUP_STEPS} "
          f"warm-up steps\n")
    rows = []
    for key in selected:
        input_shape, build, steps = MODELS[key]
        if args.steps_per_round or args.quick:
            steps = args.steps_per_round or 2
        params, times = time_model(input_shape, build, optimizers, rounds, steps, warmup, jit,
                                   args.unit, args.repeat)
        base_wall, base_cpu, base_min, _ = times[_label("SGD(momentum=0.9)", 0, args.repeat)]
        for opt, (wall, cpu, fastest, arrays) in times.items():
            rows.append((key, params, opt, arrays, wall * 1e3, wall / base_wall,
                         fastest * 1e3, fastest / base_min, cpu * 1e3, cpu / base_cpu))
    device = device_kind()
    print("| model | params | optimizer | state arrays | ms / step | × SGD | target "
          "| min ms / step | min × SGD | CPU ms / step | CPU × SGD |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, params, opt, arrays, ms, ratio, min_ms, min_ratio, cpu_ms, cpu_ratio in rows:
        limit = target(model, device, keras.backend.backend())
        flag = " ⚠" if limit is not None and not opt.startswith("SGD") and ratio > limit else ""
        print(f"| {model} | {params:,} | {opt} | {arrays} | {ms:.2f} | {ratio:.3f}{flag} "
              f"| {'—' if limit is None else f'≤ {limit:.2f}'} "
              f"| {min_ms:.2f} | {min_ratio:.3f} | {cpu_ms:.2f} | {cpu_ratio:.3f} |")
    if args.breakdown:
        breakdown(next((k for k in selected if "mlp" in k), "mlp 784-512-512-10"))


if __name__ == "__main__":
    main()
