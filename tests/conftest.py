"""Test configuration: TensorFlow backend, two logical CPU devices, no downloads."""

import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The tests, and every worker process they start, import the keras_bnn of this
# tree: the virtualenv's editable install points at the checkout it was made
# from, which is another tree when a worktree shares the virtualenv.
_ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, _ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

# Two logical CPUs so MirroredStrategy tests run on one machine. This must
# happen before TensorFlow initialises its devices, i.e. at collection time.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402
import pytest  # noqa: E402

from mirrored import new_mirrored  # noqa: E402


@pytest.fixture
def new_strategy():
    """``new_mirrored``, for tests that make their strategies through a fixture."""
    return new_mirrored


@pytest.fixture
def policy():
    """Sets a global dtype policy for the test; restores float32 afterwards."""
    try:
        yield keras.config.set_dtype_policy
    finally:
        keras.config.set_dtype_policy("float32")
