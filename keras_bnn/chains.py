"""Several chains: the stores of a multi-chain run, checked to be of one model.

A multi-chain run directory (``keras-bnn train --chains K``,
:func:`keras_bnn.experiment.run_chains`) holds ``chain-0 … chain-{K-1}``,
each a single-chain run directory with its own ``samples/`` store.
:func:`stores_of` turns any of the accepted sources into the list of stores,
one per chain, for :meth:`keras_bnn.PosteriorEnsemble.from_store`,
:func:`keras_bnn.diagnostics.to_inference_data` and ``keras-bnn evaluate``.
"""

import os
import re

from keras_bnn.store import SampleStore

#: Name of chain k's directory inside a multi-chain run directory.
CHAIN_DIR = "chain-{}"
_CHAIN_RE = re.compile(r"^chain-(\d+)$")


def chain_dirs(run_dir):
    """The chain directories of a multi-chain run, in chain order.

    Args:
        run_dir: a directory.

    Returns:
        List of paths (empty when ``run_dir`` is not a multi-chain run).
    """
    if not os.path.isdir(run_dir):
        return []
    found = sorted(
        (int(match.group(1)), name)
        for name in os.listdir(run_dir)
        if (match := _CHAIN_RE.match(name)) and os.path.isdir(os.path.join(run_dir, name))
    )
    return [os.path.join(run_dir, name) for _, name in found]


def _stores_of_path(path):
    path = os.fspath(path)
    chains = chain_dirs(path)
    if chains:
        return [SampleStore(os.path.join(chain, "samples")) for chain in chains]
    if os.path.isdir(os.path.join(path, "samples")):
        return [SampleStore(os.path.join(path, "samples"))]
    if os.path.isdir(path):
        return [SampleStore(path)]
    raise FileNotFoundError(
        f"{path!r} is neither a sample store, a run directory nor a multi-chain run directory."
    )


def stores_of(source):
    """The sample stores of ``source``, one per chain, all of one architecture.

    Args:
        source: a :class:`keras_bnn.SampleStore`; a path to a store, to a run
            directory (``<run>/samples``) or to a multi-chain run directory
            (``<run>/chain-k/samples``); or a list of any of these (pooled in
            order).

    Returns:
        List of :class:`keras_bnn.SampleStore`, none of them empty.

    Raises:
        ValueError: if ``source`` is of another type, holds no store, a store
            is empty, or the stores hold samples of different architectures
            (the error names the first store that differs).
        FileNotFoundError: for a path that does not exist.
    """
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    stores = []
    for item in items:
        if isinstance(item, SampleStore):
            stores.append(item)
        elif isinstance(item, (str, os.PathLike)):
            stores.extend(_stores_of_path(item))
        else:
            raise ValueError(
                "`store` must be a SampleStore, a path to a store or run directory, or a "
                f"list of these; got {type(item).__name__}."
            )
    if not stores:
        raise ValueError("`store` holds no sample store; got an empty list.")
    for store in stores:
        if not len(store):
            raise ValueError(f"`store` {store.path!r} holds no samples.")
    reference = stores[0].architecture["fingerprint"]
    for store in stores[1:]:
        if store.architecture["fingerprint"] != reference:
            raise ValueError(
                f"The chains are of different architectures: {store.path!r} holds samples "
                f"of another model than {stores[0].path!r}; pool only chains of one model."
            )
    return stores
