"""The model builders as a user calls them: sizes computed with NumPy, a bad ``filters``."""

import numpy as np
import pytest

from keras_bnn import models

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
