"""``Sampler.loads_whole``: the one decision of which saved states a sampler restores whole,
shared by ``load_own_variables`` and the run backups (``runs/checkpoints.py``)."""

import keras

from keras_bnn import console, samplers
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
