"""Memory of a sampling run as samples are collected (and later read back).

Collects 50 samples of ``resnet_pp(depth=20)`` (one ATMC step per "epoch",
a sample at every epoch end) and prints resident memory after each tenth
sample, then iterates over the store once. Memory must not grow with the
number of samples: the store writes each sample to disk and keeps nothing.

    python benchmarks/store_memory.py [--samples 50] [--dir /tmp/store]

Prints a Markdown table for the README.
"""

import argparse
import os
import resource
import shutil
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_bnn as kb  # noqa: E402
from keras_bnn.cli import int_at_least  # noqa: E402


def rss_mib():
    """Current resident set size in MiB (Linux /proc)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class RecordMemory(keras.callbacks.Callback):
    def __init__(self, store, every):
        super().__init__()
        self.store, self.every, self.rows = store, every, []

    def on_epoch_end(self, epoch, logs=None):
        if len(self.store) % self.every == 0:
            self.rows.append((len(self.store), rss_mib()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int_at_least(10), default=50,
                        help="samples to collect; the memory is read at every 10th")
    parser.add_argument("--dir", default=None, help="store directory (default: a temp dir)")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="kb-store-")
    try:
        keras.utils.set_random_seed(0)
        model = kb.models.resnet_pp(input_shape=(32, 32, 3), num_classes=10, depth=20)
        model.compile(sampler=kb.samplers.ATMC(1e-4), train_size=50_000,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        x = np.random.default_rng(0).normal(size=(32, 32, 32, 3)).astype("float32")
        y = np.arange(32) % 10
        store = kb.SampleStore(os.path.join(root, "samples"))
        record = RecordMemory(store, every=10)
        model.fit(x, y, batch_size=32, epochs=args.samples, verbose=0,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0), record])
        size = sum(os.path.getsize(os.path.join(store.path, f)) for f in os.listdir(store.path))
        read_start = rss_mib()
        checksum = sum(float(np.sum(s.weights[0])) for s in store)
        read_end = rss_mib()
        print(f"{len(store)} samples of resnet_pp(depth=20), {model.count_params():,} "
              f"parameters, {size / 2**20:.1f} MiB on disk (checksum {checksum:.3f})\n")
        print("| samples collected | RSS (MiB) |\n|---:|---:|")
        for count, mib in record.rows:
            print(f"| {count} | {mib:.0f} |")
        print(f"\nReading all samples back: RSS {read_start:.0f} → {read_end:.0f} MiB; "
              f"peak RSS of the process "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB.")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
