"""TensorFlow Serving's ``--model_config_file`` next to an exported model's versions.

:func:`write_models_config` adds a model's entry to ``<model_dir>/models.config``
and keeps what the file holds (the user's edits, other models' entries,
comments). Protobuf only: ``tensorflow_serving`` is not a dependency, so the
few fields read are declared here (:func:`_config_message`).
:func:`pinned_versions` and :func:`warn_unserved` tell an export, before it
publishes a version, when the file's ``model_version_policy { specific { ... } }``
does not serve that version (:class:`UnservedVersionWarning`).
"""

import os
import re
import warnings

from keras_bnn import durable

#: The ``--model_config_file`` written next to the versions.
MODELS_CONFIG = "models.config"


def _text_format_string(value):
    """``value`` as a quoted protobuf text-format string (C escapes, UTF-8 octal)."""
    escaped = []
    for byte in value.encode("utf-8", "surrogateescape"):
        char = chr(byte)
        if char in '"\\':
            escaped.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            escaped.append(char)
        else:
            escaped.append(f"\\{byte:03o}")
    return '"' + "".join(escaped) + '"'


def _config_message():
    """A message class of TF Serving's ``ModelServerConfig`` (model_server_config.proto)
    with the fields :func:`write_models_config` reads (others are skipped); built
    here, as ``tensorflow_serving`` is not a dependency."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: PLC0415

    proto = descriptor_pb2.FileDescriptorProto(name="keras_bnn_models_config.proto",
                                               package="tensorflow.serving", syntax="proto3")
    # bytes, not string: a directory's name need not be UTF-8 (see _text_format_string)
    # model_version_policy: file_system_storage_path_source.proto's ServableVersionPolicy,
    # of which only `specific` (102) pins versions; `latest` and `all` serve a new one.
    fields = {"ModelConfig": [("name", 1, 12, None, 1), ("base_path", 2, 12, None, 1),
                              ("model_version_policy", 7, 11, "VersionPolicy", 1)],
              "VersionPolicy": [("specific", 102, 11, "Specific", 1)],
              "Specific": [("versions", 1, 3, None, 3)],
              "ModelConfigList": [("config", 1, 11, "ModelConfig", 3)],
              "ModelServerConfig": [("model_config_list", 1, 11, "ModelConfigList", 1)]}
    for message, message_fields in fields.items():
        added = proto.message_type.add(name=message)
        for name, number, kind, type_name, label in message_fields:
            added.field.add(name=name, number=number, type=kind, label=label,
                            type_name=type_name and f".tensorflow.serving.{type_name}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.ModelServerConfig"))


#: A text-format token: whitespace, a comment, a string, or anything else up to one.
_TOKEN = re.compile(r"""\s+|\#[^\n]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'
                       |[{}<>:]|[^\s{}<>:"'\#]+""", re.VERBOSE)


def _opening(text, field):
    """The offset just after the bracket that opens the top-level message ``field``
    of a parsed config's ``text`` (None when it has none)."""
    depth, seen = 0, False
    for token in _TOKEN.finditer(text):
        value = token.group()
        if value in "{<":
            if seen and depth == 0:
                return token.end()
            depth += 1
        elif value in "}>":
            depth -= 1
        seen = (depth == 0 and value == field
                or seen and (value == ":" or value.isspace() or value.startswith("#")))
    return None


class UnservedVersionWarning(UserWarning):
    """An exported version that ``models.config``'s ``model_version_policy`` does not serve."""


def _parse(path):
    """``path``'s text and its ``ModelServerConfig`` (the fields :func:`_config_message`
    declares).

    Raises:
        ValueError: naming ``path`` when it is not a text-format ``ModelServerConfig``.
    """
    from google.protobuf import text_format  # noqa: PLC0415

    config = _config_message()()
    try:
        with durable.open_regular(path) as handle:
            text = handle.read().decode("utf-8")
        text_format.Parse(text, config, allow_unknown_field=True,
                          allow_unknown_extension=True)
    except (ValueError, text_format.ParseError) as error:
        raise ValueError(
            f"{path} is not a TensorFlow Serving model config (protobuf text format: "
            f"{error}); refusing to overwrite it. Fix it, or remove it for a new one "
            "naming this model.") from error
    return text, config


def _entries(config, model_dir):
    """The entries of ``config`` that name ``model_dir``: by its directory's name or
    its base path."""
    ours = [os.fsencode(value) for value in (os.path.basename(model_dir), model_dir)]
    return [entry for entry in config.model_config_list.config
            if entry.name == ours[0] or os.path.normpath(entry.base_path) == ours[1]]


def pinned_versions(model_dir):
    """The versions ``model_dir/models.config`` pins this model to.

    Args:
        model_dir: the model's absolute base path.

    Returns:
        The sorted versions of a ``model_version_policy { specific { versions: N } }``
        in the model's entries (by name or base path), or None when none pins
        versions (``latest``, the default, and ``all`` serve a newly exported one).

    Raises:
        ValueError: naming the file, when it is not a text-format ``ModelServerConfig``.
    """
    path = os.path.join(model_dir, MODELS_CONFIG)
    if not os.path.lexists(path):
        return None
    pinned = [entry.model_version_policy.specific.versions
              for entry in _entries(_parse(path)[1], model_dir)
              if entry.model_version_policy.HasField("specific")]
    return sorted({version for versions in pinned for version in versions}) if pinned else None


def warn_unserved(model_dir, version, pinned):
    """Warns (:class:`UnservedVersionWarning`) when ``version`` is not among ``pinned``.

    Called by the export's publishing loop before the version's directory is
    renamed into place, so that a warning made an error (``python -W error``)
    publishes nothing; the warning names the line that called
    :func:`keras_bnn.export.export_ensemble`.

    Args:
        model_dir: the model's base path.
        version: the version about to be published.
        pinned: :func:`pinned_versions`' answer (None: nothing pinned, no warning).

    Raises:
        UnservedVersionWarning: where the warnings filter makes it an error.
    """
    if pinned is None or version in pinned:
        return
    listed = ", ".join(map(str, pinned)) or "none"
    warnings.warn(UnservedVersionWarning(
        f"{os.path.join(model_dir, MODELS_CONFIG)} pins this model to version(s) {listed} "
        f"(model_version_policy {{ specific }}): a model server using it does not serve "
        f"the new version {version}. Add `versions: {version}` to that policy, or use "
        "`latest` to serve the newest."), stacklevel=4)


def write_models_config(model_dir):
    """Adds this model to ``model_dir/models.config`` (``tensorflow_model_server
    --model_config_file``), leaving what the file holds.

    Without the file, it is written with one ``config`` entry: ``name`` = the
    directory's name, ``base_path`` = ``model_dir``, platform ``tensorflow``
    (names escaped as protobuf text-format strings, so any directory name
    gives a parseable file). A file with an entry of that name or base path
    (the user's renamed entry, a Docker ``base_path``), or a
    ``custom_model_config``, is left as it is; one without gets the entry
    first in its ``model_config_list`` (added when the file has none), its
    other entries, settings (``model_version_policy``) and comments kept (until
    2026-11-30 every export rewrote the file). Written atomically
    (:func:`keras_bnn.durable.atomic_write`; through a symbolic link to its
    target).

    Args:
        model_dir: the model's absolute base path.

    Returns:
        The path of the file.

    Raises:
        ValueError: naming the file, when it exists and is not a text-format
            ``ModelServerConfig`` (nothing is written).
    """
    name = os.path.basename(model_dir)
    entry = (f"config {{\n    name: {_text_format_string(name)}\n"
             f"    base_path: {_text_format_string(model_dir)}\n"
             '    model_platform: "tensorflow"\n  }')
    path = os.path.join(model_dir, MODELS_CONFIG)
    text = f"model_config_list {{\n  {entry}\n}}\n"
    if os.path.lexists(path):
        old, config = _parse(path)
        if _opening(old, "custom_model_config") is not None or _entries(config, model_dir):
            return path
        at = _opening(old, "model_config_list")
        if at is not None:
            text = f"{old[:at]}\n  {entry}{old[at:]}"
        else:  # only comments: the list after them
            text = f"{old}\n{text}" if old and not old.endswith("\n") else old + text
    durable.atomic_write(os.path.realpath(path), lambda handle: handle.write(text.encode()))
    return path
