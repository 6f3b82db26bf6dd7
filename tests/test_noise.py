"""The samplers' noise: backend.stateless_normal and the flat per-step draw."""

import keras
import numpy as np
import scipy.stats
from keras import ops

from keras_bnn import backend
from keras_bnn.samplers.noise import flat_noise


def test_stateless_normal_is_standard_normal_and_keyed():
    z = ops.convert_to_numpy(backend.stateless_normal((301, 333), 3, 2, 7, "float32"))
    assert z.shape == (301, 333) and z.dtype == np.float32
    assert abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.var() - 1) < 0.01
    assert scipy.stats.kstest(z.ravel(), "norm").pvalue > 1e-3
    again = ops.convert_to_numpy(backend.stateless_normal((301, 333), 3, 2, 7, "float32"))
    np.testing.assert_array_equal(z, again)
    for other in ((4, 2, 7), (3, 1, 7), (3, 2, 8)):  # seed, index, step
        assert not np.allclose(z, ops.convert_to_numpy(
            backend.stateless_normal((301, 333), *other, "float32")))
    scalar = ops.convert_to_numpy(backend.stateless_normal((), 3, 1, 5, "float64"))
    assert scalar.shape == () and scalar.dtype == np.float64 and np.isfinite(scalar)


def test_flat_noise_is_one_draw_cut_in_variable_order():
    variables = [keras.Variable(np.zeros((3, 4), np.float32)),
                 keras.Variable(np.zeros(5, np.float32)),
                 keras.Variable(np.zeros((1, 1), np.float32))]
    parts = [ops.convert_to_numpy(p) for p in flat_noise(variables, 7, 3)]
    assert [p.shape for p in parts] == [(3, 4), (5,), (1, 1)]
    flat = ops.convert_to_numpy(backend.stateless_normal((18,), 7, 0, 3, "float32"))
    np.testing.assert_array_equal(np.concatenate([p.ravel() for p in parts]), flat)
    (single,) = flat_noise(variables[:1], 7, 3)  # one variable: the draw itself
    np.testing.assert_array_equal(ops.convert_to_numpy(single).ravel(), ops.convert_to_numpy(
        backend.stateless_normal((12,), 7, 0, 3, "float32")))
