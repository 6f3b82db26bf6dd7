"""Latency and throughput of a PosteriorEnsemble, in-process and as a SavedModel.

For S members of ``resnet_pp(input_shape=(32, 32, 3), num_classes=10,
depth=20)`` and each ``member_loop`` formulation, times one call of the
serving computation (``predictive_summary``: probabilities and the
uncertainty outputs) at batch sizes 1 and 64:

* in-process: ``tf.function(ensemble.predictive_summary)``;
* SavedModel: the exported version directory loaded with
  ``tf.saved_model.load`` and called through ``signatures["serving_default"]``
  (what TF Serving runs).

The reference "one member" is the bare member model, ``tf.function`` of
``softmax(model(x))``. Targets: an S-member ensemble costs at most 1.1·S
times one member (``cost/(S·member)`` ≤ 1.1), and the SavedModel is within
10% of in-process (``SM/in-proc`` ≤ 1.1). Each latency is the fastest of
repeated calls after warm-up, the three functions (member, in-process,
SavedModel) called in turn so that they share the machine's load; the member
is re-timed beside every ensemble. ``export s`` is the time to trace and write
the SavedModel (it grows with S for the unrolled graph).

    python benchmarks/ensemble_latency.py            # S = 1, 5, 10, 20
    python benchmarks/ensemble_latency.py --quick    # S = 1, 5; fewer repeats

``--compile`` times instead what large ensembles of a small MLP (13 inputs,
two hidden layers of 32, 3 classes: wine's shape) cost to build and to
compile: for each S (default 10, 100, 700) and ``member_loop`` (``"auto"``
and the three loops) a fresh process builds the ensemble from S weight sets
and calls ``predict`` and ``predict_uncertainty`` on 178 examples (Keras'
default batch of 32: the first call traces, under JAX compiles, both batch
sizes), then again (best of ``--repeats``, the steady time). It runs under
the Keras backend of ``KERAS_BACKEND``; a cell that takes more than
``--timeout`` seconds is reported as ``> timeout``:

    python benchmarks/ensemble_latency.py --compile
    KERAS_BACKEND=jax python benchmarks/ensemble_latency.py --compile

Prints a Markdown table for the README.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bnn as kb  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402
from keras_bnn.ensemble import MEMBER_LOOPS  # noqa: E402

INPUT_SHAPE = (32, 32, 3)
MLP_INPUTS, MLP_EXAMPLES = 13, 178
COMPILE_LOOPS = ("auto",) + MEMBER_LOOPS


def best_seconds(functions, x, repeats, warmup=2):
    """Fastest wall time of each ``function(x)`` (outputs fetched to numpy).

    The functions are called in turn, round after round, so that they share
    the machine's load; the minimum over rounds estimates each one's own cost
    on a machine whose other users come and go.
    """
    times = [[] for _ in functions]
    for round_ in range(warmup + repeats):
        for function, record in zip(functions, times):
            start = time.perf_counter()
            tf.nest.map_structure(np.asarray, function(x))
            if round_ >= warmup:
                record.append(time.perf_counter() - start)
    return [min(record) for record in times]


def weight_sets(model, count, seed=0):
    """``count`` perturbed copies of the model's weights (values do not affect speed)."""
    rng = np.random.default_rng(seed)
    return [
        [w + 0.01 * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()]
        for _ in range(count)
    ]


def compile_cell(count, loop, repeats):
    """One ``--compile`` cell, in this process: a dict of seconds (see the module doc)."""
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((MLP_INPUTS,), 3, hidden=(32, 32))
    x = np.random.default_rng(1).standard_normal((MLP_EXAMPLES, MLP_INPUTS)).astype("float32")
    sets = weight_sets(model, count)
    start = time.perf_counter()
    ensemble = kb.PosteriorEnsemble(model, sets, member_loop=loop)
    cell = {"loop_used": ensemble.loop_used, "build": time.perf_counter() - start}
    for method in ("predict", "predict_uncertainty"):
        times = []
        for _ in range(1 + repeats):
            start = time.perf_counter()
            getattr(ensemble, method)(x, verbose=0)
            times.append(time.perf_counter() - start)
        cell[method] = (times[0], min(times[1:]))
    return cell


def compile_table(members, loops, repeats, timeout):
    """Runs each ``--compile`` cell in a fresh process and prints the table's rows."""
    print(f"mlp(13, hidden=(32, 32), 3 classes), {MLP_EXAMPLES} examples in batches of 32, "
          f"Keras backend {keras.backend.backend()}, {os.cpu_count()} CPUs, "
          f"steady: best of {repeats} calls\n")
    print("| backend | S | member_loop | loop used | build s | predict first s | predict ms "
          "| predict_uncertainty first s | predict_uncertainty ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for count in members:
        for loop in loops:
            command = [sys.executable, __file__, "--cell", str(count), loop,
                       "--repeats", str(repeats)]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                      check=True)
                cell = json.loads(done.stdout.splitlines()[-1])
                cells = [cell["loop_used"], f"{cell['build']:.1f}"] + [
                    f"{cell[m][0]:.1f} | {1e3 * cell[m][1]:.0f}"
                    for m in ("predict", "predict_uncertainty")]
            except subprocess.TimeoutExpired:
                cells = [f"> {timeout} s in all"]
            print(f"| {keras.backend.backend()} | {count} | {loop} | {' | '.join(cells)} |",
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="S = 1, 5; batch 1, 64; 3 repeats")
    parser.add_argument("--compile", action="store_true",
                        help="build and first-call times of MLP ensembles (S = 10, 100, 700)")
    parser.add_argument("--timeout", type=int_at_least(1), default=600,
                        help="--compile: seconds a cell may take (default 600)")
    parser.add_argument("--cell", nargs=2, metavar=("S", "LOOP"), help=argparse.SUPPRESS)
    parser.add_argument("--members", type=int_at_least(1), nargs="+", default=None)
    parser.add_argument("--batches", type=int_at_least(1), nargs="+", default=[1, 64])
    parser.add_argument("--loops", nargs="+", default=None, choices=COMPILE_LOOPS,
                        help='default: the three loops ("auto" too with --compile)')
    parser.add_argument("--repeats", type=int_at_least(1), default=None,
                        help="calls timed per cell, the best kept (default: 10, --quick and "
                             "--compile 3)")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick or args.compile or args.cell else 10)
    if args.cell:
        print(json.dumps(compile_cell(int(args.cell[0]), args.cell[1], repeats)))
        return
    if args.compile:
        compile_table(args.members or [10, 100, 700], args.loops or COMPILE_LOOPS, repeats,
                      args.timeout)
        return
    if keras.backend.backend() != "tensorflow":  # export writes a TensorFlow SavedModel
        parser.error(f"the SavedModel timings need KERAS_BACKEND=tensorflow (the backend is "
                     f"{keras.backend.backend()!r}); under any backend use --compile")
    members = args.members or ([1, 5] if args.quick else [1, 5, 10, 20])
    args.loops = args.loops or list(MEMBER_LOOPS)

    keras.utils.set_random_seed(0)
    model = kb.models.resnet_pp(input_shape=INPUT_SHAPE, num_classes=10, depth=20)
    rng = np.random.default_rng(1)
    inputs = {b: rng.standard_normal((b, *INPUT_SHAPE)).astype("float32") for b in args.batches}
    member = tf.function(lambda x: keras.ops.softmax(model(x, training=False)))

    print(
        f"resnet_pp depth 20, {model.count_params():,} parameters, "
        f"{os.cpu_count()} CPUs, TF {tf.__version__}, best of {repeats} calls\n"
    )
    print("| S | member_loop | batch | member ms | in-process ms | SavedModel ms "
          "| SM/in-proc | cost/(S·member) | throughput ex/s (SM) | export s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kb-ensemble-bench-") as root:
        for count in members:
            sets = weight_sets(model, count)
            for loop in args.loops:
                ensemble = kb.PosteriorEnsemble(model, sets, member_loop=loop)
                in_process = tf.function(ensemble.predictive_summary)
                start = time.perf_counter()
                version = ensemble.export(os.path.join(root, f"{loop}_{count}"))
                export_seconds = time.perf_counter() - start
                signature = tf.saved_model.load(version).signatures["serving_default"]

                def saved(x, signature=signature):
                    return signature(inputs=x)

                for batch in args.batches:
                    single, local, served = best_seconds(
                        [member, in_process, saved], inputs[batch], repeats
                    )
                    print(
                        f"| {count} | {loop} | {batch} | {1e3 * single:.1f} | {1e3 * local:.1f} "
                        f"| {1e3 * served:.1f} | {served / local:.2f} "
                        f"| {local / (count * single):.2f} | {batch / served:.0f} "
                        f"| {export_seconds:.1f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
