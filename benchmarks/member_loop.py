"""Which ``member_loop`` evaluates a small MLP ensemble fastest on CPU, S = 4..64.

``PosteriorEnsemble(member_loop="auto")`` picks ``"unroll"`` up to
``AUTO_UNROLL_MAX`` members and ``"map"`` above, never ``"vectorized_map"``
(:attr:`~keras_bnn.PosteriorEnsemble.loop_used` says why, with this
script's numbers). For S members of ``mlp(13, hidden=(32, 32), 3
classes)`` (wine's shape) it builds one ensemble per loop and times
``predict`` of N examples in batches of B (the first call, which traces and
under JAX compiles, and the steady time) and the compiled graph alone on
the N examples (what ``predict`` runs per batch, without Keras' loop around
it). Steady times are the fastest of ``--repeats`` calls, the loops called
in turn so that they share the machine's load. Runs under the Keras backend
of ``KERAS_BACKEND``:

    python benchmarks/member_loop.py
    KERAS_BACKEND=jax python benchmarks/member_loop.py
    python benchmarks/member_loop.py --members 64 --shapes 178x32 --repeats 3

Prints a Markdown table: per (S, N x B) each loop's times, the loop whose
graph was fastest and the loop ``"auto"`` uses.
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_bnn as kb  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402
from keras_bnn.ensemble import MEMBER_LOOPS  # noqa: E402

MLP_INPUTS, CLASSES = 13, 3


def weight_sets(model, count, seed=0):
    """``count`` perturbed copies of the model's weights (values do not affect speed)."""
    rng = np.random.default_rng(seed)
    return [[w + 0.01 * rng.standard_normal(w.shape).astype(w.dtype) for w in model.get_weights()]
            for _ in range(count)]


def examples_and_batch(text):
    """``"NxB"`` as ``(N, B)``, ints >= 1 (an ``--shapes`` item)."""
    parts = text.split("x")
    try:
        examples, batch_size = (int(part) for part in parts)
    except ValueError:
        examples = batch_size = 0
    if len(parts) != 2 or min(examples, batch_size) < 1:
        raise argparse.ArgumentTypeError(f"must be N x B, two ints >= 1 as 1024x256; got {text!r}")
    return examples, batch_size


def compiled_call(ensemble):
    """``ensemble(x)`` as the backend compiles it, a function of a numpy batch to numpy:
    the graph ``predict`` runs per batch, without Keras' predict loop around it."""
    if keras.backend.backend() == "jax":
        import jax  # pylint: disable=import-outside-toplevel

        step = jax.jit(lambda values, x: ensemble.stateless_call([], values, x)[0])
        # The values are read at each call: Keras' predict replaces the arrays.
        return lambda x: np.asarray(step([v.value for v in ensemble.non_trainable_variables], x))
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    step = tf.function(ensemble.call, autograph=False)
    return lambda x: step(tf.constant(x)).numpy()


def time_loops(count, examples, batch_size, repeats):
    """Seconds of each loop: ``{loop: (first predict, steady predict, steady graph)}``,
    and the loop ``"auto"`` uses at ``count`` members."""
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((MLP_INPUTS,), CLASSES, hidden=(32, 32))
    x = np.random.default_rng(1).standard_normal((examples, MLP_INPUTS)).astype("float32")
    sets = weight_sets(model, count)
    ensembles = {loop: kb.PosteriorEnsemble(model, sets, member_loop=loop)
                 for loop in MEMBER_LOOPS}
    probe = ensembles["unroll"]
    probe.member_loop = "auto"
    auto = probe.loop_used
    probe.member_loop = "unroll"
    graphs = {loop: compiled_call(ensemble) for loop, ensemble in ensembles.items()}
    first, steady = {}, {loop: ([], []) for loop in MEMBER_LOOPS}
    for round_ in range(1 + repeats):
        for loop, ensemble in ensembles.items():
            start = time.perf_counter()
            probs = ensemble.predict(x, batch_size=batch_size, verbose=0)
            middle = time.perf_counter()
            graph_probs = graphs[loop](x)
            end = time.perf_counter()
            if round_ == 0:
                first[loop] = middle - start
                np.testing.assert_allclose(graph_probs, probs, rtol=1e-4, atol=1e-6)
            else:
                steady[loop][0].append(middle - start)
                steady[loop][1].append(end - middle)
    return {loop: (first[loop], min(steady[loop][0]), min(steady[loop][1]))
            for loop in MEMBER_LOOPS}, auto


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int_at_least(1), nargs="+",
                        default=[4, 8, 16, 32, 64])
    parser.add_argument("--shapes", type=examples_and_batch, nargs="+",
                        default=[(178, 32), (1024, 1024), (8192, 8192)],
                        help="N x B: N examples in batches of B")
    parser.add_argument("--repeats", type=int_at_least(1), default=15)
    args = parser.parse_args()
    print(f"mlp({MLP_INPUTS}, hidden=(32, 32), {CLASSES} classes), Keras backend "
          f"{keras.backend.backend()}, {os.cpu_count()} CPUs; steady: best of "
          f"{args.repeats} calls: predict ms, then in brackets the compiled graph alone on "
          f"the N examples, ms; first predict s in parentheses\n")
    print("| S | N x B | " + " | ".join(f"{loop}" for loop in MEMBER_LOOPS)
          + " | fastest (graph) | auto uses |")
    print("|---|---|" + "---|" * (len(MEMBER_LOOPS) + 2))
    for count in args.members:
        for examples, batch_size in args.shapes:
            cells, auto = time_loops(count, examples, batch_size, args.repeats)
            fastest = min(cells, key=lambda loop: cells[loop][2])
            row = " | ".join(f"{1e3 * steady:.1f} [{1e3 * graph:.2f}] ({first:.1f})"
                             for first, steady, graph in cells.values())
            print(f"| {count} | {examples}x{batch_size} | {row} | {fastest} | {auto} |", flush=True)


if __name__ == "__main__":
    main()
