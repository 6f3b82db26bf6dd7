"""Small Fashion-MNIST-shaped IDX files for tests that must run without the real data."""

import gzip

import numpy as np

from keras_bnn import fashion_mnist as fm


def write_idx(path, array):
    """Writes ``array`` as a gzipped unsigned-byte IDX file."""
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def write_set(directory, num_train=20, num_test=6, seed=0, learnable=False):
    """Writes the four files of a random set into ``directory``.

    With ``learnable`` the images of class k are bright in row band k (plus
    noise), so a model can learn them in a few epochs.

    Returns:
        The dict of written arrays (``x_train``, ``y_train``, ``x_test``, ``y_test``).
    """
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    data = {}
    for split, n in (("train", num_train), ("test", num_test)):
        labels = rng.integers(0, 10, n)
        images = rng.integers(0, 256 if not learnable else 60, (n, 28, 28))
        if learnable:
            for i, label in enumerate(labels):
                images[i, 2 * label + 4:2 * label + 6] = 255
        data[f"x_{split}"], data[f"y_{split}"] = images, labels
    for key, name in fm.FILES.items():
        write_idx(directory / name, data[key])
    return data
