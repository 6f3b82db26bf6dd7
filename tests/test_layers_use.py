"""Layers and builders as a user calls them: NumPy sizes, a bad ``filters``, mixed_float16."""

import keras
import numpy as np
import pytest

from keras_bnn import layers, models

# ``num_classes = y.max() + 1`` and sizes read from arrays are NumPy integers,
# which the builders' checks accept and Keras's own layers refuse.
N = np.int64

BUILDERS = {
    "mlp": (lambda: models.mlp((N(4),), N(3), hidden=[N(8)]), (2, 4)),
    "cnn": (lambda: models.cnn((8, 8, 1), N(3), filters=(N(4),), kernel_size=N(3), dense=N(8)),
            (2, 8, 8, 1)),
    "cnn_lstm": (lambda: models.cnn_lstm(N(50), N(3), sequence_length=N(12),
                                         embedding_dim=N(4), filters=N(4), kernel_size=N(3),
                                         pool_size=N(2), lstm_units=N(3)), (2, 12)),
    "resnet_pp": (lambda: models.resnet_pp((8, 8, 1), N(3), depth=N(11), width=N(2)),
                  (2, 8, 8, 1)),
    "resnet20_frn": (lambda: models.resnet20_frn((8, 8, 1), N(3), width=N(2), depth=N(8)),
                     (2, 8, 8, 1)),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builders_take_numpy_integer_sizes(name):
    build, input_shape = BUILDERS[name]
    model = build()
    x = np.ones(input_shape, "int32" if name == "cnn_lstm" else "float32")
    assert tuple(model(x).shape) == (2, 3)
    head = model.layers[-1].get_config()
    assert type(head.get("units", head.get("filters"))) is int


def test_cnn_refuses_an_int_as_filters_naming_it():
    with pytest.raises(ValueError, match=r"cnn: `filters` must be a tuple or list"):
        models.cnn((28, 28, 1), 10, filters=32)


def test_frn_under_mixed_float16_normalises_activations_above_256(policy):
    # FRN is scale-free: y = x/sqrt(mean(x²) + ε) (γ = 1, β = 0). Activations of
    # RMS 300 (a stem convolution on raw 0-255 pixels) have x² above float16's
    # largest value 65 504: ν² was Inf there and the output 0 (β) everywhere.
    x = (np.random.default_rng(0).normal(size=(2, 4, 4, 3)) * 300.0).astype("float32")
    expected = keras.ops.convert_to_numpy(layers.FRN(use_tlu=False)(x))
    policy("mixed_float16")
    frn = layers.FRN(use_tlu=False)
    outputs = frn(x)
    assert keras.backend.standardize_dtype(outputs.dtype) == "float16"
    # Rounding x to float16 moves y by <= 2·2⁻¹¹·|y| (numerator and ν), and
    # rounding y another 2⁻¹¹·|y|.
    tolerance = 3 * 2.0**-11 * np.abs(expected).max()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs).astype("float32"), expected,
                               rtol=0, atol=tolerance)
