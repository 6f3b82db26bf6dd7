"""TensorFlow Serving's ``--model_config_file`` next to an exported model's versions.

:func:`write_models_config` adds a model's entry to ``<model_dir>/models.config``
and keeps what the file holds (the user's edits, other models' entries,
comments). Protobuf only: ``tensorflow_serving`` is not a dependency, so the
few fields read are declared here (:func:`_config_message`).
"""

import os
import re

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
    fields = {"ModelConfig": [("name", 1, 12, None, 1), ("base_path", 2, 12, None, 1)],
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
    from google.protobuf import text_format  # noqa: PLC0415

    name = os.path.basename(model_dir)
    entry = (f"config {{\n    name: {_text_format_string(name)}\n"
             f"    base_path: {_text_format_string(model_dir)}\n"
             '    model_platform: "tensorflow"\n  }')
    path = os.path.join(model_dir, MODELS_CONFIG)
    text = f"model_config_list {{\n  {entry}\n}}\n"
    if os.path.lexists(path):
        config = _config_message()()
        try:
            with durable.open_regular(path) as handle:
                old = handle.read().decode("utf-8")
            text_format.Parse(old, config, allow_unknown_field=True,
                              allow_unknown_extension=True)
        except (ValueError, text_format.ParseError) as error:
            raise ValueError(
                f"{path} is not a TensorFlow Serving model config (protobuf text format: "
                f"{error}); refusing to overwrite it. Fix it, or remove it for a new one "
                "naming this model.") from error
        ours = [os.fsencode(value) for value in (name, model_dir)]
        if _opening(old, "custom_model_config") is not None or any(
                old_entry.name == ours[0] or os.path.normpath(old_entry.base_path) == ours[1]
                for old_entry in config.model_config_list.config):
            return path
        at = _opening(old, "model_config_list")
        if at is not None:
            text = f"{old[:at]}\n  {entry}{old[at:]}"
        else:  # only comments: the list after them
            text = f"{old}\n{text}" if old and not old.endswith("\n") else old + text
    durable.atomic_write(os.path.realpath(path), lambda handle: handle.write(text.encode()))
    return path
