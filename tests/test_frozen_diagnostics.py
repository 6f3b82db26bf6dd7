"""Weight-space diagnostics of a sampled head on a frozen trunk: only the weights
that vary between draws are stacked (a frozen backbone is not copied per draw),
and R-hat/ESS are those of every weight."""

import tracemalloc

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import diagnostics

N, DRAWS, INPUTS, TRUNK = 48, 8, 64, 512
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _chain(path, freeze, seed):
    """An INPUTS → Dense(TRUNK) trunk (frozen with ``freeze``) → Dense(3) head, sampled by
    SGLD for DRAWS epochs, one sample per epoch."""
    keras.utils.set_random_seed(0)  # the same trunk in every chain
    inputs = keras.Input((INPUTS,))
    hidden = keras.layers.Dense(TRUNK, activation="relu", name="trunk")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3, name="head")(hidden))
    model.get_layer("trunk").trainable = not freeze
    bnn = kb.bayesian(model)
    bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=seed), train_size=N, loss=LOSS)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(N, INPUTS)).astype("float32"), np.arange(N, dtype="int32") % 3
    store = kb.SampleStore(path)
    bnn.fit(x, y, batch_size=16, epochs=DRAWS, verbose=0,
            callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    return store


def _chains(tmp_path_factory, freeze):
    root = tmp_path_factory.mktemp("frozen" if freeze else "trained")
    return [_chain(root / f"chain-{k}", freeze, seed=k) for k in range(2)]


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    return _chains(tmp_path_factory, freeze=True)


def _every_weight(stores):
    """The old matrix: every weight of every draw, flattened, ``[C, S, D]``."""
    return np.array([[np.concatenate([np.ravel(w) for w in sample.weights]) for sample in store]
                     for store in stores], dtype=np.float64)


def _head_size(store):
    return sum(int(np.prod(w.shape)) for w in store.build_model().trainable_weights)


def test_chain_weights_stack_the_sampled_head_only(frozen):
    weights = diagnostics.chain_weights(frozen)
    head = _head_size(frozen[0])
    assert weights.shape == (2, DRAWS, head) == (2, DRAWS, TRUNK * 3 + 3)
    every = _every_weight(frozen)
    np.testing.assert_array_equal(weights, every[..., -head:])  # the head is last
    summary = diagnostics.convergence_summary(weights, "weights")
    # The same R-hat and ESS as over every weight: the trunk's columns were
    # constant, left out there too; they are no longer counted as constant.
    reference = diagnostics.convergence_summary(every, "weights")
    frozen_size = every.shape[-1] - head
    assert summary["num_constant"] == reference["num_constant"] - frozen_size
    assert summary == reference | {"num_constant": summary["num_constant"]}


def test_chain_weights_never_copy_the_trunk_per_draw(frozen):
    """The old code's result alone took C·S·D_trunk·8 bytes (float64); the new
    one's peak is far below: the samples' own files hold the head only."""
    tracemalloc.start()
    try:
        diagnostics.chain_weights(frozen)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    trunk_copies = 2 * DRAWS * (INPUTS * TRUNK + TRUNK) * 8
    assert peak < trunk_copies / 4, (peak, trunk_copies)


def test_without_frozen_weights_the_matrix_is_every_weight(tmp_path_factory):
    """Regression guard: every weight is sampled, so nothing is left out and
    the matrix (so R-hat and ESS) is bit for bit the old one."""
    stores = _chains(tmp_path_factory, freeze=False)
    np.testing.assert_array_equal(diagnostics.chain_weights(stores), _every_weight(stores))


def test_the_ensemble_gives_the_varying_weights_without_the_trunk(frozen):
    ensemble = kb.PosteriorEnsemble.from_store(frozen)
    varying = ensemble.member_weights(held_once=False)
    assert [w.shape for w in varying] == [(2 * DRAWS, TRUNK, 3), (2 * DRAWS, 3)]
    assert all(w.flags.writeable for w in varying)  # stacks, not broadcast views
    flat = np.concatenate([np.reshape(w, (2 * DRAWS, -1)) for w in varying], axis=1)
    np.testing.assert_array_equal(flat.reshape(2, DRAWS, -1), diagnostics.chain_weights(frozen))
    assert len(ensemble.member_weights()) == 4  # every weight by default


def test_a_summary_of_no_varying_weight_is_nan():
    summary = diagnostics.convergence_summary(np.zeros((2, DRAWS, 0)), "weights")
    assert summary["num_components"] == summary["num_constant"] == summary["num_scored"] == 0
    assert np.isnan(summary["median"]) and np.isnan(summary["ess_bulk_min"])
    with pytest.raises(ValueError, match="without empty axes"):
        diagnostics.convergence_summary(np.zeros((0, DRAWS, 3)), "weights")


def test_inference_data_holds_the_trunk_once(frozen):
    idata = diagnostics.to_inference_data(frozen)
    assert sorted(idata.posterior.data_vars) == ["head_bias", "head_kernel"]
    assert idata.posterior["head_kernel"].shape == (2, DRAWS, TRUNK, 3)
    assert sorted(idata.constant_data.data_vars) == ["trunk_bias", "trunk_kernel"]
    np.testing.assert_array_equal(idata.constant_data["trunk_kernel"].values,
                                  frozen[0][0].weights[0])


def test_inference_data_of_one_draw_holds_every_sampled_weight(tmp_path):
    """A sampled weight stays in ``posterior`` even where the draws cannot show it
    varies (one draw): only non-trainable weights go to ``constant_data``."""
    inputs = keras.Input((3,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="head")(inputs)))
    store = kb.SampleStore(str(tmp_path / "one"))
    store.append(model, chain=0, step=0)
    idata = diagnostics.to_inference_data(store)
    assert sorted(idata.posterior.data_vars) == ["head_bias", "head_kernel"]
    assert "constant_data" not in idata.groups()
