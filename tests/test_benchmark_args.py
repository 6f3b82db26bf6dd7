"""The benchmark scripts refuse bad flags in one line (found by a user of the
README's "Benchmarks": tracebacks, silent defaults for 0, an empty table)."""

import argparse
import os
import subprocess
import sys

import pytest

from keras_bnn.cli import int_at_least

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("text, minimum", [("0", 1), ("-1", 1), ("x", 1), ("1.5", 1),
                                           ("9", 10)])
def test_int_at_least_refuses_naming_the_requirement(text, minimum):
    with pytest.raises(argparse.ArgumentTypeError, match=f"must be an int >= {minimum}; got"):
        int_at_least(minimum)(text)


def test_int_at_least_takes_the_bound():
    assert int_at_least(10)("10") == 10


@pytest.mark.parametrize("script, argv, says", [
    ("sampler_overhead.py", ["--rounds", "0"], "argument --rounds: must be an int >= 1"),
    ("sampler_overhead.py", ["--optimizers", "FOO"], "--optimizers ['FOO'] start no row's name"),
    ("epoch_overhead.py", ["--epochs", "2", "2"], "SHORT must be below LONG"),
    ("frozen_diagnostics.py", ["--members", "5"], "argument --members: must be an int >= 8"),
    ("array_pipeline.py", ["--rounds", "0"], "argument --rounds: must be an int >= 1"),
])
def test_a_benchmark_names_a_bad_flag(script, argv, says):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *argv],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert says in done.stderr.strip().splitlines()[-1]
