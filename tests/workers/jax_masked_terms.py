"""A masked tagger's per-timestep loss under KERAS_BACKEND=jax; prints ``RESULT <json>``.

Run by ``tests/test_fit_gaps.py`` (slow) with the path of an ``.npz`` of the
TensorFlow tagger's initial weights (Keras' initialisers draw other numbers
on each backend): ``Embedding(mask_zero=True)`` → ``LSTM(return_sequences)``
→ ``Dense``, whose Keras mask must reach the train step's predictions for
the step to count the loss's terms (the unmasked timesteps), as on
TensorFlow. Reports the ``TrainSizeWarning`` messages of a ``PyDataset``'s
fit with ``train_size`` = every position and = the tokens, and the logs and
weights of one epoch from the given weights.
"""

import json
import sys
from pathlib import Path

import keras
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/
from fit_helpers import Batches, tagged_sequences  # noqa: E402
from test_per_timestep_loss import tagger, train_size_warnings  # noqa: E402

assert keras.backend.backend() == "jax", keras.backend.backend()
x, tags = tagged_sequences()
tokens = int((x != 0).sum())
result = {"warnings": {
    str(n): train_size_warnings(tagger("categorical", n, recurrent=True), Batches(x, tags, 8),
                                epochs=1)
    for n in (x.size, tokens)}}
model = tagger("categorical", tokens, recurrent=True)
with np.load(sys.argv[1]) as start:
    model.set_weights([start[f"w{i}"] for i in range(len(start.files))])
history = model.fit(x, tags, batch_size=8, epochs=1, shuffle=False, verbose=0).history
result["nll"] = history["nll"][0]
result["evaluated"] = model.evaluate(x, tags, verbose=0, return_dict=True)["nll"]
result["weights"] = [w.tolist() for w in model.get_weights()]
print("RESULT " + json.dumps(result))
