"""A sample store records the priors its samples were drawn under, also those no layer
config records (``keras_bnn.store_priors``): a model of the same architecture under
other priors is refused, and stores written before the record keep working."""

import json
import os
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import store as store_lib
from keras_bnn import store_fingerprint
from layer_models import CASES, Scale
from fit_helpers import append_at_once

#: The cases whose priors are in no layer config, each with the ``priors`` key that
#: names the weights given another prior: the query projection of a
#: MultiHeadAttention, a custom layer's ``add_weight``, a subclassed model's kernels.
UNRECORDED = {"multi_head_attention": ("mha/query/kernel", "'mha/query/kernel'"),
              "custom_weight": ("w", "'scale.*/w'"),
              "subclassed": ("kernel", "'two_dense.*/dense.*/kernel'")}


def _model(name, stddev):
    """Case ``name`` of ``layer_models`` with a ``Normal(0, stddev)`` prior on the
    weights ``UNRECORDED[name]`` names (the other weights: ``kb.bayesian``'s defaults)."""
    keras.utils.set_random_seed(0)
    key = UNRECORDED[name][0]
    return kb.bayesian(CASES[name][0](), priors={key: kb.priors.Normal(0.0, stddev)})


@pytest.mark.parametrize("name", sorted(UNRECORDED))
def test_a_model_whose_unrecorded_prior_differs_is_refused(name, tmp_path):
    """Same architecture (same fingerprint), another prior where no layer config
    records it: ``append`` and ``from_store(model=...)`` refuse it, naming the store,
    the weight and both priors; the same priors in a new instance (a subclassed
    model's layers numbered anew) are accepted."""
    store = kb.SampleStore(tmp_path / "samples")
    store.append(_model(name, 0.7))
    other = _model(name, 0.1)
    assert (store_lib.architecture_of(other)["fingerprint"]
            == store.architecture["fingerprint"])
    says = (f"SampleStore '{store.path}' holds samples drawn under other priors.*"
            f"{UNRECORDED[name][1]}: Normal\\(mean=0.0, stddev=0.7\\) in the store, "
            "Normal\\(mean=0.0, stddev=0.1\\) in the model.*use a new store path")
    with pytest.raises(ValueError, match=says):
        store.append(other)
    with pytest.raises(ValueError, match=says):
        kb.PosteriorEnsemble.from_store(store, model=other)
    assert len(store) == 1
    store.append(_model(name, 0.7))
    assert len(store) == 2


def test_a_sample_copied_from_a_store_of_other_priors_is_refused(tmp_path):
    """Its fingerprint matches, its priors digest does not: reading it names the file."""
    wide, narrow = kb.SampleStore(tmp_path / "wide"), kb.SampleStore(tmp_path / "narrow")
    wide.append(_model("custom_weight", 0.7), step=0)
    narrow.append(_model("custom_weight", 0.1), step=0)
    os.link(tmp_path / "narrow" / "sample-000000.npz", tmp_path / "wide" / "sample-000001.npz")
    with pytest.raises(ValueError, match="sample-000001.npz was drawn under other priors"):
        wide.metadata()
    with pytest.raises(ValueError, match="sample-000001.npz"):
        kb.PosteriorEnsemble.from_store(wide)


def test_chains_of_other_priors_are_not_pooled(tmp_path):
    """``from_store`` of two stores (two chains) of one architecture, other priors."""
    stores = [kb.SampleStore(tmp_path / f"chain-{i}") for i in range(2)]
    for store, stddev in zip(stores, (0.7, 0.1)):
        store.append(_model("multi_head_attention", stddev))
    with pytest.raises(ValueError, match="sampled under different priors.*chain-1.*"
                       "'mha/query/kernel': Normal\\(mean=0.0, stddev=0.7\\) in the first"):
        kb.PosteriorEnsemble.from_store(stores)


def test_threads_binding_other_priors_one_wins(tmp_path):
    """Of first binders under different priors exactly one wins (``store.json``, with
    the priors, is created exclusively); the others are refused."""
    store = kb.SampleStore(tmp_path / "samples")
    models = [_model("custom_weight", 0.7), _model("custom_weight", 0.1)] * 3
    outcomes = append_at_once(store, models)
    winners = {o % 2 for o in outcomes if isinstance(o, int)}
    assert len(winners) == 1
    losers = [o for o in outcomes if isinstance(o, str)]
    assert len(losers) == 3 and all("other priors" in o for o in losers)
    assert len(store) == 3


def test_a_store_written_before_priors_were_recorded_reads_and_extends(tmp_path):
    """Regression guard (passes on main too): a store without the record (its
    manifest without ``priors``, its samples without ``priors_digest``) is read
    and appended to as before, priors unchecked (the store cannot tell them),
    and the fingerprint does not cover the priors (existing stores keep theirs)."""
    path = tmp_path / "samples"
    store = kb.SampleStore(path)
    store.append(_model("custom_weight", 0.7), step=0)
    manifest = json.loads((path / "store.json").read_text())
    manifest.pop("priors", None)
    (path / "store.json").write_text(json.dumps(manifest))
    sample = path / "sample-000000.npz"
    with np.load(sample) as data:
        entries = {name: data[name] for name in data.files if name != "priors_digest"}
    np.savez(sample, **entries)
    store.append(_model("custom_weight", 0.1), step=1)
    assert [m["step"] for m in store.metadata()] == [0, 1]
    with np.load(path / "sample-000001.npz") as data:
        assert "priors_digest" not in data.files
    assert kb.PosteriorEnsemble.from_store(store).num_members == 2
    layers, weights = manifest["layers"], manifest["weights"]
    assert manifest["fingerprint"] == store_fingerprint._fingerprint(layers, weights)


def test_a_corrupt_record_of_priors_is_reported(tmp_path):
    path = tmp_path / "samples"
    kb.SampleStore(path).append(_model("custom_weight", 0.7))
    manifest = json.loads((path / "store.json").read_text())
    manifest["priors"] = {"digest": 3}
    (path / "store.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="store.json is corrupt"):
        kb.SampleStore(path).append(_model("custom_weight", 0.7))


def _square(w):
    return keras.ops.sum(w * w)


def test_a_regularizer_keras_cannot_serialize_is_recorded_by_name(tmp_path):
    """A function (a lambda included) as a custom weight's regularizer: recorded by
    its name, without Keras' warning about serializing a lambda, and told apart
    from a Keras regularizer."""
    inputs = keras.Input((4,))
    layer = Scale()
    model = keras.Model(inputs, layer(inputs))
    store = kb.SampleStore(tmp_path / "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Keras warns when it serializes a lambda
        layer.w.regularizer = _square
        store.append(model)
        layer.w.regularizer = lambda w: _square(w)
        with pytest.raises(ValueError, match="'scale.*/w': test_store_priors._square\\(\\) "
                           "in the store, .*<lambda>\\(\\) in the model"):
            store.append(model)
    layer.w.regularizer = keras.regularizers.L2(0.5)
    with pytest.raises(ValueError, match="_square\\(\\) in the store, L2\\(l2=0.5\\) in"):
        store.append(model)
    assert len(store) == 1
