"""``fit``'s arguments and input pipelines that change the sampled posterior.

The potential is ``U(θ) = n·(1/b)·Σ_batch w_i·ℓ_i − log p(θ)`` with
n = ``train_size``: a dataset or ``PyDataset`` of another size than n, a
``validation_split`` that keeps fewer rows than n, or weights that do not
average 1 change the posterior's width silently unless ``fit`` says so
(:class:`keras_bnn.TrainSizeWarning`); a dataset of single examples must be
refused with a message that says to batch it, not a shape error from inside
the model; HMC must warn when a dataset's batches hold fewer than n rows."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import Batches, softmax_regression, three_class_rows

N = 20


def _model(sampler="sgld", train_size=N):
    return softmax_regression(sampler, train_size)


def _data():
    return three_class_rows(N)


def _dataset():
    return tf.data.Dataset.from_tensor_slices(_data())


def _Batches(size=5):
    return Batches(*_data(), size)


def _no_train_size_warning(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.TrainSizeWarning)
        fit()


@pytest.mark.parametrize("inputs", [lambda: _dataset().batch(5), lambda: _Batches()],
                         ids=["tf.data", "PyDataset"])
def test_a_dataset_of_another_size_than_train_size_warns(inputs):
    """compile(train_size=200) for a dataset of 4 batches of 5 rows sampled a
    posterior ten times too narrow without a word (only arrays were counted)."""
    with pytest.warns(kb.TrainSizeWarning, match=r"fit trains on 4 batches of 5 examples an "
                                                  r"epoch .* compile\(train_size=200\)"):
        _model(train_size=200).fit(inputs(), epochs=1, verbose=0)
    _no_train_size_warning(lambda: _model().fit(inputs(), epochs=1, verbose=0))


def test_a_dataset_is_counted_within_one_batch():
    """A ragged or dropped last batch is still n examples; an epoch of
    steps_per_epoch, or of unknown length, is not counted."""
    _no_train_size_warning(lambda: _model().fit(_dataset().batch(6), epochs=1, verbose=0))
    _no_train_size_warning(lambda: _model().fit(_dataset().batch(6, drop_remainder=True),
                                                epochs=1, verbose=0))
    _no_train_size_warning(lambda: _model().fit(_dataset().batch(5).repeat(3), epochs=1,
                                                steps_per_epoch=4, verbose=0))
    _no_train_size_warning(lambda: _model(train_size=200).fit(
        _dataset().filter(lambda x, y: y >= 0).batch(5), epochs=1, verbose=0))


def test_validation_split_names_what_it_holds_out():
    x, y = _data()
    with pytest.warns(kb.TrainSizeWarning, match=r"fit trains on 16 examples \(validation_split"
                                                  r"=0.2 holds out 4 of 20\)"):
        _model().fit(x, y, batch_size=4, epochs=1, validation_split=0.2, verbose=0)
    _no_train_size_warning(lambda: _model(train_size=16).fit(
        x, y, batch_size=4, epochs=1, validation_split=0.2, verbose=0))


def test_weights_whose_mean_is_not_one_warn():
    """class_weight={2: 4} made the data weigh as 1.9·n examples: a posterior
    narrower than the unweighted one, silently."""
    x, y = _data()
    weights = np.where(y == 2, 4.0, 1.0)
    with pytest.warns(kb.TrainSizeWarning, match=r"fit's class_weight has mean 1.9 over the 20 "
                                                  r"training examples.* as 38 examples"):
        _model().fit(x, y, batch_size=5, epochs=1, class_weight={2: 4.0}, verbose=0)
    with pytest.warns(kb.TrainSizeWarning, match=r"fit's sample_weight has mean 1.9 over"):
        _model().fit(x, y, batch_size=5, epochs=1, sample_weight=weights, verbose=0)
    _no_train_size_warning(lambda: _model().fit(x, y, batch_size=5, epochs=1, verbose=0,
                                                sample_weight=weights / weights.mean()))


@pytest.mark.parametrize("call", [
    lambda model: model.fit(_dataset(), epochs=1, verbose=0),
    lambda model: model.fit(*_data(), epochs=1, verbose=0, validation_data=_dataset()),
    lambda model: model.evaluate(_dataset(), verbose=0),
], ids=["fit", "validation_data", "evaluate"])
def test_a_dataset_of_single_examples_is_refused(call):
    """An unbatched dataset raised Keras' "Invalid input shape ... (None, 4)"
    from inside the model."""
    model = _model()
    with pytest.raises(ValueError, match=r"`x` must yield batches of examples of shape \(4,\) "
                                         r".*dataset.batch\(batch_size\); got single examples"):
        call(model)
    assert int(model.optimizer.iterations) == 0


def test_hmc_warns_on_a_dataset_of_minibatches():
    """HMC on a dataset's batches of 5 < n rows ran an inexact chain silently
    (the batch size was read from the dataset's static shape, None here)."""
    with pytest.warns(kb.MinibatchHMCWarning, match="HMC on a minibatch of 5 < train_size=20"):
        _model("hmc").fit(_dataset().batch(5), epochs=1, verbose=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="HMC on a minibatch")
        _model("hmc").fit(_dataset().batch(N), epochs=1, verbose=0)


def test_hmc_warns_once_a_fit():
    """Found 2026-11-28: fit's check and the trace of the step each warned:
    two identical MinibatchHMCWarnings a fit of arrays."""
    x, y = _data()
    model = _model("hmc")
    for _ in range(2):  # and again in the next fit
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(x, y, batch_size=5, epochs=2, verbose=0)  # 4 whole batches: static
        assert [type(w.message) for w in caught].count(kb.MinibatchHMCWarning) == 1


@pytest.mark.parametrize("reduction", ["sum", "none", None])
def test_compile_refuses_a_loss_that_is_not_a_batch_mean(reduction):
    """reduction="sum" sampled n·Σ_batch ℓ_i (the likelihood b times too
    strong) while nll logged a sum per batch; "none" the same gradient while
    nll logged the mean: a posterior far too narrow, silently."""
    inputs = keras.Input((4,))
    model = kb.BayesianModel(inputs, keras.layers.Dense(3)(inputs))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    with pytest.raises(ValueError, match=r"`loss` must average over the batch, reduction one of "
                                         r"'sum_over_batch_size', 'mean', "
                                         r"'mean_with_sample_weight'.*; got .*reduction="):
        model.compile(sampler="sgld", train_size=N, loss=loss)


def test_weights_normalised_in_each_batch_do_not_warn():
    x, y = _data()
    model = _model()
    model.compile(sampler="sgld", train_size=N, loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight"))
    _no_train_size_warning(lambda: model.fit(x, y, batch_size=5, epochs=1, verbose=0,
                                             class_weight={2: 4.0}))


@pytest.mark.parametrize("second, warns", [("mean_with_sample_weight", False),
                                            ("sum_over_batch_size", True)])
def test_weights_normalised_by_every_output_do_not_warn(second, warns):
    """Two heads whose losses both normalise the weights in each batch: their
    mean (2.5 here) does not scale the likelihood, so nothing warns (until
    2026-11-29 a list of losses read as not normalising, and fit warned);
    where one head's loss does not normalise, it warns as for one head."""
    x, y = _data()
    inputs = keras.Input((4,))
    heads = [keras.layers.Dense(3, kernel_regularizer=kb.priors.Normal(0, 1),
                                bias_regularizer=kb.priors.Normal(0, 1))(inputs),
             keras.layers.Dense(1, kernel_regularizer=kb.priors.Normal(0, 1),
                                bias_regularizer=kb.priors.Normal(0, 1))(inputs)]
    model = kb.BayesianModel(inputs, heads)
    model.compile(sampler="sgld", train_size=N, loss=[
        keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"),
        keras.losses.MeanSquaredError(reduction=second)])

    def fit():
        model.fit(x, [y, x[:, :1]], sample_weight=np.full(N, 2.5, "float32"), batch_size=5,
                  epochs=1, verbose=0)

    if warns:
        with pytest.warns(kb.TrainSizeWarning, match="sample_weight has mean 2.5"):
            fit()
    else:
        _no_train_size_warning(fit)


def test_validation_data_may_be_a_pydataset_or_a_generator():
    """fit read validation_data as tuple(validation)[:2]: a PyDataset's first
    two batches became (x, y) (NumPy's "inhomogeneous shape" error), and a
    generator was drawn to its end before training (forever, if endless)."""
    x, y = _data()

    def batches():
        for start in range(0, N, 5):
            yield x[start:start + 5], y[start:start + 5]

    for validation in (_Batches(), batches()):
        history = _model().fit(x, y, batch_size=5, epochs=1, verbose=0,
                               validation_data=validation, validation_steps=4).history
        assert np.isfinite(history["val_nll"][0])


class _StopAfter(keras.callbacks.Callback):
    """Ends an endless epoch or evaluation (so that the old behaviour fails, not hangs)."""

    def on_train_batch_end(self, batch, logs=None):
        self.model.stop_training = batch >= 50

    def on_test_batch_end(self, batch, logs=None):
        self.model.stop_evaluating = batch >= 50


@pytest.mark.parametrize("call, name", [
    (lambda model: model.fit(_dataset().batch(5).repeat(), epochs=1, verbose=0,
                             callbacks=[_StopAfter()]), "fit: `steps_per_epoch`"),
    (lambda model: model.fit(*_data(), epochs=1, verbose=0, callbacks=[_StopAfter()],
                             validation_data=_dataset().batch(5).repeat()),
     "fit: `validation_steps`"),
    (lambda model: model.evaluate(_dataset().batch(5).repeat(), verbose=0,
                                  callbacks=[_StopAfter()]), "evaluate: `steps`"),
], ids=["fit", "validation_data", "evaluate"])
def test_an_endless_dataset_needs_its_steps(call, name):
    """fit(dataset.repeat()) ran one epoch forever: no epoch end, so no
    sample and no equilibrium test, and fit never returned."""
    with pytest.raises(ValueError, match=f"{name} must be given for an endless dataset"):
        call(_model())
    history = _model().fit(_dataset().batch(5).repeat(), epochs=1, steps_per_epoch=4,
                           verbose=0).history
    assert len(history["loss"]) == 1


def test_callbacks_and_validation_data_given_by_position_are_used():
    """Found 2026-11-28: ``fit`` read ``callbacks`` and ``validation_data`` by
    keyword only. Given by position, the callbacks made Keras' "got multiple
    values for argument 'callbacks'" TypeError, and validation labels the
    likelihood cannot score went unchecked."""
    x, y = _data()
    seen = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(epoch))
    model = _model()
    history = model.fit(x, y, 10, 2, 0, [record], 0.0, (x, y))
    assert seen == [0, 1] and "val_nll" in history.history
    with pytest.raises(ValueError, match="fit\\(validation_data\\)"):
        _model().fit(x, y, 10, 1, 0, None, 0.0, (x, y + 3))


def _generator(labels=None):
    x, y = _data()
    y = y if labels is None else labels
    for start in range(0, N, 5):
        yield x[start:start + 5], y[start:start + 5]


def test_a_generator_is_checked_by_its_first_batch_and_trained_on_whole():
    """A Python generator's first batch was never read (it cannot be read twice):
    HMC on its minibatches ran an inexact chain without MinibatchHMCWarning, and
    labels no likelihood can score went unchecked. fit now reads that batch and
    gives Keras a generator that yields it again: the chain is the one the same
    batches make as a PyDataset, bit for bit."""
    with pytest.warns(kb.MinibatchHMCWarning, match="HMC on a minibatch of 5 < train_size=20"):
        _model("hmc").fit(_generator(), epochs=1, verbose=0)
    for call in (lambda model: model.fit(_generator(np.full(N, 7)), epochs=1, verbose=0),
                 lambda model: model.evaluate(_generator(np.full(N, 7)), verbose=0),
                 lambda model: model.fit(*_data(), epochs=1, verbose=0,
                                         validation_data=_generator(np.full(N, 7)))):
        model = _model()
        with pytest.raises(ValueError, match=r"`y` must be class indices in \[0, 2\]"):
            call(model)
        assert int(model.optimizer.iterations) == 0
    generated, batches = (_model(kb.samplers.ATMC(step_size=0.01, seed=0)) for _ in "ab")
    history = generated.fit(_generator(), epochs=1, verbose=0,
                            validation_data=_generator()).history
    batches.fit(_Batches(), epochs=1, verbose=0, shuffle=False)
    assert int(generated.optimizer.iterations) == N // 5
    for a, b in zip(generated.get_weights(), batches.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert history["val_nll"][0] == pytest.approx(
        batches.evaluate(*_data(), verbose=0, return_dict=True)["nll"], rel=1e-5)
