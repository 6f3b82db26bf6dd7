"""On-disk, append-only store of posterior samples."""

import itertools
import json
import os
import re
import time
import zipfile

import keras
import numpy as np

from keras_bnn import backend, durable
from keras_bnn import shared_weights as shared_lib
from keras_bnn import store_priors
from keras_bnn import trainable_flags
from keras_bnn import models as _models  # noqa: F401 - registers the classes a stored config names
from keras_bnn.likelihoods import from_loss
from keras_bnn.member_model import derived_state_layers
from keras_bnn.store_fingerprint import (architecture_of, first_difference,
                                         fingerprint_as_stored, wiring_difference)
from keras_bnn.validation import argument_error, check_directory_path

_MANIFEST = "store.json"
_FINGERPRINT = "fingerprint"  # the entry of a sample file naming its architecture
_SAMPLE = re.compile(r"^sample-(\d+)\.npz$")
_RECORD = re.compile(r"^[A-Za-z0-9_-]+$")
_UNKNOWN_CLASS = re.compile(r"Could not locate (?:class|function) '([^']+)'")  # Keras' words


class Sample:
    """One stored posterior sample: its weights and metadata.

    Attributes:
        index: position in the store.
        weights: list of numpy arrays, in ``model.weights`` order; those read
            from the store's ``shared.npz`` are read-only arrays, the same
            objects in every sample of the store (copy one to change it).
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

    Layout: ``store.json`` (architecture of the model that wrote the store,
    and the priors of its trainable weights),
    ``shared.npz`` (the model's non-trainable weights, written once: see
    :mod:`keras_bnn.shared_weights`), one ``sample-<index>.npz`` per
    sample (at least six digits; weights ``w<i>``, ``i`` their position in
    ``model.weights``: the trainable ones and each non-trainable one that
    differs from the shared copy, with the indices and digest of those it
    takes from ``shared.npz``; its metadata as JSON, the architecture
    fingerprint of the model that wrote it and the digest of its priors), and
    the small JSON records of :meth:`write_record`. Other files are ignored.
    Stores written before ``shared.npz`` (every weight in every sample), or
    before the priors were recorded, read as before.

    Guarantees (see the README's "Guarantees"):

    * every file is written to a temporary name, fsynced and published by
      ``link``/``rename``, so a crash never leaves a partial sample; the
      temporary files of a killed writer are removed by the next
      ``SampleStore`` opened on the directory;
    * a sample file is never replaced: :meth:`append` claims its index with
      an exclusive ``link(2)``, so concurrent appenders (threads or
      processes, one host or a shared POSIX filesystem) all keep their
      samples;
    * the first model bound to the store wins (``store.json`` is created
      exclusively); a model of another architecture, or of other priors
      (:mod:`keras_bnn.store_priors`; not checked in a store written before
      priors were recorded), gets a ValueError;
    * loading refuses foreign, truncated or corrupt sample files, files
      written by a model of another architecture or priors (a sample carries
      its fingerprint and priors digest), anything but a regular file (a
      named pipe never blocks a reader), and non-finite weights, with a ValueError naming the file
      (nothing is unpickled); the same for ``shared.npz``, and a sample is
      never completed from another ``shared.npz`` than the one it was
      written against (it names its digest);
    * :meth:`snapshot` fixes the list of samples, so a reader sees one
      consistent set while a writer appends.

    Iteration loads one sample at a time, so memory does not grow with the
    number of samples.

    Args:
        path: directory (created if missing).

    Raises:
        ValueError: if ``path`` is not a path, or is a file or lies below one.
    """

    def __init__(self, path):
        try:
            self.path = os.fspath(path)
        except TypeError:
            raise ValueError(f"`path` must be a filesystem path; got {path!r}.") from None
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"`path` must be a non-empty str path; got {path!r}.")
        check_directory_path(self.path, "path", "SampleStore")
        os.makedirs(self.path, exist_ok=True)
        durable.remove_stale(self.path)
        self._metadata_cache = {}
        self._frozen = None
        self._shared = shared_lib.SharedFile(self.path)

    @staticmethod
    def is_store(path):
        """Whether ``path`` is a sample store's directory: one holding its
        manifest or samples, or an empty one (a store with nothing written yet).

        Args:
            path: a filesystem path.

        Returns:
            bool (False for a file, a missing path, or a directory of other things,
            such as an export or a sweep).
        """
        if not os.path.isdir(path):
            return False
        names = os.listdir(path)
        return not names or _MANIFEST in names or any(map(_SAMPLE.match, names))

    def snapshot(self):
        """A read-only view of the samples present now.

        Samples appended later (by this or another process) are not seen by
        the view, so chain lengths, pooled members and R-hat split points
        computed from it all refer to the same samples.

        Returns:
            A :class:`SampleStore` on the same directory whose sample list is
            fixed.
        """
        view = SampleStore(self.path)
        view._frozen = tuple(self._files())
        return view

    # -------------------------------------------------------------- manifest
    @property
    def architecture(self):
        """The stored architecture dict, or ``None`` for a new, empty store.

        Raises:
            ValueError: if ``store.json`` is missing while samples exist, or
                unreadable.
        """
        manifest = os.path.join(self.path, _MANIFEST)
        try:
            with open(manifest, "rb") as handle:
                stored = json.loads(handle.read())
        except FileNotFoundError:
            count = len(self._files())
            if count:
                raise ValueError(
                    f"SampleStore {self.path!r}: {manifest} is missing but {count} samples "
                    "are present (the file was deleted); the architecture is unknown."
                ) from None
            return None
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            raise ValueError(
                f"SampleStore {self.path!r}: {manifest} is corrupt ({error}).") from None
        if not isinstance(stored, dict) or not isinstance(stored.get("fingerprint"), str) \
                or not isinstance(stored.get("weights"), list) or "model" not in stored \
                or not store_priors.well_formed(stored):
            raise ValueError(f"SampleStore {self.path!r}: {manifest} is corrupt (not a "
                             "store manifest).")
        return stored

    def check_model(self, model):
        """Binds the store to ``model``'s architecture, or checks it matches.

        Of concurrent first binders of different architectures exactly one
        wins; the others get the ValueError.

        Args:
            model: a built Keras model.

        Raises:
            ValueError: for a ``model`` that is not a Keras model, or if the
                store holds samples of another architecture, or drawn under
                other priors (naming the weights whose prior differs).
        """
        if not isinstance(model, keras.Model):
            raise argument_error("model", "be a keras.Model", model, "SampleStore",
                                 got=type(model).__name__)
        mine = architecture_of(model)
        manifest = os.path.join(self.path, _MANIFEST)
        if self.architecture is None and durable.create_exclusive(
                manifest, lambda handle: handle.write(json.dumps(mine).encode())):
            return
        stored = self.architecture
        if stored["fingerprint"] != fingerprint_as_stored(model, stored):
            raise ValueError(
                f"SampleStore {self.path!r} holds samples of another architecture "
                f"({first_difference(stored, mine)}). Use a new store path."
            )
        if stored.get("wiring") is not None and stored["wiring"] != mine["wiring"]:
            raise ValueError(
                f"SampleStore {self.path!r} holds samples of another architecture: the same "
                f"layers, wired otherwise ({wiring_difference(stored['wiring'], mine['wiring'])})"
                ". Use a new store path.")
        store_priors.check(self.path, stored, mine[store_priors.MANIFEST_KEY])

    def loss(self):
        """The loss the storing model was compiled with, serialized.

        Returns:
            The loss as Keras serializes it (a name or a dict), or None when
            the store is empty or the model was not compiled with a loss.
        """
        stored = self.architecture
        compiled = (stored or {}).get("model", {}).get("compile_config") or {}
        return compiled.get("loss")

    def likelihood(self):
        """The likelihood implied by the loss the storing model was compiled with.

        Returns:
            ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``
            (:func:`keras_bnn.likelihoods.from_loss` of :meth:`loss`), or
            None when the store is empty, the model was not compiled or its
            loss is not one of those.
        """
        return from_loss(self.loss())

    def build_model(self):
        """Rebuilds the model that wrote the store.

        A model with layers that derive call-time state from their weights
        (:func:`keras_bnn.member_model.derived_state_layers`: an adapted
        ``Normalization``) gets its first sample's weights, and those layers
        derive it: ``set_weights`` alone does not (a model rebuilt and given a
        sample's weights normalised with 0 and 1). That state is
        non-trainable, the same in every sample. Other models' weights are
        not loaded.

        Returns:
            A Keras model.

        Raises:
            ValueError: if the store is empty, or the stored model config
                does not rebuild the architecture it was stored with.
        """
        stored = self.architecture
        if stored is None:
            raise ValueError(f"SampleStore {self.path!r} is empty: no architecture yet.")
        try:
            model = trainable_flags.deserialize(stored["model"])
        except Exception as error:  # Keras raises many types for a bad config
            unknown = _UNKNOWN_CLASS.search(str(error))
            # Keras' message names the class after a dump of the whole config
            # (5 kB for a two-layer subclassed model, until 2026-11-29 all given).
            reason = (f"its class {unknown.group(1)!r} is not registered in this process: "
                      "import the module that defines it (with @keras.saving."
                      "register_keras_serializable) before reading the store" if unknown
                      else f"{type(error).__name__}: {error}")
            raise ValueError(f"SampleStore {self.path!r}: the model in {_MANIFEST} cannot "
                             f"be rebuilt ({reason}).") from None
        if fingerprint_as_stored(model, stored) != stored["fingerprint"]:
            raise ValueError(f"SampleStore {self.path!r}: the model config in {_MANIFEST} "
                             "does not match its fingerprint (the file was altered).")
        layers = derived_state_layers(model)
        if layers and len(self):
            model.set_weights(self[0].weights)
            for layer in layers:
                layer.finalize_state()
        return model

    # ---------------------------------------------------------------- samples
    def _files(self):
        """``[(file index, path)]`` of the sample files, in index order."""
        if self._frozen is not None:
            return list(self._frozen)
        found = []
        for name in os.listdir(self.path):
            match = _SAMPLE.match(name)
            if match:
                found.append((int(match.group(1)), os.path.join(self.path, name)))
        return sorted(found)

    def __len__(self):
        return len(self._files())

    def append(self, model, **metadata):
        """Writes ``model``'s current weights as a new sample.

        Non-trainable weights equal to the store's shared copy are not
        written again (the first append that has any writes ``shared.npz``).

        The index is claimed atomically (see the class docstring): an
        existing sample is never replaced.

        Args:
            model: the model being sampled.
            **metadata: JSON-serialisable values (``chain``, ``step``,
                ``epoch``, ``temperature``, ...); ``time`` is added.

        Returns:
            The new sample's file index (its position in the store unless
            samples were deleted).

        Raises:
            ValueError: if the model's architecture or priors differ from the
                store's, or its weights are not finite.
        """
        if self._frozen is not None:
            raise ValueError(f"SampleStore {self.path!r}: a snapshot is read-only; append "
                             "to the store itself.")
        self.check_model(model)
        metadata = dict(metadata, time=time.time())
        try:
            text = json.dumps(metadata, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"`metadata` must be JSON-serialisable finite values ({error}); "
                             f"got {metadata!r}.") from None
        weights = [backend.to_numpy(w) for w in model.weights]
        shared_lib.check_finite({f"w{i}": w for i, w in enumerate(weights)},
                                f"the weights of model {model.name!r}")
        candidates = shared_lib.non_trainable_indices(model)
        stored = self.architecture
        arrays = self._shared.sample_entries(weights, candidates, stored)
        arrays["metadata"] = np.array(text)
        arrays[_FINGERPRINT] = np.array(stored["fingerprint"])
        priors = store_priors.digest_of(stored)
        if priors is not None:  # None: a store written before priors were recorded
            arrays[store_priors.ENTRY] = np.array(priors)
        files = self._files()
        start = files[-1][0] + 1 if files else 0
        path = durable.create_first_free(
            (os.path.join(self.path, f"sample-{i:06d}.npz") for i in itertools.count(start)),
            lambda handle: np.savez(handle, **arrays),
        )
        for key in [key for key in self._metadata_cache if key[0] == path]:
            del self._metadata_cache[key]  # a name reused: see metadata()
        return int(_SAMPLE.match(os.path.basename(path)).group(1))

    def _read(self, path, weights=True):
        """(weights or None, metadata) of one sample file, checked."""
        try:
            with durable.open_regular(path) as handle, \
                    np.load(handle, allow_pickle=False) as data:
                names = set(data.files)
                fingerprint = str(data[_FINGERPRINT]) if _FINGERPRINT in names else None
                priors = str(data[store_priors.ENTRY]) if store_priors.ENTRY in names else None
                entries = names - {_FINGERPRINT, shared_lib.INDICES, shared_lib.DIGEST,
                                   store_priors.ENTRY}
                own = {int(m.group(1)) for m in map(shared_lib.WEIGHT_ENTRY.match, entries) if m}
                unexpected = entries - {"metadata", *(f"w{i}" for i in own)}
                if unexpected or "metadata" not in names or (
                        (shared_lib.INDICES in names) != (shared_lib.DIGEST in names)):
                    raise ValueError(f"unexpected entries {sorted(unexpected)} or missing ones")
                taken = shared_lib.check_indices(
                    data[shared_lib.INDICES] if shared_lib.INDICES in names else None, own)
                digest = str(data[shared_lib.DIGEST]) if taken else None
                metadata = json.loads(str(data["metadata"]))
                if not isinstance(metadata, dict):
                    raise ValueError("metadata is not a JSON object")
                arrays = {i: data[f"w{i}"] for i in sorted(own)} if weights else None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile,
                RecursionError) as error:
            # numpy's message for object arrays suggests unsafe loading.
            reason = ("it holds pickled objects, which a sample never does and which are "
                      "never loaded") if "pickle" in str(error) else error
            raise ValueError(f"SampleStore {self.path!r}: sample file {path} is corrupt, "
                             f"truncated or not a sample ({reason}).") from None
        stored = self.architecture
        # Samples written before fingerprints were stored carry none.
        if stored is not None and fingerprint not in (None, stored["fingerprint"]):
            raise ValueError(f"SampleStore {self.path!r}: sample file {path} was written by a "
                             "model of another architecture than the store's (its fingerprint "
                             "differs); it was copied from another store.")
        store_priors.check_sample(self.path, stored, path, priors)
        if arrays is None:
            return None, metadata
        own_arrays = {f"w{i}": a for i, a in arrays.items()}  # the shared file's are checked
        if taken:
            arrays.update(self._shared.taken(path, taken, digest, stored))
        arrays = [arrays[i] for i in range(len(arrays))]
        shapes = [[list(a.shape), str(a.dtype)] for a in arrays]
        if stored is not None and shapes != stored["weights"]:
            raise ValueError(f"SampleStore {self.path!r}: sample file {path} does not match "
                             f"the store's architecture (weights {shapes[:3]}..., expected "
                             f"{stored['weights'][:3]}...).")
        shared_lib.check_finite(own_arrays, f"sample file {path}")
        return arrays, metadata

    def _load(self, index, path):
        weights, metadata = self._read(path)
        return Sample(index, weights, metadata)

    def __getitem__(self, index):
        """The sample at position ``index`` (negative counts from the end).

        Raises:
            ValueError: for an index that is not an int (slices included:
                iterate, or read ``metadata()`` to choose).
            IndexError: for one out of range.
        """
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise argument_error("index", "be an int (iterate over the store for all samples)",
                                 index, "SampleStore", got=type(index).__name__)
        files = self._files()
        count = len(files)
        if not -count <= index < count:
            allowed = f"0 to {count - 1}, or -1 to -{count} from the end" if count else "empty"
            raise IndexError(f"SampleStore {self.path!r}: `index` {index} is out of range for "
                             f"its {count} samples ({allowed}).")
        return self._load(range(len(files))[index], files[index][1])

    def __iter__(self):
        for index, (_, path) in enumerate(self._files()):
            yield self._load(index, path)

    def metadata(self):
        """Metadata of every sample, without loading weights.

        Returns:
            List of dicts.

        Raises:
            ValueError: naming a corrupt sample file.
        """
        result = []
        for _, path in self._files():
            # A sample file is immutable, but its name is reused when it is deleted
            # and the store appends again: the cache is keyed by the file, not the name.
            status = os.stat(path)
            key = (path, status.st_ino, status.st_mtime_ns, status.st_size)
            if key not in self._metadata_cache:
                self._metadata_cache[key] = self._read(path, weights=False)[1]
            result.append(self._metadata_cache[key])
        return result

    def find(self, chain, step):
        """The position of the sample with identity (``chain``, ``step``), or None.

        Samples appended without a ``chain`` belong to chain 0.

        Args:
            chain: chain id (int).
            step: optimizer step the sample was taken at (int).

        Returns:
            int position, or None.
        """
        for position, metadata in enumerate(self.metadata()):
            if metadata.get("chain", 0) == chain and metadata.get("step") == step:
                return position
        return None

    # ---------------------------------------------------------------- records
    def _record_path(self, name):
        if not isinstance(name, str) or not _RECORD.match(name):
            raise ValueError(f"SampleStore: a record's `name` must match {_RECORD.pattern!r} "
                             f"(letters, digits, '-', '_'); got {name!r}.")
        return os.path.join(self.path, f"record-{name}.json")

    def write_record(self, name, value):
        """Keeps a small JSON value beside the samples, as ``record-<name>.json``.

        For what a run decided and must still know after a resume (the step
        factors' second noise measurement,
        :attr:`keras_bnn.callbacks.CollectSamples.remeasurement`). Written
        to a temporary name and renamed (:func:`keras_bnn.durable.atomic_write`):
        a kill leaves the old record or the new one, never a part.

        Args:
            name: the record's name (letters, digits, ``-``, ``_``).
            value: anything ``json.dumps`` takes.

        Raises:
            ValueError: for a bad ``name``.
        """
        text = json.dumps(value, indent=2)
        durable.atomic_write(self._record_path(name), lambda handle: handle.write(text.encode()))

    def read_record(self, name):
        """The value :meth:`write_record` kept as ``name``.

        Args:
            name: the record's name (letters, digits, ``-``, ``_``).

        Returns:
            The JSON value, or None if the store has no such record.

        Raises:
            ValueError: for a bad ``name``, or naming a record file that is
                not JSON.
        """
        path = self._record_path(name)
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError) as error:
            raise ValueError(f"SampleStore: {path} is not a JSON record ({error}).") from None

    def __repr__(self):
        return f"SampleStore({self.path!r}, samples={len(self)})"
