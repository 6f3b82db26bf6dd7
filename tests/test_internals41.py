"""Keras' private modules (``keras.src``) are read in one place, ``keras_bnn.keras_private``.

Before it, 17 import lines in 11 modules named ``keras.src``
(``grep -rn "keras.src" keras_bnn``): a Keras upgrade that moved one name
broke whichever module held it, and nothing said which private names
keras_bnn depends on or why. On ``dev`` before the change
``test_no_other_module_names_keras_src`` failed with those 17 lines
(``keras_bnn/array_order.py:28: from keras.src.trainers...``) and the
others with ``ModuleNotFoundError: No module named 'keras_bnn.keras_private'``.
"""

import ast
import importlib
from pathlib import Path

import keras_bnn

PACKAGE = Path(keras_bnn.__file__).parent
PRIVATE = PACKAGE / "keras_private.py"


def _names_keras_src(value):
    return value == "keras.src" or value.startswith("keras.src.")


def keras_src_mentions(path):
    """Where a Python file names ``keras.src``: imports, ``keras.src`` attributes
    and strings (``importlib.import_module("keras.src...")``, ``__import__``).

    Args:
        path: a ``.py`` file.

    Returns:
        list of ``"path:line: what"``.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if _names_keras_src(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = ([module] if _names_keras_src(module) else
                     [f"{module}.{a.name}" for a in node.names
                      if _names_keras_src(f"{module}.{a.name}")])
        elif isinstance(node, ast.Attribute):
            names = (["keras.src"] if node.attr == "src" and isinstance(node.value, ast.Name)
                     and node.value.id == "keras" else [])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value] if _names_keras_src(node.value) else []
        else:
            names = []
        found += [f"{path}:{node.lineno}: {name}" for name in names]
    return found


def test_scanner_finds_each_form(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import importlib\nimport keras\nimport keras.src.losses\n"
        "from keras.src.losses import loss\nfrom keras import src\n"
        "x = keras.src.backend\n"
        "importlib.import_module('keras.src.models.functional')\n"
        "y = 'keras.srcs are fine'\n")
    assert [line.split(": ")[0].rsplit(":", 1)[1] for line in keras_src_mentions(source)] \
        == ["3", "4", "5", "6", "7"]


def test_no_other_module_names_keras_src():
    found = [mention for path in sorted(PACKAGE.rglob("*.py")) if path != PRIVATE
             for mention in keras_src_mentions(path)]
    assert not found, "import these from keras_bnn.keras_private:\n" + "\n".join(found)


def _private_imports():
    """``{name: module}`` for each ``from keras.src... import name`` of keras_private."""
    tree = ast.parse(PRIVATE.read_text())
    return {alias.asname or alias.name: node.module for node in tree.body
            if isinstance(node, ast.ImportFrom) for alias in node.names}


def test_each_exported_name_exists_in_installed_keras():
    keras_private = importlib.import_module("keras_bnn.keras_private")
    for name, module in _private_imports().items():
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"
    for name in keras_private.__all__:
        assert getattr(keras_private, name, None) is not None, name


def test_each_exported_name_is_documented_and_used():
    keras_private = importlib.import_module("keras_bnn.keras_private")
    undocumented = [name for name in keras_private.__all__
                    if f"``{name}``" not in keras_private.__doc__]
    assert not undocumented, "say why no public API serves: " + ", ".join(undocumented)
    used = {alias.name for path in PACKAGE.rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module == "keras_bnn.keras_private"
            for alias in node.names}
    assert used == set(keras_private.__all__)
    assert set(_private_imports()) - {"global_state"} <= used


def test_flags_read_from_keras_global_state():
    """The global flags keras_private reads by name are the ones Keras sets."""
    from keras.src.legacy.saving.saving_options import keras_option_scope
    from keras.src.saving.serialization_lib import SafeModeScope

    from keras_bnn.keras_private import in_safe_mode, legacy_h5_saving

    assert not legacy_h5_saving() and in_safe_mode() is None
    with keras_option_scope(use_legacy_config=True), SafeModeScope(False):
        assert legacy_h5_saving() and in_safe_mode() is False
    assert not legacy_h5_saving() and in_safe_mode() is None
