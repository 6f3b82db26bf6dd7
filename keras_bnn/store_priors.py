"""The priors a sample store's samples were drawn under, beside its architecture fingerprint.

The fingerprint (:func:`keras_bnn.store.architecture_of`) hashes each layer's
class and config, which hold the priors ``kb.layers`` and ``kb.bayesian`` set
as regularizers. Some priors are in no layer config
(:mod:`keras_bnn.prior_attachment`: a ``MultiHeadAttention``'s projections,
the layers of a subclassed model, a custom layer's ``add_weight``): two
models that differ only there have the same fingerprint, and their samples,
of two posteriors, would mix in one store. So a store also records the prior
of each trainable weight: its manifest's ``"priors"`` (:func:`record_of`:
their digest and, per weight of ``model.trainable_variables``, its path and
serialized prior, None for none), and each sample its digest (entry
``priors_digest``). The fingerprint is unchanged, so every store written
before keeps its fingerprint; such a store has no record, and is read and
appended to as before, its priors unchecked.

The digest covers the priors in ``trainable_variables`` order, not the
paths: a reload can change a weight's path (a subclassed model's layers are
numbered per process) but not its position.
"""

import hashlib
import json

import keras

#: The key of a store's manifest that records the priors.
MANIFEST_KEY = "priors"
#: The entry of a sample file holding the digest of the priors it was drawn under.
ENTRY = "priors_digest"


def _serialized(regularizer):
    """A weight's prior as JSON-comparable data (None for none).

    A Keras regularizer (every ``kb.priors`` prior) as Keras serializes it;
    a function or another callable, and a regularizer without a config, by
    the name of its function or class (serializing a lambda, Keras warns).
    """
    if regularizer is None:
        return None
    config = None
    if isinstance(regularizer, keras.regularizers.Regularizer):
        try:
            config = keras.saving.serialize_keras_object(regularizer)
        except (NotImplementedError, TypeError, ValueError):  # no get_config: its name
            config = None
    if config is None:
        named = regularizer if hasattr(regularizer, "__qualname__") else type(regularizer)
        config = {"class_name": f"{named.__module__}.{named.__qualname__}", "config": {}}
    return json.loads(json.dumps(config, sort_keys=True, default=repr))


def _digest(priors):
    return hashlib.sha256(json.dumps(priors, sort_keys=True).encode()).hexdigest()


def record_of(model):
    """The record of a model's priors for a store's manifest (see module doc).

    Args:
        model: a built Keras model.

    Returns:
        dict: ``digest`` (sha256 over each trainable weight's serialized
        prior, in order) and ``weights`` (``[path, serialized prior or
        None]`` per trainable weight).
    """
    weights = [[v.path, _serialized(v.regularizer)] for v in model.trainable_variables]
    return {"digest": _digest([prior for _, prior in weights]), "weights": weights}


def well_formed(manifest):
    """Whether a store's manifest has no record of priors or one of :func:`record_of`'s form.

    Args:
        manifest: the store's manifest, a dict.

    Returns:
        bool.
    """
    record = manifest.get(MANIFEST_KEY)
    return record is None or (isinstance(record, dict) and isinstance(record.get("digest"), str)
                              and isinstance(record.get("weights"), list))


def digest_of(manifest):
    """The priors digest a store's manifest records.

    Args:
        manifest: the store's manifest (``SampleStore.architecture``, checked
            by :func:`well_formed`).

    Returns:
        str, or None for a store written before priors were recorded.
    """
    return (manifest.get(MANIFEST_KEY) or {}).get("digest")


def _shown(prior):
    """``Normal(mean=0.0, stddev=0.7)`` for a serialized prior; ``no prior`` for None."""
    if not isinstance(prior, dict):
        return "no prior" if prior is None else repr(prior)
    config = prior.get("config")
    arguments = ", ".join(f"{k}={v!r}" for k, v in sorted(config.items())) \
        if isinstance(config, dict) else repr(config)
    return f"{prior.get('class_name')}({arguments})"


def differences(theirs, mine, where=("in the store", "in the model")):
    """The weights whose prior differs between two records of priors, for a message.

    Args:
        theirs, mine: records of :func:`record_of`'s form.
        where: how the message names the two records.

    Returns:
        str: ``'<path>': <prior> <where[0]>, <prior> <where[1]>`` for the
        first three weights that differ (paths of ``mine``), ``; and <k>
        more`` for the others; empty if no weight differs.
    """
    stored = [entry[1] if isinstance(entry, list) and len(entry) == 2 else entry
              for entry in theirs["weights"]]
    differ = [f"{path!r}: {_shown(stored[i] if i < len(stored) else None)} {where[0]}, "
              f"{_shown(prior)} {where[1]}"
              for i, (path, prior) in enumerate(mine["weights"])
              if i >= len(stored) or stored[i] != prior]
    return "; ".join(differ[:3]) + (f"; and {len(differ) - 3} more" if len(differ) > 3 else "")


def mismatch(manifest, other, where=("in the store", "in the model")):
    """The weights whose prior differs between two manifests' records, or None.

    Args:
        manifest, other: manifests (or :func:`record_of`'s records under
            :data:`MANIFEST_KEY`); one without a record is not compared.
        where: how the message names the two.

    Returns:
        None where both record the same priors or either records none, else
        :func:`differences`' text (``'its record of priors was altered'``
        where no weight differs but the digests do).
    """
    digests = digest_of(manifest), digest_of(other)
    if None in digests or digests[0] == digests[1]:
        return None
    return (differences(manifest[MANIFEST_KEY], other[MANIFEST_KEY], where)
            or "its record of priors was altered")


def check(store_path, manifest, mine):
    """Refuses a model whose priors differ from those the store's samples were drawn under.

    Args:
        store_path: the store's directory (for the message).
        manifest: the store's manifest; one without a record is not checked.
        mine: :func:`record_of` the model.

    Raises:
        ValueError: naming the store, the weights whose prior differs (path,
            the store's prior and the model's) and what to do (a new store).
    """
    listed = mismatch(manifest, {MANIFEST_KEY: mine})
    if listed is not None:
        raise ValueError(
            f"SampleStore {store_path!r} holds samples drawn under other priors than the "
            f"model's (same architecture; {listed}). Samples of two posteriors must not be "
            "mixed: use a new store path for this model.")


def check_sample(store_path, manifest, sample_path, digest):
    """Refuses a sample file drawn under other priors than its store's.

    Args:
        store_path: the store's directory (for the message).
        manifest: the store's manifest, or None for a new store.
        sample_path: the sample file (for the message).
        digest: the sample's ``priors_digest`` entry, or None for a sample
            written before priors were recorded (not checked).

    Raises:
        ValueError: naming the sample file.
    """
    if digest is None or manifest is None or digest == digest_of(manifest):
        return
    raise ValueError(f"SampleStore {store_path!r}: sample file {sample_path} was drawn under "
                     "other priors than the store's samples (its priors digest differs); it "
                     "was copied from another store.")
