"""On-disk, append-only store of posterior samples."""

import hashlib
import json
import os
import tempfile
import time

import keras
import numpy as np

from keras_bnn.likelihoods import from_loss

_MANIFEST = "store.json"
_PREFIX = "sample-"
_SUFFIX = ".npz"


def atomic_write(path, write):
    """Writes a file through ``write(fileobj)`` to a temp name, fsyncs, renames.

    A crash leaves either the old state or the complete new file, never a
    partial one; leftover temp files start with ``.tmp-`` and are ignored.
    The file gets the usual permissions (0666 less the umask), not
    ``mkstemp``'s owner-only 0600, so a server running as another user can
    read exports and samples.
    """
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def architecture_of(model):
    """Describes a model's architecture for the store.

    Args:
        model: a built Keras model.

    Returns:
        dict with ``fingerprint`` (sha256 over the layer classes and the
        ordered weight shapes/dtypes: names are left out, since Keras numbers
        them per session), ``weights`` (``[shape, dtype]`` per weight) and
        ``model`` (the serialized model, used to rebuild it).
    """
    weights = [[list(w.shape), str(w.dtype)] for w in model.weights]
    layers = [type(layer).__name__ for layer in model.layers]
    digest = hashlib.sha256(json.dumps([layers, weights]).encode()).hexdigest()
    return {
        "fingerprint": digest,
        "weights": weights,
        "model": keras.saving.serialize_keras_object(model),
    }


class Sample:
    """One stored posterior sample: its weights and metadata.

    Attributes:
        index: position in the store.
        weights: list of numpy arrays, in ``model.weights`` order.
        metadata: dict (``step``, ``epoch``, ``temperature``, ``time``, ...).
    """

    def __init__(self, index, weights, metadata):
        self.index = index
        self.weights = weights
        self.metadata = metadata

    def __repr__(self):
        return f"Sample(index={self.index}, metadata={self.metadata})"


class SampleStore:
    """An append-only directory of posterior samples.

    Layout: ``store.json`` (architecture of the model that wrote the store)
    and one ``sample-NNNNNN.npz`` per sample (weights ``w0, w1, ...`` in
    ``model.weights`` order, plus its metadata as JSON). Every file is written
    to a temporary name, fsynced and renamed, so a crash mid-write never
    leaves a partial sample. Iteration loads one sample at a time, so memory
    does not grow with the number of samples.

    Args:
        path: directory (created if missing).

    Raises:
        ValueError: if ``path`` exists and is not a directory.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"`path` {self.path!r} exists and is not a directory.")
        os.makedirs(self.path, exist_ok=True)

    # -------------------------------------------------------------- manifest
    @property
    def architecture(self):
        """The stored architecture dict, or ``None`` for an empty new store."""
        manifest = os.path.join(self.path, _MANIFEST)
        if not os.path.exists(manifest):
            return None
        with open(manifest) as handle:
            return json.load(handle)

    def check_model(self, model):
        """Binds the store to ``model``'s architecture, or checks it matches.

        Args:
            model: a built Keras model.

        Raises:
            ValueError: if the store holds samples of another architecture.
        """
        mine = architecture_of(model)
        stored = self.architecture
        if stored is None:
            atomic_write(
                os.path.join(self.path, _MANIFEST),
                lambda handle: handle.write(json.dumps(mine).encode()),
            )
        elif stored["fingerprint"] != mine["fingerprint"]:
            raise ValueError(
                f"SampleStore {self.path!r} holds samples of another architecture "
                f"({len(stored['weights'])} weights, first shapes "
                f"{[w[0] for w in stored['weights'][:3]]}); the model has "
                f"{len(mine['weights'])} weights, first shapes "
                f"{[w[0] for w in mine['weights'][:3]]}. Use a new store path."
            )

    def likelihood(self):
        """The likelihood implied by the loss the storing model was compiled with.

        Returns:
            ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``
            (:func:`keras_bnn.likelihoods.from_loss`), or None when the store
            is empty, the model was not compiled or its loss is not one of
            those.
        """
        stored = self.architecture
        compiled = (stored or {}).get("model", {}).get("compile_config") or {}
        return from_loss(compiled.get("loss"))

    def build_model(self):
        """Rebuilds the model that wrote the store (weights not loaded).

        Returns:
            A Keras model.

        Raises:
            ValueError: if the store is empty.
        """
        stored = self.architecture
        if stored is None:
            raise ValueError(f"SampleStore {self.path!r} is empty: no architecture yet.")
        return keras.saving.deserialize_keras_object(stored["model"])

    # ---------------------------------------------------------------- samples
    def _files(self):
        names = sorted(
            name
            for name in os.listdir(self.path)
            if name.startswith(_PREFIX) and name.endswith(_SUFFIX)
        )
        return [os.path.join(self.path, name) for name in names]

    def __len__(self):
        return len(self._files())

    def append(self, model, **metadata):
        """Writes ``model``'s current weights as a new sample.

        Args:
            model: the model being sampled.
            **metadata: JSON-serialisable values (``step``, ``epoch``,
                ``temperature``, ...); ``time`` is added.

        Returns:
            The new sample's index.

        Raises:
            ValueError: if the model's architecture differs from the store's.
        """
        self.check_model(model)
        files = self._files()
        index = int(os.path.basename(files[-1])[len(_PREFIX):-len(_SUFFIX)]) + 1 if files else 0
        metadata = dict(metadata, time=time.time())
        arrays = {f"w{i}": np.asarray(w) for i, w in enumerate(model.get_weights())}
        arrays["metadata"] = np.array(json.dumps(metadata))
        atomic_write(
            os.path.join(self.path, f"{_PREFIX}{index:06d}{_SUFFIX}"),
            lambda handle: np.savez(handle, **arrays),
        )
        return index

    def _load(self, index, path):
        with np.load(path) as data:
            count = len(data.files) - 1
            weights = [data[f"w{i}"] for i in range(count)]
            metadata = json.loads(str(data["metadata"]))
        return Sample(index, weights, metadata)

    def __getitem__(self, index):
        files = self._files()
        return self._load(range(len(files))[index], files[index])

    def __iter__(self):
        for index, path in enumerate(self._files()):
            yield self._load(index, path)

    def metadata(self):
        """Metadata of every sample, without loading weights.

        Returns:
            List of dicts.
        """
        result = []
        for path in self._files():
            with np.load(path) as data:
                result.append(json.loads(str(data["metadata"])))
        return result

    def __repr__(self):
        return f"SampleStore({self.path!r}, samples={len(self)})"
