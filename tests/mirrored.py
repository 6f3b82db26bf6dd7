"""The one way the tests make a MirroredStrategy in the pytest process.

TensorFlow caches collective instances per (group key, instance key) for the
process, and every MirroredStrategy numbers its group keys from
``MirroredStrategy._collective_key_base`` (0 unless set: "only set this in
tests", tensorflow/python/distribute/mirrored_strategy.py). A later strategy
whose step all-reduces another size at a key an earlier one used aborts
("Shape mismatch in the collective instance 100 ... expected shape [258] but
another member in the group expected shape [130]"; plain Keras models too).
"""

import itertools

import tensorflow as tf

_KEY_BASES = itertools.count(1000, 1000)


def new_mirrored(devices=("/cpu:0", "/cpu:1")):
    """A MirroredStrategy over ``devices`` with collective keys no other test strategy uses."""
    tf.distribute.MirroredStrategy._collective_key_base = next(_KEY_BASES)
    return tf.distribute.MirroredStrategy(list(devices))
