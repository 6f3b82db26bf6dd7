"""Appends samples to a SampleStore from its own process (the concurrency and
kill -9 tests of tests/test_store_reliability.py).

Usage: python store_appender.py STORE_DIR ACTIVATION COUNT [DELAY_S]
Prints one line per acknowledged append: ``appended <index> <tag>``.
"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

from keras_bnn.store import SampleStore  # noqa: E402


def main():
    path, activation, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    keras.utils.set_random_seed(os.getpid() % 10_000)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3, activation=activation)(inputs))
    store = SampleStore(path)
    print("ready", flush=True)
    for i in range(count):
        try:
            index = store.append(model, chain=os.getpid(), step=i)
        except ValueError as error:
            print(f"refused {error}", flush=True)
            return
        print(f"appended {index} {os.getpid()}-{i}", flush=True)
        time.sleep(delay)


if __name__ == "__main__":
    main()
