"""Appends samples of a model with a frozen trunk to a SampleStore from its own
process (tests/test_transfer_learning.py: concurrent first appends, a kill
between the shared file and the first sample).

Usage: python frozen_appender.py STORE_DIR TAG COUNT GO_FILE [die-after-shared]

The frozen trunk's values depend on TAG, so processes of different tags
disagree about them. Waits for GO_FILE to exist, appends COUNT samples
(metadata ``chain=TAG``), and writes the model's weights to
``expected-TAG-STEP.npz`` beside STORE_DIR. With ``die-after-shared`` the process
exits with status 17 (``os._exit``, no cleanup) as soon as its append has
created ``shared.npz``, before the sample file.
"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bnn import shared_weights  # noqa: E402
from keras_bnn.store import SampleStore  # noqa: E402


def frozen_model(tag):
    """4 → frozen Dense(8) → frozen BatchNormalization → sampled Dense(3); the
    frozen values are a function of ``tag``, the head's of the process."""
    keras.utils.set_random_seed(tag)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, name="trunk", trainable=False)(inputs)
    batch_norm = keras.layers.BatchNormalization(name="trunk_bn", trainable=False)
    model = keras.Model(inputs, keras.layers.Dense(3, name="head")(batch_norm(hidden)))
    batch_norm.moving_mean.assign(keras.ops.full((8,), float(tag)))
    return model


def main():
    path, tag, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if sys.argv[5:] == ["die-after-shared"]:
        publish = shared_weights.publish

        def publish_then_die(*args):
            publish(*args)
            os._exit(17)

        shared_weights.publish = publish_then_die
    model = frozen_model(tag)
    store = SampleStore(path)
    while not os.path.exists(go):
        time.sleep(0.005)
    for step in range(count):
        head = model.get_layer("head")
        head.kernel.assign(head.kernel + 1.0)  # each sample its own head
        store.append(model, chain=tag, step=step)
        np.savez(os.path.join(os.path.dirname(path), f"expected-{tag}-{step}.npz"),
                 *model.get_weights())


if __name__ == "__main__":
    main()
