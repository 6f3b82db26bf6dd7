"""Reloads the models that ``tests/test_layer_priors.py`` saved, in a fresh process.

A fresh process numbers a subclassed model's layers anew (their weights'
paths differ from the saving process's). Usage: python
layer_priors_reload.py DIR (each ``DIR/<case>.keras``); prints RESULT <json>
``{case: {"priors": [...], "minus_log_prior": float, "backend": str}}``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: layer_models

import keras  # noqa: E402

import layer_models  # noqa: E402  (registers the cases' custom classes)

result = {}
for path in sorted(Path(sys.argv[1]).glob("*.keras")):
    model = keras.saving.load_model(path)
    result[path.stem] = {"priors": layer_models.prior_configs(model),
                         "minus_log_prior": layer_models.minus_log_prior(model),
                         "flat": list(getattr(model, "flat_prior_weights", [])),
                         "backend": keras.backend.backend()}
print("RESULT " + json.dumps(result))
