"""#21 item 15: sample collection under KERAS_BACKEND=jax, end to end.

The JAX half runs in a subprocess (tests/workers/jax_collect_check.py: the
Keras backend is fixed at import): fit with CollectSamples, then the
ensemble from the store. This TensorFlow process rebuilds the same
ensemble from that store, exports it, and serves it through the loaded
SavedModel: all three must give the same probabilities (float32 network,
float32 log-mean-exp: 1e-5 absolute is ~100 ulps of the probabilities).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb

pytest.importorskip("jax")
WORKER = Path(__file__).parent / "workers" / "jax_collect_check.py"


@pytest.mark.slow
def test_jax_fit_collects_samples_that_tensorflow_rebuilds_and_exports(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, str(WORKER), str(tmp_path)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    # 96 rows / 32 = 3 steps per epoch; samples at the ends of epochs 3..6.
    overall, logged = result.pop("overall")
    assert overall == pytest.approx(logged, rel=1e-4)  # Σ_v d_v·T_v / Σ d_v, read back
    assert result == {"samples": 4, "steps": [12, 15, 18, 21], "epochs": [3, 4, 5, 6],
                      "variables": ["dense_0/kernel", "dense_0/bias", "logits/kernel",
                                    "logits/bias"]}

    x = np.load(tmp_path / "x.npy")
    expected = np.load(tmp_path / "jax_probabilities.npy")
    ensemble = kb.PosteriorEnsemble.from_store(kb.SampleStore(tmp_path / "samples"))
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), expected, atol=1e-5)
    version_dir = ensemble.export(str(tmp_path / "saved_models" / "jax_run"))
    served = tf.saved_model.load(version_dir).signatures["serving_default"]
    np.testing.assert_allclose(served(inputs=tf.constant(x))["probabilities"].numpy(),
                               expected, atol=1e-5)
