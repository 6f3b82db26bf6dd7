"""The lead's changes of session 39: ``Sampler.loads_whole`` (the one decision of which saved
states a sampler restores whole, shared by ``load_own_variables`` and the run backups), table
cells below 10⁻³, and the class bound of in-memory labels."""

import os

import keras
import numpy as np
import pytest

from keras_bnn import console, runs, samplers
from keras_bnn.samplers.state_layout import (ADDED_SINCE_NAMES,
                                             ADDED_TO_UNNAMED_STATES, NAMES_KEY)
from fit_helpers import softmax_regression, three_class_rows

X, Y = three_class_rows(30)


def _state(sampler):
    store = {}
    sampler.save_own_variables(store)
    return store


def _fitted(sampler):
    softmax_regression(sampler, 30).fit(X, Y, batch_size=10, epochs=1, verbose=0)
    return sampler


def test_named_unnamed_and_short_states_load_whole_and_another_samplers_does_not():
    sghmc = _fitted(samplers.SGHMC(seed=1))
    named = _state(sghmc)
    unnamed = {key: value for key, value in named.items() if key != NAMES_KEY}
    names = sghmc.state_names()
    since = [name.split("/")[0] in ADDED_SINCE_NAMES for name in names]
    before = [value for added, value in zip(since, sghmc.variables) if not added]
    short = [value for name, value in zip(names, sghmc.variables)
             if name not in ADDED_TO_UNNAMED_STATES and name.split("/")[0] not in ADDED_SINCE_NAMES]
    assert len(short) < len(before) < len(names)  # the sampler has the added variables
    assert sghmc.loads_whole(named)
    assert sghmc.loads_whole(unnamed)
    for state in (before, short):  # the two unnamed layouts saved before names
        assert sghmc.loads_whole({str(i): keras.ops.convert_to_numpy(v)
                                  for i, v in enumerate(state)})
    sgld = _fitted(samplers.SGLD(seed=1))
    other = {key: value for key, value in _state(sgld).items() if key != NAMES_KEY}
    assert len(other) != len(names)
    assert not sghmc.loads_whole(other)
    assert sghmc.loads_whole(_state(sgld))  # named: loads by name, with a warning


def test_a_table_shows_values_below_a_thousandth_to_four_significant_digits():
    """A kinetic band at T = 1e-4 printed as "0.0001 ... 0.0001" beside a t_kin of
    "0.0002" (four decimals leave one digit; diag39): the reader could not see why
    the row was outside its band."""
    table = console.format_table([{"lo": 0.000123, "hi": 0.000187, "t_kin": 0.000214,
                                   "nll": 0.1384}], ["lo", "hi", "t_kin", "nll"])
    assert table.split("\n")[-1].split() == ["1.230e-04", "1.870e-04", "2.140e-04", "0.1384"]


def test_in_memory_labels_get_the_npy_files_class_bound():
    """``runs.arrays_data`` (runs.train/sweep on arrays, ``sweep --x/--y``) made a head
    of ``y.max() + 1`` classes: a label 10**12 asked for 10**12 + 1 (data39), and a
    label -1 was taken. Now the npy loader's rule, naming the argument and row."""
    x = np.zeros((5, 2), "float32")
    good = runs.arrays_data(x, np.array([0, 1, 2, 1, 0]), 2, 0, "categorical", x,
                            np.array([2, 1, 0, 0, 1]))
    assert good[2]["num_classes"] == 3
    with pytest.raises(ValueError, match=r"`y` must hold class labels .*label 1000000000000 "
                                         r"in row 2: 1000000000001 classes for 3 distinct"):
        runs.arrays_data(x, np.array([0, 1, 10**12, 1, 0]), 2, 0, "categorical", x,
                         np.array([0, 1, 0, 1, 0]))
    with pytest.raises(ValueError, match=r"`y_test` must hold class labels 0, 1, ..., K-1.*"
                                         r"label -1"):
        runs.arrays_data(x, np.array([0, 1, 2, 1, 0]), 2, 0, "categorical", x,
                         np.array([0, -1, 0, 1, 0]))


def test_store_metadata_follows_a_sample_file_written_again_under_its_name(tmp_path):
    """``SampleStore.metadata`` cached by file name: after the newest sample was deleted
    and the store appended again (the name is reused), a long-lived store object
    returned the deleted sample's metadata (store39)."""
    import keras_bnn as kb  # noqa: PLC0415

    model = softmax_regression(samplers.SGLD(seed=0), 30)
    model.build((None, 4))
    store = kb.SampleStore(str(tmp_path / "samples"))
    store.append(model, step=1)
    store.append(model, step=2)
    assert [m["step"] for m in store.metadata()] == [1, 2]
    os.remove(store._files()[-1][1])
    store.append(model, step=3)
    assert [m["step"] for m in store.metadata()] == [1, 3]


def test_bfloat16_labels_pass_the_fit_label_check():
    """``label_checks.check_labels`` refused bfloat16 labels ("must be numeric labels;
    got dtype bfloat16": ml_dtypes' kind is "V"), which the metrics now score (uncert39)."""
    import ml_dtypes  # noqa: PLC0415

    from keras_bnn import label_checks  # noqa: PLC0415

    labels = np.array([2, 1, 0], ml_dtypes.bfloat16)
    label_checks.check_labels(labels, "categorical", classes=3)
    with pytest.raises(ValueError, match=r"`y` must be class indices in \[0, 2\]"):
        label_checks.check_labels(np.array([3, 1, 0], ml_dtypes.bfloat16), "categorical",
                                  classes=3)
