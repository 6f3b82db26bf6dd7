"""The old-file priors warning of a subclassed BayesianModel: at a reload, not at a user's
build; prints ``RESULT <json>``.

Run by ``tests/test_small_gaps.py`` in a process of its own (a subclass of
``kb.BayesianModel`` must be made before any functional one in its
process). For ``Net`` (Keras' ``from_config``) and ``OwnFromConfig`` (its
own, which Keras builds after): the warnings of a fresh model's manual
``build_from_config`` (its weights flat: no prior in its code), and of the
reload of a ``.keras`` file saved without the priors' record.

Usage: python manual_build.py DIR
"""

import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from subclass_priors import Net, OwnFromConfig, as_before_the_record  # noqa: E402


def build_warnings(cls):
    """The MissingPriorWarning messages of ``cls().build_from_config(...)``."""
    net = cls()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net.build_from_config({"input_shape": [None, 3]})
    assert len(net.trainable_variables) == 3  # built (Keras leaves `built` unset)
    return net, [str(w.message) for w in caught
                 if type(w.message).__name__ == "MissingPriorWarning"]


def main(tmp):
    result = {}
    for cls in (Net, OwnFromConfig):
        net, built = build_warnings(cls)
        net.save(tmp / f"{cls.__name__}.keras")
        old = as_before_the_record(tmp / f"{cls.__name__}.keras",
                                   tmp / f"{cls.__name__}-old.keras")
        result[cls.__name__] = {"build": built, "old_file": old["warnings"]}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
