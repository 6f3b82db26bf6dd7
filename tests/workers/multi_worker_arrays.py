"""One worker of the multi-worker shuffled-arrays check (run by tests/test_multi_worker.py).

Usage: python multi_worker_arrays.py TF_CONFIG_JSON VARIANT OUTPUT.npz

Fits ``tests/test_resume_shuffle.py``'s model on its arrays
(``shuffle=True``, global batches of 16: 8 a worker) with that file's
``VARIANT`` of ``fit``'s arguments under ``MultiWorkerMirroredStrategy``,
unbroken, then killed after an epoch's ``BackupAndRestore`` backup and
resumed by a model of another initialisation (a backup directory per
worker, OUTPUT's name without ``.npz``: Keras' callback writes from every
worker). Saves both chains' weights, the unbroken one's first.
"""

import os
import pathlib
import sys

os.environ["TF_CONFIG"] = sys.argv[1]
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))  # the tests

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import test_resume_shuffle as t  # noqa: E402

tf.config.experimental.enable_op_determinism()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
output = pathlib.Path(sys.argv[3])
kwargs = t.VARIANTS[sys.argv[2]]
unbroken = t._fit(t._model(strategy=strategy), **kwargs)
resumed = t._resumed(output.with_suffix(""), strategy=strategy, **kwargs)
np.savez(output, *unbroken, *resumed)
