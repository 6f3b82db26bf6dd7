"""Your own data as a dataset: four ``.npy`` files in one directory.

``keras-bnn train --dataset npy --data-dir D`` (and ``RunConfig(dataset="npy",
data_dir=D)``, ``keras_bnn.data.load("npy", data_dir=D)``) reads
:data:`NPY_FILES` from ``D``: ``x_train.npy``, ``y_train.npy``,
``x_test.npy`` and ``y_test.npy``, each one array saved with
``numpy.save``. The arrays are used as they are (no scaling: standardise
them before saving). The task follows ``y_train``'s dtype:

* integer labels ``[n]`` (or booleans): classification, ``num_classes`` =
  the largest label of both splits + 1, of which at least half must occur in
  the two files (a label such as 10**12, an id, a sentinel or an integer
  regression target, would make a head of that many classes: it is refused,
  naming its file and row); ``--likelihood bernoulli`` for 0/1 labels with
  one logit;
* floating-point targets ``[n]``: regression (the Gaussian likelihood).

Because the run records only the directory, every command that reads the
run again (``evaluate``, ``train --resume``, the chains of ``--chains K``,
``sweep``) reads the same files: keep them in place, unchanged. A run
records their SHA-256 (:func:`file_digests`), and ``evaluate`` and
``--resume`` refuse files that changed since (:func:`check_unchanged`).

Importing this module does not import TensorFlow.
"""

import hashlib
import os

import numpy as np

from keras_bnn.datasets.pipeline import make_dataset
from keras_bnn.validation import argument_error

#: The files of the "npy" dataset, in the order (x_train, y_train, x_test, y_test).
NPY_FILES = ("x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy")


def read_npy(path, argument):
    """The one array in the ``.npy`` file ``path``.

    Args:
        path: a file written by ``numpy.save``.
        argument: how errors name the file's argument (``"--x"``, ``"data_dir"``).

    Returns:
        The array (never unpickled: object arrays are refused).

    Raises:
        OSError: if the file cannot be read (the message names it).
        ValueError: for an object array, a file that is not ``.npy``, or an
            ``.npz`` archive.
    """
    try:
        loaded = np.load(path, allow_pickle=False)
    except OSError as error:
        reason = error.strerror or error
        raise type(error)(error.errno, f"{argument} {path!r} cannot be read ({reason})") from None
    except ValueError as error:  # an object array (it would need pickle) or not a .npy
        raise ValueError(f"{argument} {path!r} must be a .npy file of numbers ({error})") from None
    if not isinstance(loaded, np.ndarray):
        loaded.close()
        raise ValueError(f"{argument} must be a .npy file holding one array; {path!r} is a .npz "
                         "archive (save one array with numpy.save)")
    return loaded


def check_arrays(x, y, names=("x", "y")):
    """Checks training arrays: numeric arrays of one non-zero length.

    Args:
        x: inputs ``[n, ...]``.
        y: labels or targets ``[n]``.
        names: how the error names ``x`` and ``y`` (e.g. ``("--x", "--y")``).

    Returns:
        ``(x, y)`` as numpy arrays.

    Raises:
        ValueError: naming both arguments and their lengths if these differ,
            or the argument that is empty, a scalar, or not real numbers
            (complex ones are refused, not cut to their real part), or ``y``
            if it is not 1-D.
    """
    arrays = []
    for value, name in zip((x, y), names):
        array = np.asarray(value)
        if array.ndim == 0 or not len(array):
            raise argument_error(name, "be an array of one or more examples", value,
                                 got=f"shape {array.shape}")
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool) or (
                np.issubdtype(array.dtype, np.complexfloating)):
            raise argument_error(name, "hold numbers: integers, floats or bools (not complex)",
                                 value, got=f"dtype {array.dtype}")
        if name == names[1] and array.ndim != 1:
            raise argument_error(name, "be 1-D: one label or target per example", value,
                                 got=f"shape {array.shape}")
        arrays.append(array)
    if len(arrays[0]) != len(arrays[1]):
        raise ValueError(f"`{names[0]}` and `{names[1]}` must hold one example per row each; "
                         f"got {len(arrays[0])} rows in `{names[0]}` and {len(arrays[1])} "
                         f"in `{names[1]}`.")
    return tuple(arrays)


def _finite(array, name):
    """Refuses a NaN or infinite value in ``array`` (the file ``name``)."""
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise argument_error(name, "hold finite numbers within float32's range (|x| < 3.4e38)",
                             None, got=f"{int(np.sum(~np.isfinite(array)))} NaN, infinite or "
                             "larger values")


def _labels(y_train, y_test, names):
    """``(y_train, y_test, task, num_classes)``: the task by ``y_train``'s dtype."""
    if np.issubdtype(y_train.dtype, np.floating):
        if not np.issubdtype(y_test.dtype, np.floating):
            raise argument_error(names[3], f"hold float targets as {names[1]} does (a "
                                 "regression)", None, got=f"dtype {y_test.dtype}")
        return y_train.astype(np.float32), y_test.astype(np.float32), "regression", None
    if np.issubdtype(y_test.dtype, np.floating):
        raise argument_error(names[3], f"hold integer labels as {names[1]} does (a "
                             "classification)", None, got=f"dtype {y_test.dtype}")
    y_train, y_test, num_classes = class_labels(y_train, y_test, names[1], names[3])
    return y_train, y_test, "classification", num_classes


def class_labels(y_train, y_test, train_name, test_name):
    """Class labels as int64 and their number of classes K = the largest label + 1.

    Args:
        y_train, y_test: integer (or integral) labels [n].
        train_name, test_name: what the error calls them (file or argument names).

    Returns:
        ``(y_train, y_test, num_classes)``.

    Raises:
        ValueError: naming the array for a negative label or one beyond int64, or
            (naming the array and row of the largest label) when fewer than half of
            the classes 0..K-1 occur in the two (an id, a sentinel, or a regression
            target saved as integers).
    """
    for labels, name in ((y_train, train_name), (y_test, test_name)):
        lowest, highest = int(labels.min()), int(labels.max())  # before int64 wraps a uint64
        if lowest < 0 or highest > np.iinfo(np.int64).max:
            raise argument_error(name, "hold class labels 0, 1, ..., K-1", None,
                                 got=f"label {lowest if lowest < 0 else highest}")
    y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)
    highest = max(int(y_train.max()), int(y_test.max()))
    distinct = len(np.unique(np.concatenate([y_train, y_test])))
    if highest + 1 > 2 * distinct:
        name, labels = ((train_name, y_train) if y_train.max() == highest
                        else (test_name, y_test))
        raise argument_error(name, "hold class labels 0, 1, ..., K-1 (K = the largest label "
                             "+ 1), at least half of which occur in the two label arrays", None,
                             got=f"label {highest} in row {int(np.argmax(labels))}: "
                             f"{highest + 1} classes for {distinct} distinct labels (number "
                             f"them 0..{distinct - 1}, e.g. numpy.unique(y, return_inverse=True)"
                             "; save regression targets as floats)")
    return y_train, y_test, highest + 1


def _paths(data_dir):
    """The paths of :data:`NPY_FILES` in ``data_dir``, all there (else the error says which)."""
    if data_dir is None:
        raise argument_error("data_dir", f"name the directory holding {', '.join(NPY_FILES)} "
                             "for dataset 'npy' (--data-dir)", data_dir)
    missing = [name for name in NPY_FILES if not os.path.isfile(os.path.join(data_dir, name))]
    if missing:
        raise FileNotFoundError(f"dataset 'npy': {data_dir!r} lacks {', '.join(missing)} (it "
                                f"needs {', '.join(NPY_FILES)}, each saved with numpy.save)")
    return [os.path.join(data_dir, name) for name in NPY_FILES]


def npy_arrays(data_dir):
    """The four arrays of the "npy" dataset in ``data_dir`` (see the module).

    Args:
        data_dir: the directory holding :data:`NPY_FILES`.

    Returns:
        ``((x_train, y_train), (x_test, y_test), info)``: x float32; y int64
        labels or float32 targets; ``info`` has "name" ("npy"), "task"
        ("classification" or "regression"), "num_train", "num_test",
        "num_classes" (None for regression), "input_shape" and "data_dir".

    Raises:
        ValueError: if ``data_dir`` is None, or an array is not numeric,
            mismatched in length, not finite, of other example shapes in the
            two splits, or its labels are negative, of the other split's
            kind, or make a class count K (the largest label + 1) of which
            fewer than half occur.
        FileNotFoundError: if ``data_dir`` lacks a file (all missing ones named).
    """
    names = _paths(data_dir)
    x_train, y_train, x_test, y_test = (read_npy(path, "data_dir") for path in names)
    x_train, y_train = check_arrays(x_train, y_train, names[:2])
    x_test, y_test = check_arrays(x_test, y_test, names[2:])
    if x_test.shape[1:] != x_train.shape[1:]:
        raise argument_error(names[2], f"hold examples of {names[0]}'s shape "
                             f"{x_train.shape[1:]}", None, got=f"shape {x_test.shape[1:]}")
    with np.errstate(over="ignore"):  # a value beyond float32 is refused below
        x_train, x_test = x_train.astype(np.float32), x_test.astype(np.float32)
    for array, name in ((x_train, names[0]), (x_test, names[2]), (y_train, names[1]),
                        (y_test, names[3])):
        _finite(array, name)
    y_train, y_test, task, num_classes = _labels(y_train, y_test, names)
    info = {"name": "npy", "task": task, "num_train": len(y_train), "num_test": len(y_test),
            "num_classes": num_classes, "input_shape": tuple(x_train.shape[1:]),
            "data_dir": data_dir}
    return (x_train, y_train), (x_test, y_test), info


def load_npy(data_dir=None, batch_size=128, seed=0):
    """The "npy" dataset of ``data_dir`` as tf.data pipelines.

    Args:
        data_dir: the directory holding :data:`NPY_FILES`.
        batch_size: examples per batch.
        seed: seed of the per-epoch training shuffle, or None for one drawn
            at random (another order every call).

    Returns:
        ``(train_ds, test_ds, info)`` from :func:`npy_arrays`.

    Raises:
        ValueError, FileNotFoundError: as :func:`npy_arrays`.
    """
    (x_train, y_train), (x_test, y_test), info = npy_arrays(data_dir)
    return (make_dataset(x_train, y_train, batch_size, shuffle=True, seed=seed),
            make_dataset(x_test, y_test, batch_size), info)


def file_digests(data_dir):
    """The SHA-256 of each of :data:`NPY_FILES` in ``data_dir``.

    Args:
        data_dir: the directory holding the files.

    Returns:
        dict ``{file name: hex digest}``.

    Raises:
        ValueError, FileNotFoundError: as :func:`npy_arrays`, for no
            ``data_dir`` or a missing file.
    """
    digests = {}
    for name, path in zip(NPY_FILES, _paths(data_dir)):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digests[name] = digest.hexdigest()
    return digests


def check_unchanged(data_dir, recorded, run_dir):
    """Refuses files of ``data_dir`` that differ from those a run was trained on.

    Args:
        data_dir: the directory holding the files.
        recorded: the run's :func:`file_digests`, as recorded when it was trained.
        run_dir: the run's directory, for the message.

    Raises:
        ValueError: naming ``data_dir`` and each changed file.
    """
    changed = [name for name, digest in file_digests(data_dir).items()
               if recorded.get(name) != digest]
    if changed:
        raise argument_error("data_dir", f"hold the files the run in {run_dir!r} was trained "
                             "on (its data_files.json records their SHA-256): restore them, "
                             "or train a new run", data_dir,
                             got=f"{data_dir!r}, whose {', '.join(changed)} changed since")
