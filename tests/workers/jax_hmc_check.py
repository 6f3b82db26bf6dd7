"""Runs the HMC runs of hmc_runs.py under KERAS_BACKEND=jax; writes them as JSON.

Usage: python jax_hmc_check.py OUT.json quick
       python jax_hmc_check.py OUT.json breast_cancer T [T ...]
(the test sets KERAS_BACKEND=jax and two host devices; tests/ is put on the path for gold_standard).
"""

import json
import sys
from pathlib import Path

import jax
import keras
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import hmc_runs  # noqa: E402

assert keras.backend.backend() == "jax", keras.backend.backend()
out, mode, *temperatures = sys.argv[1:]
if mode == "quick":
    result = {"one_transition": hmc_runs.one_transition(),
              "gaussian_moments": {str(t): hmc_runs.gaussian_moments(t) for t in (1.0, 0.1)},
              "rejected": hmc_runs.rejected_run(),
              "divergent": hmc_runs.divergent_run(),
              "adaptation": hmc_runs.adaptation_run(),
              "nonfinite": hmc_runs.nonfinite_run(jit_compile=True),
              "single_device": hmc_runs.blr_chain()}
    devices = jax.devices("cpu")
    assert len(devices) == 2, devices
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
    result["data_parallel"] = hmc_runs.blr_chain()  # last: the distribution is global
else:
    result = {t: hmc_runs.breast_cancer_chain(float(t)) for t in temperatures}
with open(out, "w") as handle:
    json.dump(result, handle, default=lambda a: np.asarray(a).tolist())
