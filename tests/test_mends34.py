"""Review leftovers: kinetic_temperature_report's errors name the variable; brier
without a one-hot copy; the diagnostics split keeps kb.diagnostics' names."""

import keras
import numpy as np
import pytest

from keras_bnn import diagnostics, stored_chains, temperature_report


@pytest.mark.parametrize("per_variable, shown", [
    ({"dense/kernel": (1.0, 0)}, r"\(1\.0, 0\)"),
    ({"dense/kernel": (1.0, 2.5)}, r"\(1\.0, 2\.5\)"),
    ({"dense/kernel": (1.0, [3, 4])}, r"\(1\.0, \[3, 4\]\)"),
    ({"dense/kernel": ("hot", 3)}, r"\('hot', 3\)"),
    ([("ok", 1.0, 10), ("dense/kernel", 1.0, -1)], r"\(1\.0, -1\)")])
def test_kinetic_temperature_report_names_the_variable_of_a_bad_entry(per_variable, shown):
    # Before: "`d` must be an int >= 1; got 0." (no variable), or numpy's own
    # "could not convert string to float" / "inhomogeneous shape".
    with pytest.raises(ValueError, match=r"kinetic_temperature_report: `per_variable\["
                                         r"'dense/kernel'\]` must be a \(T_kin, d\) pair: "
                                         r"T_kin a number, d an int >= 1 .*; got " + shown):
        diagnostics.kinetic_temperature_report(per_variable, temperature=1.0)


def test_kinetic_temperature_report_keeps_good_entries_and_nan():
    rows = diagnostics.kinetic_temperature_report(
        {"w": (np.float32(1.0), np.int64(100)), "b": (float("nan"), 4)}, temperature=1.0)
    assert [(row.name, row.d, row.inside_band) for row in rows] == [("w", 100, True),
                                                                  ("b", 4, False)]
    assert isinstance(rows[0].d, int) and np.isnan(rows[1].t_kin)


def test_diagnostics_names_are_their_homes():
    for name in ("chain_weights", "chain_predictions", "to_inference_data"):
        assert getattr(diagnostics, name) is getattr(stored_chains, name)
    for name in ("temperature_band", "KineticTemperatureRow", "kinetic_temperature_report"):
        assert getattr(diagnostics, name) is getattr(temperature_report, name)
    assert all(hasattr(diagnostics, name) for name in diagnostics.__all__)



@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's helpers")
def test_backend_takes_the_distribute_helpers_from_their_home():
    """TensorFlow's five tf.distribute names come from tensorflow_distribute.py
    itself (before: assignments in tensorflow.py that handed them on)."""
    from keras_bnn import backend  # noqa: PLC0415 - imports TensorFlow
    from keras_bnn.backend import tensorflow, tensorflow_distribute  # noqa: PLC0415

    names = ("num_replicas", "adopt_current_strategy", "loss_as_shard", "assign_replicated",
             "assign_where")
    assert all(getattr(backend, name) is getattr(tensorflow_distribute, name) for name in names)
    assert [name for name in names if hasattr(tensorflow, name)] == []
