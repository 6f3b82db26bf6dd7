"""PosteriorEnsemble's default member loop under KERAS_BACKEND=jax; prints RESULT <json>.

Usage: python jax_member_loop.py (tests/test_ensemble_member_loop.py sets
KERAS_BACKEND=jax). For the test's ensembles of 3 and 300 members (the
default ``member_loop="auto"``): the loop used and the member traces of
the first ``predict``; and the largest difference of the 300-member
predictions from those of ``member_loop="vectorized_map"``.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from test_ensemble_member_loop import LARGE, X, _ensemble, _predict_traces  # noqa: E402

result = {"loop_used": {}, "traces": {}}
for count in (3, LARGE):
    ensemble = _ensemble(count)
    result["loop_used"][count] = ensemble.loop_used
    result["traces"][count] = _predict_traces(ensemble)
vectorized = _ensemble(LARGE, member_loop="vectorized_map")
result["max_difference"] = float(np.abs(ensemble.predict(X, verbose=0)
                                        - vectorized.predict(X, verbose=0)).max())
print("RESULT " + json.dumps(result))
