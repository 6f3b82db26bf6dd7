"""The posterior predictive of confident members: probabilities ≤ 1, entropies ≥ 0.

Seven members certain of class 0 (logits [60, 0, 0]): in float32,
logsumexp_s(log_softmax f_s) − log 7 rounds to +1.19e-7, and until
2026-11-29 ``PosteriorEnsemble.predict`` gave p̄_0 = 1.0000001 and
``predict_uncertainty`` a predictive entropy of −1.2e-7 and a log-probability
of +1.2e-7 (the closed forms: p̄ ≤ 1, H[p̄] ≥ 0, log p̄ ≤ 0). The same for
a JAX Bernoulli ensemble (7 members at logit 20: p̄ = 1.0000001).
"""

import keras
import numpy as np
import pytest

from keras_bnn import uncertainty


@pytest.mark.parametrize("likelihood, logits", [("categorical", [60.0, 0.0, 0.0]),
                                                ("bernoulli", [20.0]),
                                                ("bernoulli", [60.0])])
@pytest.mark.parametrize("members", [7, 47])
def test_certain_members_predict_at_most_one(likelihood, logits, members):
    outputs = keras.ops.convert_to_tensor(np.tile(np.float32(logits), (members, 4, 1)))
    probs = keras.ops.convert_to_numpy(uncertainty.predictive(outputs, likelihood))
    summary = {key: keras.ops.convert_to_numpy(value)
               for key, value in uncertainty.summary(outputs, likelihood).items()}
    assert probs.max() <= 1.0 and summary["probabilities"].max() <= 1.0
    assert summary["predictive_entropy"].min() >= 0.0
    # The closed form: every member says p = sigmoid/softmax(f) (≈ 1), so H[p̄] = E H[p_s] ≈ 0.
    np.testing.assert_allclose(probs.max(), 1.0, rtol=0, atol=2e-7)
    np.testing.assert_allclose(summary["predictive_entropy"], 0.0, atol=1e-5)
    if likelihood == "categorical":
        assert summary["log_probabilities"].max() <= 0.0
