"""Memory a process keeps per ``fit`` of a new model, by optimizer.

A notebook or a test suite fits many models in one process. Each row fits
``--fits`` new small models (4-8-2 MLP, 64 shuffled rows, batch 32, 2
epochs) one after another, dropping each after its fit; after every fit it
runs ``gc.collect()`` and glibc's ``malloc_trim(0)`` and reads the resident
set. Memory kept per fit is the least-squares slope of RSS against the fit
number, over the fits after the first ``--warm-up`` (which trace and compile
the library's own functions once per process). Plain Keras with SGD is the
baseline row.

    python benchmarks/fit_memory.py [--fits 40] [--warm-up 5]

Prints a Markdown table for the README.
"""

import argparse
import ctypes
import gc
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_bnn as kb  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402
from store_memory import rss_mib  # noqa: E402 - this directory's

OPTIMIZERS = {
    "SGD(momentum=0.9), plain Keras": None,
    "SGLD(step_size=1e-3)": lambda: kb.samplers.SGLD(step_size=1e-3, seed=1),
    "SGHMC(step_size=1e-3)": lambda: kb.samplers.SGHMC(step_size=1e-3, seed=1),
    "SGNHT(step_size=1e-3)": lambda: kb.samplers.SGNHT(step_size=1e-3, seed=1),
    "ATMC(step_size=1e-3)": lambda: kb.samplers.ATMC(step_size=1e-3, seed=1),
    "ATMC() (step_size auto)": lambda: kb.samplers.ATMC(seed=1),
}


def fit_once(make_sampler, x, y):
    """Fits one new 4-8-2 model for 2 epochs; the model is dropped on return."""
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if make_sampler is None:
        model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9), loss=loss)
    else:
        model = kb.bayesian(model)
        model.compile(sampler=make_sampler(), train_size=len(x), loss=loss)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0)


def settled_rss(libc):
    """RSS in MiB after a full garbage collection and returning freed heap to the OS."""
    gc.collect()
    libc.malloc_trim(0)
    return rss_mib()


def kept_per_fit(make_sampler, fits, warm_up, libc):
    """MiB kept per fit: the slope of settled RSS over the fits after ``warm_up``."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    readings = []
    for _ in range(warm_up + fits):
        fit_once(make_sampler, x, y)
        readings.append(settled_rss(libc))
    counted = np.asarray(readings[warm_up:])
    slope = np.polyfit(np.arange(fits), counted, 1)[0]
    return slope, counted[0], counted[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int_at_least(5), default=40,
                        help="fits counted per optimizer (after the warm-up)")
    parser.add_argument("--warm-up", type=int_at_least(1), default=5,
                        help="fits per optimizer before counting")
    args = parser.parse_args()
    libc = ctypes.CDLL("libc.so.6")
    print(f"{args.fits} counted fits per row after {args.warm_up} warm-up fits; "
          f"Keras {keras.__version__}, backend {keras.backend.backend()}\n")
    print("| optimizer | MiB kept per fit | RSS first → last counted fit (MiB) |")
    print("|---|---:|---:|")
    for name, make_sampler in OPTIMIZERS.items():
        slope, first, last = kept_per_fit(make_sampler, args.fits, args.warm_up, libc)
        print(f"| {name} | {slope:.2f} | {first:.0f} → {last:.0f} |", flush=True)


if __name__ == "__main__":
    main()
