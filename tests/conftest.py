"""Test configuration: TensorFlow backend, two logical CPU devices, no downloads."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

# Two logical CPUs so MirroredStrategy tests run on one machine. This must
# happen before TensorFlow initialises its devices, i.e. at collection time.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
)
