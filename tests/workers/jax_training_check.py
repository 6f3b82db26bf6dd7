"""Trains under KERAS_BACKEND=jax and prints JSON: parity runs and the DataParallel chain.

Usage: python jax_training_check.py OUT.json WEIGHTS.npz
(the test sets KERAS_BACKEND=jax and XLA_FLAGS=--xla_force_host_platform_device_count=2).

* ``parity``: for each sampler, :func:`training_runs.parity_run` (real
  noise, the same on both backends; fixed initial weights from WEIGHTS.npz): the epoch logs and
  the final weights, compared by the test with the same run under TensorFlow.
* ``nonfinite``: :func:`training_runs.nonfinite_run` (the NaN/Inf policy).
* ``data_parallel``: a 2-epoch ATMC chain (real noise) on one device and
  under ``keras.distribution.DataParallel`` over the two CPU devices.
"""

import json
import sys

import jax
import keras
import numpy as np

from training_runs import SAMPLERS, atmc_chain, nonfinite_run, parity_run

assert keras.backend.backend() == "jax", keras.backend.backend()
out, weights_path = sys.argv[1:3]
initial = [np.asarray(w) for w in np.load(weights_path).values()]
result = {"parity": {name: parity_run(name, initial) for name in SAMPLERS},
          "nonfinite": nonfinite_run()}

single = atmc_chain()
devices = jax.devices("cpu")
assert len(devices) == 2, devices
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
parallel = atmc_chain()
result["data_parallel"] = {
    "max_weight_difference": max(float(np.max(np.abs(np.subtract(a, b))))
                                 for a, b in zip(single["weights"], parallel["weights"])),
    "single_logs": single["logs"], "parallel_logs": parallel["logs"],
}
with open(out, "w") as handle:
    json.dump(result, handle)
