"""README.md's code runs as a user copies it.

Every ```python block of README.md is found by parsing the file (a new block
is picked up without touching this test), parsed by ``ast`` (default suite)
and run in a fresh Python process, in an empty directory, under
``KERAS_BACKEND=tensorflow``: it must exit 0, and where the README states
what it prints, print that. A block must be standalone unless an HTML
comment on the line before its fence says otherwise; there are two markers:

- ``<!-- snippet: continues HEADING -->``: the block goes on from the first
  program under the README heading HEADING (it uses the names that one
  made): the two run as one program. Used for "Noise by direction", which
  measures the model of "Your own model" after its ``fit``.
- ``<!-- snippet: given NAME -->``: the block uses names the README leaves
  to the user, or a service this machine cannot run; ``PRELUDES[NAME]``
  (below) makes them, and runs before the block. Used for the ensemble of
  "Posterior ensemble" (a CIFAR-10 run's store and test set: CIFAR-10 is a
  download, so a CIFAR-shaped CNN with four perturbed weight sets and random
  images stand in) and the ``ServingClient`` of "Query it" (TensorFlow
  Serving cannot be installed here: tests/tf_serving_standin.py serves an
  export of that CNN on localhost:8501, with TF Serving's metadata
  endpoint). The Bayesian last layer's (a pretrained trunk and the digits arrays) are made by
  tests/test_readme_examples.py.

The blocks tests/test_readme_examples.py already runs in-process, with
checks of what they make (``IN_PROCESS``: the first example, "Your own
model" with "Noise by direction", the Bayesian last layer and the prior
predictive), are not run a second time here.

The ``keras-bnn`` commands in the README's shell blocks and inline code are
checked against the CLI's parser (every subcommand and flag exists; a
command of a shell block parses whole).
"""

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from keras_bnn.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_FENCE = re.compile(r"^( *)```python\n(.*?)^\1```", re.M | re.S)
_MARKER = re.compile(r"<!-- snippet: (continues|given) (.+?) -->\n *\Z")

_CIFAR10_STORE = """\
import keras as _keras
import numpy as _np
import tensorflow as _tf
import keras_bnn as _kb
_keras.utils.set_random_seed(0)
_model = _kb.models.cnn((32, 32, 3), 10)
_model.compile(sampler="atmc", train_size=1000,
               loss=_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
_store = _kb.SampleStore("runs/cifar10_atmc/samples")
_rng = _np.random.default_rng(0)
for _step in range(4):
    _model.set_weights([w + 0.05 * _rng.standard_normal(w.shape).astype(w.dtype)
                        for w in _model.get_weights()])
    _store.append(_model, step=_step)
_x = _rng.normal(size=(50, 32, 32, 3)).astype("float32")
test_ds = _tf.data.Dataset.from_tensor_slices((_x, _rng.integers(0, 10, 50))).batch(25)
"""

#: Names the README leaves to the user, made in tests/test_readme_examples.py, which
#: runs those blocks in-process (IN_PROCESS below).
GIVEN_IN_PROCESS = {"pretrained_trunk": "examples/bayesian_last_layer.py's trunk and digits"}

PRELUDES = {
    # A sampled store in runs/cifar10_atmc/samples and test_ds (CIFAR-10 is a download).
    "cifar10_store": _CIFAR10_STORE,
    # TF Serving's REST API on localhost:8501, metadata endpoint included
    # (tests/tf_serving_standin.py).
    "tf_serving": _CIFAR10_STORE + f"""\
import sys as _sys
_sys.path.insert(0, {str(ROOT / "tests")!r})
from tf_serving_standin import start as _start
_export = _kb.PosteriorEnsemble.from_store(_store).export("saved_models/cifar10_atmc")
_start(_export, "cifar10_atmc", port=8501)
""",
}


def python_blocks():
    """[(line, code, marker)] of README.md's ```python blocks, dedented; ``marker`` is
    None or ``(kind, argument)`` of the ``<!-- snippet: ... -->`` before the fence."""
    text = README.read_text()
    blocks = []
    for match in _FENCE.finditer(text):
        indent = len(match.group(1))
        code = "".join(line[indent:] for line in match.group(2).splitlines(keepends=True))
        marker = _MARKER.search(text, 0, match.start())
        line = text.count("\n", 0, match.start()) + 1
        blocks.append((line, code, marker.groups() if marker else None))
    return blocks


def headings():
    """{line: the README heading above it} for each line outside code fences."""
    result, heading, fenced = {}, None, False
    for number, text in enumerate(README.read_text().splitlines(), 1):
        fenced ^= text.lstrip().startswith("```")
        if not fenced and re.match(r"#{1,6} \S", text):
            heading = text.lstrip("#").strip()
        result[number] = heading
    return result


def programs():
    """[((heading, n), program)] in README order: the n-th program under the heading
    its first block is under, with its prelude and the blocks that continue it."""
    above, result, seen = headings(), {}, {}
    for line, code, marker in python_blocks():
        if marker and marker[0] == "continues":
            result[(marker[1], 0)] += f"\n# README.md line {line}\n" + code
            continue
        heading = above[line]
        seen[heading] = seen.get(heading, -1) + 1
        result[(heading, seen[heading])] = (PRELUDES.get(marker[1], "") if marker else "") + code
    return list(result.items())


def run_program(code, tmp_path, timeout):
    """Runs ``code`` in a fresh process in ``tmp_path``; returns the CompletedProcess."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, timeout=timeout,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def test_every_python_block_is_valid_python():
    blocks = python_blocks()
    assert len(blocks) >= 8
    for line, code, _ in blocks:
        try:
            ast.parse(code)
        except SyntaxError as error:
            pytest.fail(f"README.md line {line}: {error}")


def test_every_marker_is_known_and_right_before_a_fence():
    blocks = python_blocks()
    for line, _, marker in blocks:
        assert marker is None or marker[1] in ({**PRELUDES, **GIVEN_IN_PROCESS}
                                               if marker[0] == "given" else
                                               {key[0] for key, _ in programs()}), line
    # A marker elsewhere is a typo: it would be ignored.
    assert README.read_text().count("<!-- snippet:") == sum(1 for *_, m in blocks if m)


def _ensemble(done, tmp_path):
    """The next free version (1), then version 7."""
    versions = sorted(p.name for p in (tmp_path / "saved_models" / "cifar10_atmc").iterdir())
    assert versions == ["1", "7", "models.config"]


def _serving(done, tmp_path):
    """The shapes and the ValueError before sending the README's comments show (until
    2026-11-30 the stand-in had no metadata endpoint: the server's 400 came instead)."""
    lines = done.stdout.splitlines()
    assert lines == ["(2, 10) (2,)", "`inputs` has shape (2, 28, 28, 1), but the signature's "
                     "input 'inputs' takes shape [-1, 32, 32, 3] (-1: any size)."]


#: Programs tests/test_readme_examples.py runs in-process, with checks of what they
#: print and make (its test named here): not run a second time in a subprocess.
IN_PROCESS = {
    ("A first example", 0): "test_the_first_example_collects_samples_and_exports",
    # with "Noise by direction", which continues it
    ("Your own model", 0): "test_the_own_model_example_samples_a_functional_model",
    ("Your own model", 1): "test_the_bayesian_last_layer_samples_the_head_on_a_frozen_trunk",
    ("Checking a prior: the prior predictive", 0):
        "test_the_prior_predictive_check_shows_the_confident_prior",
}

#: (heading, n-th program under it) -> (check of the finished run, timeout in s,
#: slow). Times measured on 2 shared cores.
EXPECTED = {
    ("Resume, tf.distribute, JAX, TPUs", 0): (None, 300, False),  # 4-7 s
    ("Posterior ensemble and TensorFlow Serving", 0): (_ensemble, 300, False),  # 7 s
    ("Query it", 0): (_serving, 300, False),  # 7 s
}


def test_every_program_is_run_once():
    """A new block gets an entry in EXPECTED (its time decides the suite it runs in) or
    a test in tests/test_readme_examples.py, named in IN_PROCESS; no block runs twice."""
    import test_readme_examples  # noqa: PLC0415 - the in-process half of these checks

    keys = [key for key, _ in programs()]
    assert sorted(keys) == sorted([*EXPECTED, *IN_PROCESS])
    assert not set(EXPECTED) & set(IN_PROCESS)
    assert all(hasattr(test_readme_examples, name) for name in IN_PROCESS.values())


@pytest.mark.parametrize("key", [
    pytest.param(key, marks=[pytest.mark.slow] if slow else [], id=f"{key[0]}-{key[1]}")
    for key, (_, _, slow) in EXPECTED.items()])
def test_the_block_runs_as_printed(key, tmp_path):
    check, timeout, _ = EXPECTED[key]
    done = run_program(dict(programs())[key], tmp_path, timeout)
    if check:
        check(done, tmp_path)


def _subparsers():
    """{subcommand: its argparse parser} of ``keras-bnn``."""
    parser = build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]  # noqa: SLF001
    return parser, action.choices


def readme_commands():
    """([(line, argv)] of the ``keras-bnn`` lines of the README's code fences, continuation
    lines joined, comments and ``...`` dropped; [argv] of its inline `keras-bnn ...`)."""
    text = README.read_text()
    fenced = []
    for match in re.finditer(r"^ *```[a-z]*\n(.*?)^ *```", text, re.M | re.S):
        start = text.count("\n", 0, match.start()) + 2
        for command in re.finditer(r"^keras-bnn (?:.*\\\n)*.*", match.group(1), re.M):
            argv = shlex.split(command.group().replace("\\\n", " "), comments=True)
            line = start + match.group(1).count("\n", 0, command.start())
            fenced.append((line, [t for t in argv[1:] if t != "..."]))
    prose = re.sub(r"^ *```.*?^ *```", "", text, flags=re.M | re.S)
    inline = [shlex.split(span.replace("[", " ").replace("]", " "))
              for span in re.findall(r"`keras-bnn ([^`]*)`", prose)]
    return fenced, inline


def test_the_readme_keras_bnn_commands_parse():
    """Each command of a shell block parses whole (values included); every
    subcommand and ``--flag`` of the prose's inline commands exists."""
    parser, commands = _subparsers()
    fenced, inline = readme_commands()
    assert len(fenced) >= 10 and len(inline) >= 20
    for line, argv in fenced:
        try:
            parser.parse_args(argv)
        except ValueError as error:
            pytest.fail(f"README.md line {line}: keras-bnn {shlex.join(argv)}: {error}")
    for argv in inline:
        known = parser if argv[0].startswith("-") else commands.get(argv[0])
        assert known is not None, f"keras-bnn {shlex.join(argv)}: no such subcommand"
        flags = [t.split("=")[0] for t in argv if t.startswith("--")]
        unknown = [f for f in flags if f not in known._option_string_actions]  # noqa: SLF001
        assert not unknown, f"keras-bnn {shlex.join(argv)}: unknown {unknown}"
