"""Fashion-MNIST from local IDX files: no download, ever.

Fashion-MNIST (Xiao et al. 2017) has 60 000 training and 10 000 test
grey-scale images of 28×28 pixels in 10 classes. The four gzipped IDX files
keep the names Keras' ``keras.datasets.fashion_mnist`` caches them under:

    train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
    t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz

Each may also be stored ungzipped, under the same name without ``.gz``
(as torchvision and Kaggle keep them); the ``.gz`` file is read when both are
there. All four are read from one place, the first, in this order, that holds
all four: ``data_dir`` (when given; it must exist, so that a misspelt directory
is not passed over for another copy), Keras' cache
``$KERAS_HOME/datasets/fashion-mnist/`` (when ``KERAS_HOME`` is set: Keras
caches there then), Keras' default cache ``~/.keras/datasets/fashion-mnist/``
and Debian's package
``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist/``). A
``data_dir`` that lacks some of them is passed over with a
:class:`DataDirWarning` that names the files it lacks and the place read
instead; a set split between two places is never mixed. When no place holds
all four, :class:`FileNotFoundError` lists the places searched and how to get
the files; nothing is downloaded (a download without internet hangs for
minutes).

Importing this module does not import TensorFlow.
"""

import gzip
import math
import os
import warnings

import numpy as np

from keras_bnn.datasets.pipeline import draw_seed, make_dataset
from keras_bnn.validation import argument_error, check_fraction

FILES = {
    "x_train": "train-images-idx3-ubyte.gz",
    "y_train": "train-labels-idx1-ubyte.gz",
    "x_test": "t10k-images-idx3-ubyte.gz",
    "y_test": "t10k-labels-idx1-ubyte.gz",
}
KERAS_CACHE = os.path.join("~", ".keras", "datasets", "fashion-mnist")
DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot")
_IDX_UBYTE = 0x08  # the IDX type code of unsigned bytes


class DataDirWarning(UserWarning):
    """A ``data_dir`` was given that lacks some of the four files: they were
    all read from another place (named in the message)."""


def read_idx(path):
    """Reads one IDX file of unsigned bytes (LeCun's MNIST format), gzipped
    when its name ends in ``.gz``.

    Header: two zero bytes, the type code (0x08, unsigned byte), the number
    of dimensions k, then k big-endian uint32 sizes; the data follow in C
    order.

    Args:
        path: the file (``.gz``: gzipped; any other name: not).

    Returns:
        uint8 array of the stored shape.

    Raises:
        ValueError: naming the file, if it is not a (gzipped) unsigned-byte
            IDX file or its data do not match its header.
    """
    try:
        with (gzip.open if os.fspath(path).endswith(".gz") else open)(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as error:
        raise ValueError(f"{path} is not a gzipped IDX file ({error}).") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != _IDX_UBYTE:
        raise ValueError(f"{path} is not an unsigned-byte IDX file (bad magic number).")
    rank = raw[3]
    header = 4 + 4 * rank
    if rank == 0 or len(raw) < header:
        raise ValueError(f"{path} is not an unsigned-byte IDX file (bad header).")
    shape = tuple(int(v) for v in np.frombuffer(raw[4:header], dtype=">u4"))
    if len(raw) - header != math.prod(shape):  # Python ints: no int64 overflow
        raise ValueError(f"{path}: {len(raw) - header} data bytes, but its header says "
                         f"shape {shape} ({math.prod(shape)} bytes).")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def search_path(data_dir=None):
    """The directories searched for the files, in order.

    Args:
        data_dir: a directory to try first, or None.

    Returns:
        List of absolute paths: ``data_dir``, Keras' cache under
        ``$KERAS_HOME`` (where Keras caches when that variable is set),
        :data:`KERAS_CACHE` and :data:`DEBIAN_DIR`.
    """
    places = [] if data_dir is None else [os.fspath(data_dir)]
    if "KERAS_HOME" in os.environ:  # as keras.datasets.fashion_mnist.load_data reads it
        places.append(os.path.join(os.environ["KERAS_HOME"], "datasets", "fashion-mnist"))
    return [os.path.abspath(os.path.expanduser(p)) for p in (*places, KERAS_CACHE, DEBIAN_DIR)]


def files_in(place):
    """The four files in one directory, each gzipped or else ungzipped.

    Args:
        place: the directory.

    Returns:
        ``(paths, missing)``: ``paths`` maps "x_train", "y_train", "x_test",
        "y_test" to the file found (the ``.gz`` one when both are there);
        ``missing`` lists, in that order, the ``.gz`` names of those found
        neither way.
    """
    paths, missing = {}, []
    for key, name in FILES.items():
        candidates = (os.path.join(place, name), os.path.join(place, name[:-len(".gz")]))
        path = next((p for p in candidates if os.path.isfile(p)), None)
        if path is None:
            missing.append(name)
        else:
            paths[key] = path
    return paths, missing


def find_files(data_dir=None):
    """The first directory of :func:`search_path` that holds all four files.

    Warns with :class:`DataDirWarning` when ``data_dir`` lacks some of them
    and another place is read.

    Args:
        data_dir: a directory to try first, or None.

    Returns:
        The absolute path of that directory (every file is read from it).

    Raises:
        FileNotFoundError: for a ``data_dir`` that does not exist (named), or
            listing every place searched, and how to get the files.
    """
    remedy = ("Get them with Debian's package (`apt-get install dataset-fashion-mnist`, into "
              f"{DEBIAN_DIR}), or on a machine with internet run "
              "`python -c \"import keras; keras.datasets.fashion_mnist.load_data()\"` and copy "
              f"{KERAS_CACHE} here, or pass data_dir= (--data-dir) a directory holding them. "
              "Nothing is downloaded.")
    if data_dir is not None and not os.path.isdir(os.path.expanduser(os.fspath(data_dir))):
        raise FileNotFoundError(f"Fashion-MNIST: `data_dir` {os.fspath(data_dir)!r} is not a "
                                "directory (it is not passed over for another copy of the "
                                f"files). {remedy}")
    places = search_path(data_dir)
    lacking = ("" if data_dir is None else f"`data_dir` {places[0]!r} lacks "
               + ", ".join(files_in(places[0])[1]) + " (each may also be stored without .gz)")
    for place in places:
        if not files_in(place)[1]:
            if data_dir is not None and place != places[0]:
                warnings.warn(f"Fashion-MNIST: {lacking}; all four files were read from "
                              f"{place!r} instead.", DataDirWarning, stacklevel=2)
            return place
    raise FileNotFoundError("Fashion-MNIST: no directory holds all four files ("
                            + ", ".join(FILES.values()) + ", each gzipped or not). Searched: "
                            + "; ".join(places) + ". " + (lacking and lacking + ". ") + remedy)


def fashion_mnist_arrays(data_dir=None, validation_split=0.0, seed=0):
    """Fashion-MNIST as arrays, pixels scaled to [0, 1].

    Args:
        data_dir: directory tried first (see the module docstring).
        validation_split: fraction in [0, 1) of the training images held out
            as a validation set: the last ``round(f·60000)`` of a permutation
            of the training split keyed on ``seed``. The test split is never
            touched.
        seed: seed of that permutation: an int in [0, 2**31 - 1], or None
            for one drawn at random (other held-out images at every call;
            ``info["seed"]`` records it).

    Returns:
        ``((x_train, y_train), (x_val, y_val), (x_test, y_test), info)``:
        x float32 ``[n, 28, 28, 1]`` in [0, 1], y int64 ``[n]``; the
        validation pair is empty arrays when ``validation_split`` is 0.
        ``info`` has "name", "task", "num_train", "num_validation",
        "num_test", "num_classes", "input_shape", "class_names",
        "data_dir" (the directory read) and "seed" (the seed used).

    Raises:
        FileNotFoundError: see :func:`find_files` (which may also warn
            with :class:`DataDirWarning`).
        ValueError: for a ``validation_split`` outside [0, 1) or that holds
            out no image or every one, a bad ``seed``, a damaged file (named),
            labels outside 0..9, or a split without images.
    """
    if validation_split != 0:
        try:
            check_fraction(validation_split, "validation_split")
        except ValueError:
            raise argument_error("validation_split", "be 0 or a number in (0, 1)",
                                 validation_split, "fashion_mnist_arrays") from None
    seed = draw_seed(seed, "fashion_mnist_arrays", highest=2**31 - 1)
    place = find_files(data_dir)
    paths = files_in(place)[0]
    arrays = {key: read_idx(path) for key, path in paths.items()}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 3 or x.shape[1:] != (28, 28) or y.shape != (len(x),) or not len(x):
            raise argument_error("data_dir", f"hold 28x28 images with one label each, at "
                                 f"least one ({split} split)", place,
                                 got=f"images {x.shape} and labels {y.shape}")
        if y.size and y.max() >= len(CLASS_NAMES):
            raise argument_error("data_dir", f"hold class labels 0..{len(CLASS_NAMES) - 1} "
                                 f"({split} split)", place, got=f"label {int(y.max())} in "
                                 + paths[f"y_{split}"])
    x_train, y_train = arrays["x_train"], arrays["y_train"].astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x_train))
    held = int(round(validation_split * len(x_train)))
    if validation_split and not 0 < held < len(x_train):
        raise argument_error("validation_split", f"hold out between 1 and {len(x_train) - 1} "
                             f"of the {len(x_train)} training images (round(validation_split"
                             f" * {len(x_train)}) of them) or be 0", validation_split,
                             "fashion_mnist_arrays", got=f"{validation_split!r} ({held} images)")
    train, val = order[:len(order) - held], order[len(order) - held:]

    def scaled(x):
        return (x.astype(np.float32) / 255.0)[..., None]

    info = {"name": "fashion_mnist", "task": "classification", "num_train": len(train),
            "num_validation": held, "num_test": len(arrays["x_test"]), "num_classes": 10,
            "input_shape": (28, 28, 1), "class_names": CLASS_NAMES, "data_dir": place,
            "seed": seed}
    return ((scaled(x_train[train]), y_train[train]),
            (scaled(x_train[val]), y_train[val]),
            (scaled(arrays["x_test"]), arrays["y_test"].astype(np.int64)), info)


def load_fashion_mnist(batch_size=128, validation_split=0.0, seed=0, data_dir=None):
    """Fashion-MNIST as batched ``tf.data`` pipelines (``keras_bnn.data.load``).

    Args:
        batch_size: examples per batch.
        validation_split: fraction in [0, 1) of the training images held out
            (see :func:`fashion_mnist_arrays`); the training pipeline never
            sees them.
        seed: seed of the validation permutation and of the per-epoch
            training shuffle, or None for one drawn at random for the call
            (both use it; ``info["seed"]`` records it).
        data_dir: directory tried first (module docstring).

    Returns:
        ``(train_ds, test_ds, info)``: ``info`` as in
        :func:`fashion_mnist_arrays`, plus ``"validation_ds"``: the held-out
        images as a pipeline in a fixed order (None when
        ``validation_split`` is 0).

    Raises:
        FileNotFoundError: see :func:`find_files`.
        ValueError: for a bad ``validation_split``, ``seed`` or ``batch_size``.
    """
    (x, y), (x_val, y_val), (x_test, y_test), info = fashion_mnist_arrays(
        data_dir, validation_split=validation_split, seed=seed)
    info["validation_ds"] = (make_dataset(x_val, y_val, batch_size) if len(y_val) else None)
    return (make_dataset(x, y, batch_size, shuffle=True, seed=info["seed"]),
            make_dataset(x_test, y_test, batch_size), info)
