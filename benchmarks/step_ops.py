"""Count the operations XLA compiles into one training step, per optimizer.

On a GPU a small model's training step is bound by launching kernels, not
by arithmetic: every top-level operation of the compiled step (a fusion, a
copy, a convolution, a random-bits call, ...) is at least one kernel launch
of a few microseconds. This script compiles each optimizer's training step
of ``benchmarks/sampler_overhead.py`` (same models, same optimizers) with
the JAX backend on whatever device JAX has, asks XLA to dump the optimised
HLO of the step, and counts the instructions of its entry computation,
leaving out those that launch nothing (parameters, constants, tuples and
their elements, bitcasts). Counts on a CPU and on a GPU differ (each
compiler fuses differently); the ratio between optimizers is what to read.

    python benchmarks/step_ops.py --models mlp resnet
    python benchmarks/step_ops.py --models fmnist_mlp --optimizers ATMC

Prints a Markdown table: model, optimizer, operations, × SGD, and the most
frequent kinds of operation.
"""

import argparse
import collections
import glob
import os
import re
import shutil
import sys
import tempfile
import warnings

import numpy as np

# Instructions that launch no kernel.
FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
OPCODE = re.compile(r"\s([a-z][a-z0-9\-]*)\(")


def _start_jax(dump):
    """Imports JAX, keras_bnn and ``sampler_overhead`` with XLA dumping into ``dump``.

    Args:
      dump: the directory XLA dumps each ``train_step`` module's HLO into.

    Returns:
      ``(jax, keras_bnn, sampler_overhead)``.
    """
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
                               " --xla_dump_hlo_module_re=train_step")
    import jax  # noqa: PLC0415  (after XLA_FLAGS)

    import keras_bnn  # noqa: PLC0415
    import sampler_overhead  # noqa: PLC0415  (this directory is sys.path[0])

    return jax, keras_bnn, sampler_overhead


def entry_operations(hlo_text):
    """Opcode of every instruction of the HLO module's ENTRY computation."""
    entry = hlo_text[hlo_text.index("\nENTRY"):]
    body = entry[:entry.index("\n}\n")].splitlines()[1:]
    opcodes = (OPCODE.search(line.split("=", 1)[1]) for line in body if "=" in line)
    return [match.group(1) for match in opcodes if match]


def step_operations(model_key, optimizer, timing, dump):
    """Operation counts of ``optimizer``'s compiled training step on ``model_key``.

    Compiles the step (one ``fit`` epoch of one batch, past the "auto" rows'
    warm-up so the dumped step is the sampling phase's) and reads the largest
    ``train_step`` module XLA dumped for it.

    Args:
      model_key: a key of ``timing.MODELS``.
      optimizer: a key of ``timing.OPTIMIZERS``.
      timing: the ``sampler_overhead`` module (:func:`_start_jax`).
      dump: the directory XLA dumps into.

    Returns:
      A ``collections.Counter`` of opcode → count, without :data:`FREE`.

    Raises:
      RuntimeError: if XLA dumped no training step.
    """
    input_shape, build, _ = timing.MODELS[model_key]
    before = set(glob.glob(f"{dump}/*"))
    model = timing._compiled(build, timing.OPTIMIZERS[optimizer](), "auto")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(timing.BATCH,) + input_shape).astype(np.float32)
    y = rng.integers(0, timing.NUM_CLASSES, size=timing.BATCH).astype(np.int32)
    model.fit(x, y, batch_size=timing.BATCH, epochs=1, verbose=0)
    dumped = [path for path in set(glob.glob(f"{dump}/*train_step*after_optimizations.txt"))
              - before if os.path.basename(path).endswith("_after_optimizations.txt")]
    if not dumped:
        raise RuntimeError(f"XLA dumped no optimised train_step module into {dump}")
    with open(max(dumped, key=os.path.getsize)) as handle:
        counts = collections.Counter(entry_operations(handle.read()))
    return collections.Counter({op: n for op, n in counts.items() if op not in FREE})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=["resnet", "mlp", "fmnist_mlp"],
                        default=["mlp"])
    parser.add_argument("--optimizers", nargs="+", metavar="NAME",
                        help="count only the rows whose name starts with one of these "
                             "(SGD is always counted: it is the baseline)")
    args = parser.parse_args(argv)  # --help and a bad flag: before any folder is made
    dump = tempfile.mkdtemp(prefix="keras_bnn_step_ops_")
    try:
        jax, kb, timing = _start_jax(dump)
        unknown = [name for name in args.optimizers or ()
                   if not any(key.startswith(name) for key in timing.OPTIMIZERS)]
        if unknown:
            parser.error(f"--optimizers {unknown} start no row's name: "
                         f"{list(timing.OPTIMIZERS)}")
        # Random labels at arbitrary steps: the samplers' gradient-noise warning is expected.
        warnings.filterwarnings("ignore", category=kb.GradientNoiseWarning)
        optimizers = [key for key in timing.OPTIMIZERS if key.startswith("SGD(")
                      or not args.optimizers or key.startswith(tuple(args.optimizers))]
        print(f"JAX {jax.__version__}, devices: {[str(d) for d in jax.devices()]}\n")
        print("| model | optimizer | operations | × SGD | most frequent |")
        print("|---|---|---:|---:|---|", flush=True)
        for model_key in (k for k in timing.MODELS
                          if k.split()[0].startswith(tuple(args.models))):
            baseline = None
            for optimizer in optimizers:
                counts = step_operations(model_key, optimizer, timing, dump)
                total = sum(counts.values())
                baseline = baseline or total
                common = ", ".join(f"{op} {n}" for op, n in counts.most_common(3))
                print(f"| {model_key} | {optimizer} | {total} | {total / baseline:.2f} "
                      f"| {common} |", flush=True)
    finally:
        shutil.rmtree(dump, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
