"""HMC's potential under a Keras mask with KERAS_BACKEND=jax; prints ``RESULT <json>``.

Run by ``tests/test_small_gaps.py`` (slow): the tagger of
:func:`test_small_gaps.masked_hmc_case` (``Embedding(mask_zero=True)`` →
``LSTM`` → per-timestep logits), HMC's potential at its weights, one
full-batch transition's logs, and the masked and unmasked NLL by hand.
"""

import json
import sys
from pathlib import Path

import keras

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/
from test_small_gaps import masked_hmc_case, masked_hmc_result  # noqa: E402

assert keras.backend.backend() == "jax", keras.backend.backend()
model, x, tags, by_hand = masked_hmc_case()
print("RESULT " + json.dumps(dict(masked_hmc_result(model, x, tags), by_hand=by_hand)))
