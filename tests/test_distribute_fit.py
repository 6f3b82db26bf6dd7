"""``fit`` and ``evaluate`` under MirroredStrategy (2 logical CPUs, tests/conftest.py)
as a user calls them, against the same calls on one device.

The sampler's noise is keyed on (seed, variable, step), so a chain under
the strategy must equal the single-device chain to float round-off; the
logged metrics and the checks of the data must read the global batch.
"""

import contextlib
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import LOSS, softmax_regression, three_class_rows

N = 20


def _model(sampler, train_size=N, strategy=None, loss=LOSS):
    return softmax_regression(sampler, train_size, strategy, loss)


def _data():
    return three_class_rows(N)


def test_a_sampler_made_outside_the_scope_takes_the_single_device_chain(new_strategy):
    """Its step counter was a plain variable that each replica incremented:
    2 a step on 2 replicas, so the noise keys skipped every other step (and
    the warm-up lasted half its steps: h froze at 2e-8 instead of 4e-8 for
    warmup_steps=20)."""
    x, y = _data()
    runs = []
    for strategy in (None, new_strategy()):
        sampler = kb.samplers.SGLD(step_size=1e-2, seed=1)  # made before the scope
        model = _model(sampler, strategy=strategy)
        model.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0)
        assert int(model.optimizer.iterations.numpy()) == 4  # was 8 under the strategy
        runs.append(model.get_weights())
    # The noise of a step has sd sqrt(2h/n) ~ 0.03; float32 round-off of 4
    # steps on weights of order 1 is ~1e-7.
    for single, mirrored in zip(*runs):
        np.testing.assert_allclose(mirrored, single, rtol=0, atol=1e-5)


def test_a_distributed_dataset_is_counted_as_its_global_batches(new_strategy):
    """``fit(strategy.experimental_distribute_dataset(ds))``, which Keras
    takes, raised "'numpy.int64' object is not callable" (its cardinality is
    a property); its batches are counted whole, not per replica."""
    strategy = new_strategy()
    dataset = tf.data.Dataset.from_tensor_slices(_data()).batch(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.TrainSizeWarning)
        _model("sgld", strategy=strategy).fit(
            strategy.experimental_distribute_dataset(dataset), epochs=1, verbose=0)
    with pytest.warns(kb.TrainSizeWarning, match=r"2 batches of 10 examples .* "
                                                 r"compile\(train_size=40\)"):
        _model("sgld", 2 * N, strategy).fit(
            strategy.experimental_distribute_dataset(dataset), epochs=1, verbose=0)


@pytest.mark.parametrize("batch_size", [7, 3])
def test_evaluate_and_val_nll_average_every_example_once(batch_size, new_strategy):
    """A batch that splits unevenly over the replicas (7: 4 + 3) gave the
    mean of the two replicas' means (nll 1.0301 for 1.0262 on one device)."""
    x, y = _data()
    single = _model("sgld")
    mirrored = _model("sgld", strategy=new_strategy())
    mirrored.set_weights(single.get_weights())
    expected = single.evaluate(x, y, batch_size=N, verbose=0, return_dict=True)["nll"]
    got = mirrored.evaluate(x, y, batch_size=batch_size, verbose=0, return_dict=True)
    assert got["nll"] == pytest.approx(expected, rel=1e-6)  # float32 sums in another order
    assert got["loss"] == got["nll"]
    history = mirrored.fit(x, y, batch_size=N, epochs=1, verbose=0,
                           validation_data=(x, y), validation_batch_size=batch_size)
    assert history.history["val_nll"][0] == pytest.approx(
        mirrored.evaluate(x, y, batch_size=N, verbose=0, return_dict=True)["nll"], rel=1e-6)


def test_a_checkpoint_loaded_outside_the_scope_goes_on_with_the_chain(tmp_path, new_strategy):
    """``load_weights`` of a ModelCheckpoint(save_weights_only=True) file, called
    outside ``strategy.scope()`` as Keras allows, built the sampler's state as
    plain variables that each replica updated (weights 0.013 off the
    straight run after one epoch)."""
    strategy, (x, y), path = new_strategy(), _data(), str(tmp_path / "chain.weights.h5")

    def fit(model, callbacks=()):
        model.fit(x, y, batch_size=10, epochs=1, shuffle=False, verbose=0,
                  callbacks=list(callbacks))

    def new_model():
        return _model(kb.samplers.SGHMC(step_size=1e-2, seed=2), strategy=strategy)

    straight = new_model()
    fit(straight)
    fit(straight)
    fit(new_model(), [keras.callbacks.ModelCheckpoint(path, save_weights_only=True)])
    resumed = new_model()
    resumed.load_weights(path)
    fit(resumed)
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(b, a)  # the same graph on the same values


@pytest.mark.parametrize("inside", [
    "bayesian_compile_fit", "compile_fit", "build", "compile", "bayesian_compile"])
def test_weights_made_under_another_strategy_are_refused_by_name(inside, new_strategy):
    """kb.bayesian shares the Keras model's weights: built on one side of
    ``strategy.scope()`` and trained on the other, fit failed inside
    TensorFlow ("`colocate_vars_with` must only be passed a variable created
    in this tf.distribute.Strategy.scope()", or a TypeError); compiled inside
    and fit outside, with "DistributedVariable.numpy() is only available when
    eager execution is enabled". ``compile`` in the scope refuses weights made
    outside it; ``fit`` refuses weights made under another strategy than the
    model's."""
    strategy = new_strategy()

    def scope(step):
        return strategy.scope() if step in inside else contextlib.nullcontext()

    with scope("build"):
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(3, name="out")(inputs))
    with scope("bayesian"):
        model = kb.bayesian(model)
    refused = pytest.raises(ValueError, match="(fit|compile): the model's weights must be "
                            "made under the strategy it trains in .*'out/kernel'.*scope")
    with scope("compile"), refused if "build" not in inside else contextlib.nullcontext():
        model.compile(sampler=kb.samplers.SGLD(step_size=1e-2), train_size=N,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if "build" not in inside and "compile" in inside:
        return  # refused by compile
    with scope("fit"), refused:
        model.fit(*_data(), batch_size=10, epochs=1, verbose=0)


@pytest.mark.parametrize("sampler, batch_size", [
    (lambda: kb.samplers.HMC(step_size=0.05, num_leapfrog_steps=3, seed=1), 15),
    (lambda: kb.samplers.SGLD(step_size=1e-2, seed=1), 7),
], ids=["HMC-15-on-8+7", "SGLD-7-on-4+3"])
def test_a_batch_that_splits_unevenly_gives_the_single_device_chain(
        sampler, batch_size, new_strategy):
    """Keras weighs each replica's mean NLL 1/R: full-batch HMC on 15
    examples (shards of 8 and 7) sampled another posterior than on one
    device (each example weighed 15/16 or 15/14; weights 0.32 apart after 3
    steps), and a batch of 7 (4 + 3) made an SG step 24 % off the
    single-device step."""
    x, y = (a[:15] for a in _data())
    runs = []
    for strategy in (None, new_strategy()):
        model = _model(sampler(), train_size=15, strategy=strategy)
        history = model.fit(x, y, batch_size=batch_size, epochs=3, shuffle=False, verbose=0)
        runs.append((model.get_weights(), history.history))
    (single, logs), (mirrored, mirrored_logs) = runs
    # Float32 sums in another order over 3-9 steps on weights of order 1.
    for a, b in zip(single, mirrored):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)
    for key in ("loss", "nll", "prior"):
        np.testing.assert_allclose(mirrored_logs[key], logs[key], rtol=1e-5)


@pytest.mark.parametrize("sampler, reduction", [
    (lambda: kb.samplers.SGLD(step_size=1e-2, seed=1), "mean_with_sample_weight"),
    pytest.param(lambda: kb.samplers.HMC(step_size=0.05, num_leapfrog_steps=3, seed=1),
                 "mean_with_sample_weight", marks=pytest.mark.slow),  # 15-30 s
    (lambda: kb.samplers.SGLD(step_size=1e-2, seed=1), "sum_over_batch_size"),
], ids=["SGLD", "HMC", "SGLD-plain-mean"])
def test_weights_on_a_batch_that_splits_unevenly_give_the_single_device_step(
        sampler, reduction, new_strategy):
    """A loss of reduction "mean_with_sample_weight" is ``Σ_r w·ℓ / Σ_r w`` on
    each replica, and the step weighed it as a plain mean (``R·b_r/B``): one
    SG step on a batch of 7 (4 + 3) with uneven weights had its drift 34 %
    off the single-device step, and ``nll`` read 0.8218 for 0.8065 in
    training, ``evaluate`` and ``val_nll``; one HMC transition (its own
    all-reduce) left weights 0.0034 apart. The plain mean is a guard."""
    x, y = (a[:7] for a in _data())
    weights = np.array([1.0, 2.0, 3.0, 0.5, 4.0, 1.0, 1.5], "float32") / 1.857  # mean ~1
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    runs = []
    for strategy in (None, new_strategy()):
        model = _model(sampler(), 7, strategy, loss)
        evaluated = model.evaluate(x, y, sample_weight=weights, batch_size=7, verbose=0,
                                   return_dict=True)["nll"]
        logs = model.fit(x, y, sample_weight=weights, batch_size=7, epochs=1, shuffle=False,
                         verbose=0, validation_data=(x, y, weights),
                         validation_batch_size=7).history
        runs.append((model.get_weights(), evaluated, logs))
    (single, evaluated, logs), (mirrored, mirrored_evaluated, mirrored_logs) = runs
    # SGLD's drift is ~0.02 (weights were 0.003 apart); float32 round-off ~1e-7.
    for a, b in zip(single, mirrored):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)
    assert mirrored_evaluated == pytest.approx(evaluated, rel=1e-6)
    for key in ("loss", "nll", "prior", "val_nll"):
        np.testing.assert_allclose(mirrored_logs[key], logs[key], rtol=1e-5)


def test_weights_in_a_dataset_are_counted_over_the_replicas(new_strategy):
    """fit's count of a dataset's weights is per replica, summed when read: a
    batch of 7 splits 4 + 3, and the mean is still the 20 weights'."""
    x, y = _data()
    weights = np.linspace(1.0, 5.0, N).astype("float32")  # mean 3
    dataset = tf.data.Dataset.from_tensor_slices((x, y, weights)).batch(7)
    with pytest.warns(kb.TrainSizeWarning, match=r"the sample_weight in fit's data has mean 3 "
                                                 r"over the first epoch's 20 weights"):
        _model("sgld", strategy=new_strategy()).fit(dataset, epochs=1, verbose=0)


def test_a_datasets_loss_terms_are_counted_over_the_replicas(new_strategy):
    """The train step's count of a per-timestep loss's terms (here labels not the
    loss's ignore_class) is per replica, summed when read after the first epoch:
    batches of 7 split 4 + 3, and the count is the 118 labels scored of 33 sequences."""
    x, labels, _ = _padded_labels(33)
    dataset = tf.data.Dataset.from_tensor_slices((x, labels)).batch(7)
    model = _padded_tagger_model("sgld", new_strategy(), 20)  # train_size 105
    with pytest.warns(kb.TrainSizeWarning, match=r"33 sequences \(examples\) of 118 loss "
                                                 r"terms .* compile\(train_size=105\)"):
        model.fit(dataset, epochs=1, verbose=0)


def _masked_sequence_model(sampler, strategy, n):
    """Embedding(mask_zero=True) → a per-timestep Gaussian head (Keras masks its loss)."""
    keras.utils.set_random_seed(0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        inputs = keras.Input((6,), dtype="int32")
        hidden = keras.layers.Embedding(10, 4, mask_zero=True,
                                        embeddings_regularizer=kb.priors.Normal(0, 1))(inputs)
        outputs = keras.layers.Dense(1, kernel_regularizer=kb.priors.Normal(0, 1),
                                     bias_regularizer=kb.priors.Normal(0, 1))(hidden)
        model = kb.BayesianModel(inputs, outputs)
        # train_size counts the loss's terms, the unmasked timesteps (_masked_sequences)
        model.compile(sampler=sampler, train_size=17 * 6 + (n - 17), loss="mse")
    return model


def _padded_tagger_model(sampler, strategy, n):
    """A per-timestep softmax head whose loss ignores the padding label -1 (no Keras mask)."""
    keras.utils.set_random_seed(0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        inputs = keras.Input((6,), dtype="int32")
        hidden = keras.layers.Embedding(10, 4,
                                        embeddings_regularizer=kb.priors.Normal(0, 1))(inputs)
        outputs = keras.layers.Dense(3, kernel_regularizer=kb.priors.Normal(0, 1),
                                     bias_regularizer=kb.priors.Normal(0, 1))(hidden)
        model = kb.BayesianModel(inputs, outputs)
        # train_size counts the labels scored, not -1 (_padded_labels)
        model.compile(sampler=sampler, train_size=17 * 6 + (n - 17), loss=(
            keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)))
    return model


def _two_head_model(sampler, strategy, n):
    """A softmax head and a Gaussian head, both losses "mean_with_sample_weight"."""
    keras.utils.set_random_seed(0)
    regularized = {"kernel_regularizer": kb.priors.Normal(0, 1),
                   "bias_regularizer": kb.priors.Normal(0, 1)}
    with strategy.scope() if strategy else contextlib.nullcontext():
        inputs = keras.Input((4,))
        heads = [keras.layers.Dense(3, name="classes", **regularized)(inputs),
                 keras.layers.Dense(1, name="value", **regularized)(inputs)]
        model = kb.BayesianModel(inputs, heads)
        model.compile(sampler=sampler, train_size=n, loss_weights=[1.0, 0.5], loss=[
            keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight"),
            keras.losses.MeanSquaredError(reduction="mean_with_sample_weight")])
    return model


def _masked_sequences(n):
    """17 sequences of 6 tokens, then ``n - 17`` of one (the rest padding 0)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 10, size=(n, 6)).astype("int32")
    tokens[np.arange(n) >= 17, 1:] = 0
    return tokens, rng.normal(size=(n, 6, 1)).astype("float32"), None


def _padded_labels(n):
    """17 sequences labelled at every token, then ``n - 17`` at their first (the rest -1)."""
    tokens, _, _ = _masked_sequences(n)
    tokens[:, 1:] = np.random.default_rng(1).integers(1, 10, size=(n, 5))
    labels = tokens % 3
    labels[np.arange(n) >= 17, 1:] = -1
    return tokens, labels, None


def _two_head_rows(n):
    x, y = three_class_rows(n)
    return x, [y, np.cos(x[:, :1])], np.linspace(0.2, 3.0, n).astype("float32")


@pytest.mark.parametrize("make_model, make_data", [
    (_masked_sequence_model, _masked_sequences),
    (_padded_tagger_model, _padded_labels),
    pytest.param(_two_head_model, _two_head_rows, marks=pytest.mark.slow),  # 37 s on 2 cores
], ids=["masked-timesteps", "ignore-class-padding", "two-heads-weighted"])
def test_each_output_weighs_by_its_share_of_a_batch_that_splits_unevenly(
        make_model, make_data, new_strategy):
    """Each replica's loss divides by its own denominator: its unmasked
    timesteps, or (per output) its sum of weights. The step weighed it by
    the replica's examples (b_r/B): on a batch of 33 (17 + 16), a masked
    per-timestep loss (17 full sequences, 16 of one timestep) made an SGLD
    step's drift 14 % off the single-device step and nll read 1.0756 for
    1.0305; two "mean_with_sample_weight" heads with weights, 11 % and
    1.9782 for 2.0510 (the single-output rescaling missed a list of losses).
    Labels padded with the loss's ``ignore_class`` (no Keras mask: the loss
    masks its own values) were refused by fit until 2026-11-29, and counted
    as scored by the replica's share (16 sequences of one label): drift 39 %
    off, nll 1.0994 for 1.1025."""
    n = 33
    x, y, weights = make_data(n)
    runs = []
    for strategy in (None, new_strategy()):
        model = make_model(kb.samplers.SGLD(step_size=1e-2, seed=1), strategy, n)
        start = model.get_weights()
        evaluated = model.evaluate(x, y, sample_weight=weights, batch_size=n, verbose=0,
                                   return_dict=True)["nll"]
        logs = model.fit(x, y, sample_weight=weights, batch_size=n, epochs=1, shuffle=False,
                         verbose=0).history
        runs.append(([b - a for a, b in zip(start, model.get_weights())], evaluated, logs))
    (single, evaluated, logs), (mirrored, mirrored_evaluated, mirrored_logs) = runs
    # the drift of one step; float32 round-off of sums in another order ~1e-7 relative
    for a, b in zip(single, mirrored):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max())
    assert mirrored_evaluated == pytest.approx(evaluated, rel=1e-6)
    for key in ("loss", "nll", "prior"):
        np.testing.assert_allclose(mirrored_logs[key], logs[key], rtol=1e-5)


class _BatchLogs(keras.callbacks.Callback):
    """Records the logs of every training and test batch."""

    def __init__(self):
        super().__init__()
        self.logs = {"train": [], "test": []}

    def on_train_batch_end(self, batch, logs=None):
        self.logs["train"].append({k: float(v) for k, v in logs.items()})

    def on_test_batch_end(self, batch, logs=None):
        self.logs["test"].append({k: float(v) for k, v in logs.items()})


def test_batch_logs_are_the_global_batches(new_strategy):
    """Keras averaged each replica's running means into a batch's logs:
    on 20 rows in batches of 7 (shards of 4 + 3), ``evaluate``'s (and the
    validation's: the same test step) ``loss`` read 1.2384 after the second batch for the data's
    1.2323, and training's ``nll`` 1.2166 for 1.2042 (the epoch's logs
    were right: Keras reads them from the metrics)."""
    x, y = _data()
    runs = []
    for strategy in (None, new_strategy()):
        model = _model(kb.samplers.SGLD(step_size=1e-2, seed=1), strategy=strategy)
        recorded = _BatchLogs()
        model.fit(x, y, batch_size=7, epochs=1, shuffle=False, verbose=0, callbacks=[recorded])
        model.evaluate(x, y, batch_size=7, verbose=0, callbacks=[recorded])
        runs.append(recorded.logs)
    single, mirrored = runs
    for kind, keys in (("train", ("loss", "nll", "prior")), ("test", ("loss", "nll"))):
        assert len(mirrored[kind]) == len(single[kind]) == 3
        for a, b in zip(single[kind], mirrored[kind]):
            for key in keys:  # float32 sums in another order
                assert b[key] == pytest.approx(a[key], rel=1e-5), (kind, key)


def test_each_outputs_loss_log_is_the_global_batches(new_strategy):
    """Keras weighs an output's loss tracker by the predictions' static batch size,
    None in TensorFlow's step graph, so each batch's mean weighed 1, and under
    tf.distribute each replica's: on 20 rows in batches of 7 (shards of 4 + 3), two
    weighted heads logged ``classes_loss`` 1.1835 for the single device's 1.1456 (a
    mean of batch means itself: λ-weighted, the heads summed to 1.7883 for ``nll``
    1.7956); ``loss``, ``nll`` and ``prior`` were right. Now each update weighs by
    its shard's size, summed over the replicas when read: the heads are example
    means, summing to ``nll``, and the same on one device and two, in training and
    ``evaluate``."""
    x, y, weights = _two_head_rows(N)
    runs = []
    for strategy in (None, new_strategy()):
        model = _two_head_model(kb.samplers.SGLD(step_size=1e-2, seed=1), strategy, N)
        runs.append(model.fit(x, y, sample_weight=weights, batch_size=7, epochs=1,
                              shuffle=False, verbose=0).history)
    evaluated = model.evaluate(x, y, sample_weight=weights, batch_size=7, verbose=0,
                               return_dict=True)
    # nll is the example mean of each batch's Σ_k λ_k·L_k (λ = 1, 0.5): so are the heads'
    for logs in (*runs, {key: [value] for key, value in evaluated.items()}):
        heads = logs["classes_loss"][0] + 0.5 * logs["value_loss"][0]
        assert heads == pytest.approx(logs["nll"][0], rel=1e-5)
    for key in ("classes_loss", "value_loss", "loss"):  # float32 sums in another order
        np.testing.assert_allclose(runs[1][key], runs[0][key], rtol=1e-5)
