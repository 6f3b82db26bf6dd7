"""TensorFlow Serving export of a :class:`keras_bnn.PosteriorEnsemble`.

:func:`export_ensemble` writes one *version directory* of the layout TF
Serving watches (``<model_dir>/<version>/saved_model.pb`` + ``variables/``)
and ``<model_dir>/models.config`` (a ``--model_config_file`` for
``tensorflow_model_server``, kept as the user edits it). The SavedModel has one signature,
:data:`SERVING_SIGNATURE`, whose input is :data:`SERVING_INPUT` (one named
input per member input for a member of several) and whose
outputs are the ensemble's :meth:`~keras_bnn.PosteriorEnsemble.predictive_summary`
(:data:`keras_bnn.ensemble.CATEGORICAL_OUTPUTS`, ``BERNOULLI_OUTPUTS`` or
``GAUSSIAN_OUTPUTS``); :class:`keras_bnn.serving.ServingClient` queries it
over TF Serving's REST API.

Every file goes through :mod:`keras_bnn.durable` (temp name, fsync,
rename), so an interrupted export never leaves a partial version that a
model server could load. TensorFlow is imported inside :func:`export_ensemble`
only: this module imports under any Keras backend.
"""

import errno
import logging
import os
import re
import shutil

import keras

from keras_bnn import distribute, durable, ensemble_inputs, ensemble_outputs
from keras_bnn.models_config import (MODELS_CONFIG, pinned_versions, warn_unserved,
                                     write_models_config)
from keras_bnn.serving import MAX_VERSION
from keras_bnn.validation import check_directory_path, check_int

#: Name of the exported signature's input tensor (a member of one input; one of
#: several inputs is named as :func:`keras_bnn.ensemble_inputs.names` says).
SERVING_INPUT = ensemble_inputs.ONE_INPUT
#: Name of the exported signature (TF Serving's default).
SERVING_SIGNATURE = "serving_default"
#: Input dtypes TF Serving's JSON cannot fill (json_tensor.cc, AddValueToTensor:
#: HTTP 501 for every value), and the dtype each is served as.
_SERVED_AS = {"float16": "float32", "bfloat16": "float32", "uint16": "int32"}
#: The input names a signature takes: TensorFlow's op names.
_INPUT_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_./>-]*")


def export_ensemble(ensemble, model_dir, version=None, verbose=False):
    """Writes a TensorFlow Serving version directory ``model_dir/<version>``.

    The SavedModel (``keras.export.ExportArchive``) has one signature,
    ``serving_default``: input ``inputs`` (``[None, *input_shape]``, the
    member's dtype; float32 for a float16 or bfloat16 one, int32 for a uint16
    one, cast inside after
    a range check, as TF Serving's REST API cannot fill those from JSON (until
    2026-11-30 served as such, and every REST request answered HTTP 501): any
    batch size, and any size along the member's own
    None dimensions, a tagger's sequence length; for a member of several
    inputs one such input per member input, named by
    ``ensemble.member_input_names``: the Input layers' names for a list, the
    keys for a dict), outputs named as in
    :meth:`~keras_bnn.PosteriorEnsemble.predictive_summary` (for
    ``"categorical"``: p̄ = (1/S) Σ_s softmax f(x;θ_s) computed as
    exp(logsumexp_s log_softmax f(x;θ_s) − log S), its log, the predictive
    and expected entropies, their difference — the mutual information — and
    the per-class std over members; per position for a member output
    ``[N, T, K]``: ``probabilities`` ``[N, T, K]``, ``predictive_entropy``
    ``[N, T]``). A wrong dtype is rejected by the
    signature; a wrong shape, which neither a loaded signature nor TF Serving
    checks against the signature, by an ``EnsureShape`` at the start of the
    graph: InvalidArgument "Shape of tensor inputs [2,4] is not compatible
    with expected shape [?,5]" (HTTP 400 from TF Serving). A floating input
    holding NaN or Inf is rejected the same way. A member of several outputs
    (a multi-task model) has per output ``name`` an output ``name``, its
    predictive as ``predict`` gives it, and ``name_<key>`` for each of its
    summary's outputs (:func:`keras_bnn.ensemble_outputs.served`; until
    2026-11-29 refused).

    Durability: the version is written to a temporary sibling directory
    ``model_dir/.tmp-*`` (which TF Serving ignores), fsynced and renamed into
    place (:func:`keras_bnn.durable.publish_directory`), so an interrupted
    export leaves no partial version directory (a killed export's staging
    directory is removed by the next export). ``models.config`` gets this
    model's entry (model name = the directory's name) *before* the version is
    published, so an error is never reported for a published version: written
    when absent, left as it is when it names the model, the entry added to
    what it holds otherwise (:func:`keras_bnn.models_config.write_models_config`).
    When the model's entry there has ``model_version_policy { specific { ... } }``
    without the version, a
    :class:`~keras_bnn.models_config.UnservedVersionWarning` names the file and
    the pinned versions (a model server using that file keeps serving those),
    before the version is published: made an error (``-W error``), it leaves
    nothing published.

    Args:
        ensemble: a :class:`keras_bnn.PosteriorEnsemble`.
        model_dir: the model's base path, e.g. ``saved_models/cifar10_atmc``.
        version: positive integer version (at most 2**63 - 1, TF Serving's
            int64); ``None`` takes one more than the largest existing integer
            version (1 for a new directory), and the next free one if another
            export publishes that version first.
        verbose: print the exported endpoint.

    Under a multi-worker cluster (``MultiWorkerMirroredStrategy``, read from
    the ensemble's strategy, the one in scope, or ``TF_CONFIG``:
    :func:`keras_bnn.distribute.cluster_task`) only the chief exports; another
    worker logs a warning naming its task and returns None, writing nothing
    (until 2026-11-30 each worker published a version of its own).

    Returns:
        The path of the new version directory (None on a worker that is not
        the chief).

    Raises:
        FileExistsError: if ``model_dir/<version>`` already exists (nothing
            is overwritten; pass another version or ``version=None``).
        PermissionError: naming ``model_dir`` when it cannot be created or written (an
            ``OSError`` of ``EROFS`` on a read-only file system).
        ValueError: if ``version`` is not a positive int64 or ``model_dir``
            is empty or not a path, if the newest version in ``model_dir`` has
            another signature (:func:`check_same_signature`: nothing is
            published), or naming two of the model's outputs that
            would be served under one name
            (:func:`keras_bnn.ensemble_outputs.check_served_names`) or an
            input that a signature cannot name (:func:`check_input_names`),
            or naming ``model_dir/models.config`` when it does not parse
            (nothing is written).
        NotImplementedError: under a Keras backend other than TensorFlow.
    """
    if keras.backend.backend() != "tensorflow":
        raise NotImplementedError(
            "Exporting a PosteriorEnsemble writes a TensorFlow SavedModel and needs "
            f"KERAS_BACKEND=tensorflow (the backend is {keras.backend.backend()!r}). "
            "Stored samples are backend-independent: build the ensemble with "
            "PosteriorEnsemble.from_store under TensorFlow and export it there."
        )
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow backend only

    if isinstance(ensemble.likelihood, dict):  # several outputs, named per output
        ensemble_outputs.check_served_names(ensemble.likelihood)
    check_input_names(ensemble.member_input_names)
    model_dir = check_model_dir(model_dir)
    automatic = version is None
    version = (next_version(model_dir) if automatic
               else check_int(version, "version", 1, maximum=MAX_VERSION))
    chief, task = distribute.cluster_task(getattr(ensemble, "distribute_strategy", None))
    if not chief:  # every worker runs the script: one version, the chief's
        logging.getLogger(__name__).warning(
            "PosteriorEnsemble.export: this process is %s of a multi-worker cluster, not its "
            "chief: nothing exported to %s (only the chief, or worker 0 of a cluster without "
            "one, exports, as only it writes samples).", task, model_dir)
        return None
    # TF Serving reads "007" as version 7: such an entry holds the version too.
    target = os.path.join(model_dir, _versions(model_dir).get(version, str(version)))
    if os.path.lexists(target):
        raise FileExistsError(
            errno.EEXIST,
            f"Version directory exists; refusing to overwrite it (choose another version "
            f"(`version=`, --version), or leave it unset for the next one, "
            f"{next_version(model_dir)})",
            target,
        )
    shape = ensemble.member_input_shape
    dtypes = [tf.as_dtype(dtype) for dtype in
              ensemble_inputs.leaves(ensemble.member_input_dtype, shape)]
    specs = [tf.TensorSpec([None, *example], _SERVED_AS.get(dtype.name, dtype), name=name)
             for example, dtype, name in zip(ensemble_inputs.leaves(shape, shape), dtypes,
                                             ensemble.member_input_names)]

    def serve(*inputs):
        # A loaded signature (and TF Serving) does not check the fed shape
        # against the signature: EnsureShape makes a wrong shape an
        # InvalidArgument error here instead of deep inside the network; a
        # non-finite input is an InvalidArgument error too (HTTP 400), never
        # a confident-looking answer.
        checked = []
        for tensor, spec, dtype in zip(inputs, specs, dtypes):
            tensor = tf.ensure_shape(tensor, spec.shape)
            if tensor.dtype.is_floating:
                tensor = tf.debugging.assert_all_finite(
                    tensor, f"`{spec.name}` holds NaN or Inf values; inputs must be finite")
            if dtype != tensor.dtype:  # served as another dtype (_SERVED_AS)
                tensor = tf.cast(_within(tensor, dtype, spec.name), dtype)
            checked.append(tensor)
        checked = ensemble_inputs.pack(checked, shape)
        if isinstance(ensemble.likelihood, dict):  # several outputs, named per output
            return ensemble_outputs.served(ensemble, checked)
        return ensemble.predictive_summary(checked)

    try:
        os.makedirs(model_dir, exist_ok=True)
        durable.remove_stale(model_dir)
        # models.config first: once the version is published, nothing is left
        # that can fail and report an error for a published version.
        write_models_config(model_dir)
        pinned = pinned_versions(model_dir)
        # os.mkdir (unlike tempfile.mkdtemp) honours the umask, so the version
        # directory gets the permissions a model server expects; TF Serving
        # ignores the non-integer staging name.
        staging = durable.temp_path(model_dir, tag=f"v{version}-")
        os.mkdir(staging)
    except OSError as error:  # named by a temporary path until 2026-11-30
        if error.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise type(error)(error.errno, f"{os.strerror(error.errno)}: `model_dir` cannot be "
                          "created or written (an export adds models.config and a version "
                          "directory to it); nothing was exported", model_dir) from error
    try:
        archive = keras.export.ExportArchive()
        archive.track(ensemble)
        for table in _lookup_tables(ensemble):
            archive.track(table)
        archive.add_endpoint(
            SERVING_SIGNATURE,
            serve,
            input_signature=specs,
        )
        archive.write_out(staging, verbose=verbose)
        check_same_signature(model_dir, staging)
        return _publish(staging, target, automatic, pinned)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _within(tensor, dtype, name):
    """``tensor`` (of a :data:`_SERVED_AS` dtype), checked to hold only values in
    ``dtype``'s range (InvalidArgument, HTTP 400 from TF Serving, naming ``name``)."""
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow backend only

    low, high = dtype.min, dtype.max
    inside = tf.reduce_all((tensor >= tf.cast(low, tensor.dtype))
                           & (tensor <= tf.cast(high, tensor.dtype)))
    with tf.control_dependencies([tf.debugging.Assert(inside, [
            f"`{name}` holds values outside [{low:g}, {high:g}], the range of {dtype.name}, "
            "the dtype of the member input"])]):
        return tf.identity(tensor)


def served_signature(version_dir):
    """The inputs and outputs of a SavedModel's :data:`SERVING_SIGNATURE`, read
    from its ``saved_model.pb`` (no graph loaded; as ``saved_model_cli show``).

    Args:
        version_dir: a directory holding ``saved_model.pb``.

    Returns:
        ``{"inputs": {name: (dtype, shape)}, "outputs": {...}}``, dtype a
        TensorFlow dtype name, shape a tuple with -1 for any size (None for
        any rank); None when the file is missing, unreadable or has no such
        signature.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow backend only
    from tensorflow.core.protobuf import saved_model_pb2  # noqa: PLC0415

    model = saved_model_pb2.SavedModel()
    try:
        with open(os.path.join(version_dir, "saved_model.pb"), "rb") as handle:
            model.ParseFromString(handle.read())
        signature = model.meta_graphs[0].signature_def[SERVING_SIGNATURE]
    except (OSError, IndexError, KeyError, ValueError):  # DecodeError is a ValueError
        return None
    return {side: {name: (tf.dtypes.as_dtype(info.dtype).name,
                          None if info.tensor_shape.unknown_rank
                          else tuple(dim.size for dim in info.tensor_shape.dim))
                   for name, info in getattr(signature, side).items()}
            for side in ("inputs", "outputs")}


def check_same_signature(model_dir, staging):
    """Refuses a new version whose signature differs from the newest version's.

    TF Serving serves a model directory's newest version and moves to a new
    one as soon as it appears, so a version of another signature (another
    task's ensemble exported into the same directory: other inputs, dtypes,
    shapes or outputs) would break every client of the served model at once
    (until 2026-11-30 it was published: wine's, then diabetes' ensemble as
    versions 1 and 2 of one model). The version compared is the newest that
    holds a signature: a newer entry without one (an empty directory) fails
    to load, and the server keeps serving the older (until 2026-11-30 such an
    entry let any signature through).

    Args:
        model_dir: the model's base path.
        staging: the new version's directory, not yet published.

    Raises:
        ValueError: naming ``model_dir``, the newest version and what differs.
    """
    # The newest version holding a signature: a server keeps serving it while a
    # newer entry without one (an empty or partly copied directory) fails to load.
    old = served = None
    for served, name in sorted(_versions(model_dir).items(), reverse=True):
        old = served_signature(os.path.join(model_dir, name))
        if old is not None:
            break
    new = served_signature(staging)
    if old is None or new is None or old == new:
        return
    differences = [
        f"{side} {name!r}: {old[side].get(name, 'absent')} -> {new[side].get(name, 'absent')}"
        for side in ("inputs", "outputs")
        for name in sorted(set(old[side]) | set(new[side]))
        if old[side].get(name) != new[side].get(name)]
    raise ValueError(
        f"`model_dir` {model_dir!r} serves version {served} with another "
        f"{SERVING_SIGNATURE!r} signature, which its clients expect; a model server would "
        f"switch them to this one at once. Differences ((dtype, shape) -1: any size): "
        f"{'; '.join(differences[:6])}"
        f"{f'; and {len(differences) - 6} more' if len(differences) > 6 else ''}. Export it "
        f"into another model directory, or remove the older versions from {model_dir!r} "
        "once the clients are ready for the new signature.")


def _lookup_tables(ensemble):
    """The member's lookup tables (``StringLookup``, ``IntegerLookup``,
    ``TextVectorization``): the ensemble holds its member untracked, so the
    archive does not find them (until 2026-11-30 the export of a member of
    string inputs failed with "Tried to export a function which references an
    'untracked' resource")."""
    from tensorflow.saved_model.experimental import TrackableResource  # noqa: PLC0415

    return [value for layer in ensemble._member.value._flatten_layers()
            for value in vars(layer).values() if isinstance(value, TrackableResource)]


def _publish(staging, target, automatic, pinned):
    """Publishes ``staging`` as ``target``, or, for a version chosen here
    (``automatic``) that another export published meanwhile, as the next free
    one (until 2026-11-29 the later of two concurrent exports failed with
    FileExistsError); returns the published path. Each version is checked
    against ``pinned`` (:func:`~keras_bnn.models_config.warn_unserved`) before
    its rename, so an ``UnservedVersionWarning`` made an error (``-W error``)
    publishes nothing (until 2026-12-01 it was raised after the rename: the
    export failed and its version was published)."""
    while True:
        warn_unserved(os.path.dirname(target), int(os.path.basename(target)), pinned)
        try:
            durable.publish_directory(staging, target)
            return target
        except FileExistsError:
            if not automatic:
                raise
            model_dir = os.path.dirname(target)
            target = os.path.join(model_dir, str(next_version(model_dir)))


def check_input_names(names):
    """Refuses input names that a SavedModel signature cannot take.

    TensorFlow names a signature's inputs as graph ops: a dict key or an
    ``Input`` name with a space, ``:``, a leading ``_`` or a non-ASCII
    letter, which Keras takes, failed inside ``write_out`` with "more than
    one argument ... was named 'my input'" until 2026-11-29.

    Two inputs that TensorFlow would give one name are refused too: graph ops
    are unique regardless of case (``A``, ``a``), and arguments are sanitised
    (``[^A-Za-z0-9]`` -> ``_``, ``arg_`` before a leading non-letter: ``a.b``,
    ``a/b``); until 2026-11-30 ``write_out`` failed on them with "more than one
    argument ... was named 'a'" or "Name collision after sanitization".

    Args:
        names: ``ensemble.member_input_names``.

    Raises:
        ValueError: naming the first such input and the names allowed, or the
            first two inputs of one name.
    """
    seen = ({}, {})  # graph op names by lower case; argument names, sanitised
    for name in names:
        if not _INPUT_NAME.fullmatch(name):
            raise ValueError(
                f"PosteriorEnsemble.export: the model's input {name!r} cannot name a serving "
                "input: TensorFlow names them as graph ops, [A-Za-z0-9.][A-Za-z0-9_./>-]* "
                "(no space, ':', leading '_' or non-ASCII letter); rename the input (its "
                "dict key or its keras.Input name).")
        argument = re.sub("[^A-Za-z0-9]", "_", name)
        argument = argument if argument[0].isalpha() else "arg_" + argument
        for names_seen, key, what in ((seen[0], name.lower(), "graph ops of one name but for "
                                       "case"), (seen[1], argument, f"arguments {argument!r}")):
            if key in names_seen:
                raise ValueError(
                    f"PosteriorEnsemble.export: the model's inputs {names_seen[key]!r} and "
                    f"{name!r} would both be {what} in the serving signature, which "
                    "TensorFlow refuses; rename one (its dict key or its keras.Input name).")
            names_seen[key] = name


def check_model_dir(model_dir):
    """The absolute path of a model base directory.

    Args:
        model_dir: a path (str or ``os.PathLike``) naming a directory.

    Returns:
        The absolute path.

    Raises:
        ValueError: for an empty or non-path value, a file (or a path below
            one), a path without a final component (``/``), or a version directory (one holding
            ``saved_model.pb``, or numbered inside a model directory that
            holds :data:`MODELS_CONFIG`): the versions go below the base.
    """
    try:
        path = os.fspath(model_dir)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path.strip():
        raise ValueError(
            f"`model_dir` must be a non-empty directory path (saved_models/<name>); "
            f"got {model_dir!r}."
        )
    path = os.path.abspath(check_directory_path(path, "model_dir"))
    if not os.path.basename(path):
        raise ValueError(f"`model_dir` must name a model directory, not {model_dir!r}.")
    parent, name = os.path.split(path)
    if os.path.isfile(os.path.join(path, "saved_model.pb")) or (
            name.isdigit() and os.path.isfile(os.path.join(parent, MODELS_CONFIG))):
        raise ValueError(f"`model_dir` must be a model's base directory (saved_models/<name>), "
                         f"not one of its versions; got {model_dir!r}: pass {parent!r}.")
    return path


def _versions(model_dir):
    """``{version: entry name}`` of the integer entries of ``model_dir`` ({} when it
    does not exist): TF Serving reads a version from a name as ``absl::SimpleAtoi``
    does, "007" as 7 (until 2026-11-30 the name was taken as ``str(version)``, so
    version 1 was published again next to "001", and a newest version "002" of
    another signature was not compared)."""
    try:
        names = os.listdir(model_dir)
    except FileNotFoundError:
        return {}
    return {int(name): name for name in sorted(names)
            if name.isascii() and name.isdigit() and int(name) <= MAX_VERSION}


def next_version(model_dir):
    """The version a new export gets: one more than the largest integer entry.

    Args:
        model_dir: the model's base path.

    Returns:
        int ≥ 1 (1 if ``model_dir`` does not exist or holds no version).

    Raises:
        ValueError: if ``model_dir`` already holds version 2**63 - 1.
    """
    if not os.path.isdir(model_dir):
        return 1
    versions = _versions(model_dir)
    version = max(versions, default=0) + 1
    if version > MAX_VERSION:
        raise ValueError(f"`model_dir` {model_dir!r} already holds version {MAX_VERSION}, "
                         "the largest int64; pass an explicit free `version`.")
    return version
