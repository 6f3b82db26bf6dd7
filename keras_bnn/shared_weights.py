"""The sample store's shared file: the weights that samples do not change, written once.

A model sampled with a frozen part (a pretrained backbone under a sampled
head, a frozen ``BatchNormalization``'s moving statistics, an adapted
``Normalization``'s state) has non-trainable weights that are the same in
every sample. :class:`keras_bnn.SampleStore` writes them once per store, in
``shared.npz`` (entries ``w<i>``: weight ``i`` of ``model.weights``, and the
architecture fingerprint), created exclusively by the first append that has
any, so of concurrent appenders exactly one writes it and every other reads
that one. A sample file then holds its trainable weights and each
non-trainable weight whose bytes differ from the shared copy (an unfrozen
``BatchNormalization``'s statistics, which do change), and names the
weights it takes from the shared file (entry ``shared``) and that file's
digest (entry ``shared_digest``), so that a sample is never completed from
another file than the one it was written against.
"""

import hashlib
import os
import re
import zipfile

import numpy as np

from keras_bnn import durable

SHARED_FILE = "shared.npz"
INDICES = "shared"  # a sample's entry: the weights it takes from the shared file
DIGEST = "shared_digest"  # a sample's entry: the shared file's digest
_FINGERPRINT = "fingerprint"
WEIGHT_ENTRY = re.compile(r"^w(0|[1-9][0-9]*)$")  # a file's entry w<i>: weight i


def non_trainable_indices(model):
    """The positions in ``model.weights`` of the weights ``fit`` does not change.

    Args:
        model: a built Keras model.

    Returns:
        list of int: the weights not in ``model.trainable_weights`` (those of
        frozen layers, a BatchNormalization's moving statistics, an adapted
        Normalization's state).
    """
    trainable = {id(w) for w in model.trainable_weights}
    return [i for i, w in enumerate(model.weights) if id(w) not in trainable]


def digest(arrays):
    """sha256 over the shared weights: each index, dtype, shape and bytes.

    Args:
        arrays: dict ``{index: numpy array}``.

    Returns:
        str, hex digest.
    """
    hasher = hashlib.sha256()
    for index in sorted(arrays):
        array = np.ascontiguousarray(arrays[index])
        hasher.update(f"{index}:{array.dtype.str}:{array.shape};".encode())
        hasher.update(memoryview(array).cast("B"))
    return hasher.hexdigest()


def same_bytes(a, b):
    """Whether two arrays are equal bit for bit (``-0.0`` differs from ``0.0``)."""
    return a is b or (a.dtype == b.dtype and a.shape == b.shape
                      and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def publish(directory, arrays, fingerprint):
    """Creates the shared file of ``arrays``, unless a writer created it first.

    Args:
        directory: the store's directory.
        arrays: dict ``{index: numpy array}``, the model's non-trainable weights.
        fingerprint: the store's architecture fingerprint.

    Returns:
        True if this call created the file, False if it existed (unchanged).
    """
    entries = {f"w{i}": array for i, array in arrays.items()}
    entries[_FINGERPRINT] = np.array(fingerprint)
    return durable.create_exclusive(os.path.join(directory, SHARED_FILE),
                                    lambda handle: np.savez(handle, **entries))


def check_finite(arrays, what):
    """Refuses weights holding NaN or Inf (a sample, or the shared file, must be finite).

    Args:
        arrays: dict ``{entry name: numpy array}``.
        what: the owner of the arrays, for the message.

    Raises:
        ValueError: naming ``what`` and the entry.
    """
    for name, array in arrays.items():
        if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
            raise ValueError(f"{what}: {name} holds non-finite values (NaN/Inf); a sample "
                             "must be finite.")


def read(path, fingerprint, expected):
    """Loads and checks a shared file.

    Args:
        path: the shared file.
        fingerprint: the store's architecture fingerprint.
        expected: the store's ``[shape, dtype]`` per weight.

    Returns:
        ``(arrays, digest)``: dict ``{index: read-only numpy array}`` and
        :func:`digest` of it.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: naming ``path``, for a truncated or corrupt file, one of
            another architecture, or weights of the wrong shape or not finite.
    """
    try:
        with durable.open_regular(path) as handle, np.load(handle, allow_pickle=False) as data:
            names = set(data.files)
            indices = {n: WEIGHT_ENTRY.match(n) for n in names - {_FINGERPRINT}}
            if _FINGERPRINT not in names or not all(indices.values()):
                raise ValueError(f"unexpected entries {sorted(names)}")
            stored_fingerprint = str(data[_FINGERPRINT])
            arrays = {int(match.group(1)): data[name] for name, match in indices.items()}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"the shared weights file {path} is corrupt, truncated or not a "
                         f"shared weights file ({error}).") from None
    if stored_fingerprint != fingerprint:
        raise ValueError(f"the shared weights file {path} was written by a model of another "
                         "architecture than the store's (its fingerprint differs).")
    for index, array in arrays.items():
        if index >= len(expected) or [list(array.shape), str(array.dtype)] != expected[index]:
            wanted = expected[index] if index < len(expected) else "no such weight"
            raise ValueError(f"the shared weights file {path} does not match the store's "
                             f"architecture (w{index}: {[list(array.shape), str(array.dtype)]}, "
                             f"expected {wanted}).")
    check_finite({f"w{i}": a for i, a in arrays.items()}, f"the shared weights file {path}")
    for array in arrays.values():
        array.flags.writeable = False  # one array, handed to every sample that reads it
    return arrays, digest(arrays)


class SharedFile:
    """A store's shared file: created once, read once per version, cached.

    Args:
        directory: the store's directory.
    """

    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, SHARED_FILE)
        self._cache = None  # (the file's identity, (arrays, digest))

    def read(self, architecture):
        """``(arrays, digest)`` of the shared file (:func:`read`), cached while
        the file is the same one.

        Args:
            architecture: the store's manifest (fingerprint, weights).

        Raises:
            FileNotFoundError: if there is no shared file.
            ValueError: naming the store and the file, if it is corrupt or of
                another architecture.
        """
        status = os.stat(self.path)
        key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
        if self._cache is None or self._cache[0] != key:
            try:
                loaded = read(self.path, architecture["fingerprint"], architecture["weights"])
            except ValueError as error:
                raise ValueError(f"SampleStore {self.directory!r}: {error}") from None
            self._cache = (key, loaded)
        return self._cache[1]

    def sample_entries(self, weights, candidates, architecture):
        """The weight entries of a new sample file, the shared file created first if absent.

        Args:
            weights: the sample's numpy arrays, in ``model.weights`` order.
            candidates: the non-trainable weights' indices
                (:func:`non_trainable_indices`); the shared file is created
                from their values if it does not exist.
            architecture: the store's manifest.

        Returns:
            dict of npz entries: ``w<i>`` for the trainable weights and each
            candidate whose bytes differ from the shared copy, and, when some
            are taken from the shared file, ``shared`` (their indices) and
            ``shared_digest``.
        """
        entries = {f"w{i}": array for i, array in enumerate(weights)}
        if not candidates:
            return entries
        if not os.path.exists(self.path):
            publish(self.directory, {i: weights[i] for i in candidates},
                    architecture["fingerprint"])
        shared, shared_digest = self.read(architecture)
        taken = [i for i in candidates if i in shared and same_bytes(weights[i], shared[i])]
        for i in taken:
            del entries[f"w{i}"]
        if taken:
            entries[INDICES] = np.array(taken, dtype=np.int64)
            entries[DIGEST] = np.array(shared_digest)
        return entries

    def taken(self, sample, indices, sample_digest, architecture):
        """The weights ``indices`` of sample file ``sample`` from the shared file.

        Args:
            sample: the sample file's path (for messages).
            indices: the indices it takes from the shared file.
            sample_digest: the digest of the shared file it was written against.
            architecture: the store's manifest.

        Returns:
            dict ``{index: read-only numpy array}``.

        Raises:
            ValueError: naming the sample file, if the shared file is missing,
                corrupt, or not the one the sample was written against.
        """
        try:
            shared, shared_digest = self.read(architecture)
        except FileNotFoundError:
            raise ValueError(f"SampleStore {self.directory!r}: sample file {sample} takes "
                             f"{len(indices)} weights from {SHARED_FILE}, which is missing "
                             "(it was deleted, or the sample copied from another "
                             "store).") from None
        if shared_digest != sample_digest or not set(indices) <= set(shared):
            raise ValueError(f"SampleStore {self.directory!r}: sample file {sample} was "
                             f"written against another {SHARED_FILE} than this store's (its "
                             "digest differs): the file was replaced, or the sample copied "
                             "from another store.")
        return {i: shared[i] for i in indices}


def check_indices(indices, own):
    """Checks a sample's ``shared`` entry against the weights it holds.

    Args:
        indices: the entry (numpy array), or None for a sample without one
            (it holds every weight).
        own: set of the indices of the weights the sample holds.

    Returns:
        sorted list of int: the indices taken from the shared file.

    Raises:
        ValueError: unless ``indices`` is a 1-D integer array of distinct
            indices that, with ``own``, number the weights 0, 1, ... once each.
    """
    if indices is None:
        taken = []
    elif indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(f"its {INDICES!r} entry is not a list of weight indices")
    else:
        taken = sorted(int(i) for i in indices)
    numbered = set(taken) | own
    if len(set(taken)) != len(taken) or own & set(taken) or numbered != set(range(len(numbered))):
        raise ValueError(f"its weight entries and its {INDICES!r} entry do not number the "
                         "weights 0, 1, ... once each")
    return taken
