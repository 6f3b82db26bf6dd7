"""``BayesianModel``'s loops: ``fit``, ``evaluate``, ``predict`` and the on-batch forms.

:class:`LoopMethods` is a mixin of :class:`keras_bnn.BayesianModel`, before
``keras.Model`` among its bases: each method keeps Keras' signature and
documents what keras_bnn adds, does its checks (:mod:`keras_bnn.models.entry_points`,
:mod:`keras_bnn.models.on_batch`) and calls Keras' own (``super()``: the
next class in the model's MRO, ``keras.Model`` or ``Functional``).
"""

from keras_bnn import array_order, backend
from keras_bnn import distribute
from keras_bnn import label_checks
from keras_bnn import nonfinite
from keras_bnn.callbacks import current_step
from keras_bnn.fit_data import check_dataset_batched
from keras_bnn.models import entry_points, on_batch
from keras_bnn.train_size import call_site


class LoopMethods:
    """The Keras loops of :class:`keras_bnn.BayesianModel`, with keras_bnn's checks and policy."""

    def evaluate(self, *args, **kwargs):
        """``keras.Model.evaluate``: ``loss`` = ``nll``, the mean NLL of the data.

        Array ``sample_weight`` whose mean is not 1 warns
        (:class:`keras_bnn.ValidationWeightWarning`): ``nll`` then reads their
        mean times the data's mean NLL, as ``val_nll`` does.

        Raises:
            ValueError: as :meth:`fit` (:func:`keras_bnn.fit_data.check_fit_data`):
                labels the likelihood cannot score, or labels given to a
                model compiled without a loss (nothing would score them: nll
                would read 0); an endless dataset without ``steps``.
        """
        kwargs = entry_points.evaluate_arguments(self, args, kwargs, call_site(2))
        validation = kwargs.get("_use_cached_eval_dataset")  # fit's, each epoch
        owner = "fit(validation_data)" if validation else "evaluate"
        with (distribute.explained_uneven_batches(owner), backend.values_kept(self),
              label_checks.raising_after(self, owner)):
            return super().evaluate(**kwargs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """``keras.Model.predict``, arrays checked first under ``keras.distribution``.

        Keras' JAX predict loop takes the weights out of the variables and puts
        them back only at a normal end: a batch it cannot shard (its bare
        ``IndivisibleError``) left the model without weights. Arrays are
        refused before the loop; where a dataset's batch fails inside it, the
        weights are put back (:func:`keras_bnn.backend.values_kept`).

        Args:
            x, batch_size, verbose, steps, callbacks: as for ``keras.Model.predict``.

        Returns:
            As ``keras.Model.predict``.

        Raises:
            ValueError: naming ``batch_size`` where array batches do not split
                over the devices (:func:`keras_bnn.distribute.check_data_batches`),
                ``x`` for a dataset of single examples
                (:func:`keras_bnn.fit_data.check_dataset_batched`).
        """
        check_dataset_batched(self, x, "predict")
        distribute.check_data_batches({"x": x, "batch_size": batch_size, "steps": steps}, None,
                                      "predict")
        with backend.values_kept(self):  # a dataset's ragged last batch raises inside
            return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                                   callbacks=callbacks)

    def predict_on_batch(self, x):
        """``keras.Model.predict_on_batch``, one row an example under ``tf.distribute``
        (:func:`keras_bnn.distribute.each_example_once`).

        Args:
            x: as in Keras.

        Returns:
            As ``keras.Model.predict_on_batch``.
        """
        return distribute.each_example_once(self, super().predict_on_batch(x))

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """``keras.Model.train_on_batch``: one transition, with ``fit``'s checks.

        The same step as ``fit``'s (warm-up, step counter, logs), and what
        ``fit`` adds around it (:func:`keras_bnn.models.on_batch.train_on_batch`):
        its data checks, the :class:`keras_bnn.MissingPriorWarning` and
        :class:`keras_bnn.StochasticLayerWarning`, the NaN/Inf stop and, once
        the warm-up is over, the step without its code and the
        :class:`keras_bnn.ShortWarmupWarning`. The epoch-based checks
        (``GradientNoiseWarning``, ``train_size``'s count, the weights' mean)
        are ``fit``'s only: one batch cannot tell the classes' frequencies,
        so ``class_weight`` is the caller's to give a mean of 1 over the
        training rows (balanced weights ``N/(K·N_c)`` do; their mean over
        the classes is above 1, so the dict's values prove nothing).

        Args:
            x, y, sample_weight, class_weight, return_dict: as in Keras.

        Returns:
            The batch's logs, a dict with ``return_dict=True``.

        Raises:
            ValueError: as :meth:`fit`, for the batch's labels and inputs and
                for HMC on a model with dropout, noise or batch normalisation.
            keras_bnn.NonFiniteError: when the potential or a gradient is
                NaN/Inf (at once, also under XLA and JAX); the step changed nothing.
        """
        return on_batch.train_on_batch(self, super().train_on_batch, x, y, sample_weight,
                                       class_weight, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """``keras.Model.test_on_batch`` with :meth:`evaluate`'s data checks.

        Args:
            x, y, sample_weight, return_dict: as in Keras.

        Returns:
            ``loss`` = ``nll``, the batch's mean NLL (a dict with ``return_dict=True``).

        Raises:
            ValueError: as :meth:`evaluate` (labels without a loss, labels
                the likelihood cannot score).
        """
        return on_batch.test_on_batch(self, super().test_on_batch, x, y, sample_weight,
                                      return_dict)

    def fit(self, *args, **kwargs):
        """``keras.Model.fit``; a NaN/Inf potential raises :class:`keras_bnn.NonFiniteError`.

        The NaN/Inf policy is :mod:`keras_bnn.nonfinite`'s: the failing step
        changes nothing, and training stops at that step (TensorFlow graph
        mode) or at the end of its epoch (XLA and JAX, where the step is
        skipped and counted in ``nonfinite_steps``).

        With an SG sampler, a
        :class:`~keras_bnn.models.fit_callbacks.GradientNoiseWarning` is issued
        (once) when an epoch's ``gradient_noise_ratio`` exceeds
        :data:`keras_bnn.samplers.NOISE_RATIO_LIMIT`. A full-batch kernel
        (:class:`keras_bnn.samplers.HMC`) warns when a batch holds fewer than
        ``train_size`` examples (the chain is then not exact).

        A :class:`keras_bnn.TrainSizeWarning` says when ``train_size``
        differs from the number of examples ``fit`` trains on (arrays after
        ``validation_split``, a dataset of known length), or when array
        ``sample_weight`` / ``class_weight`` do not average 1
        (:func:`keras_bnn.train_size.warn_on_train_size`); after the first
        epoch, when the weights a dataset, ``PyDataset`` or generator yields
        (or ``class_weight`` with one) do not
        (:mod:`keras_bnn.models.weight_mean`: the step counts them).

        Trainable weights without a prior get a
        :class:`keras_bnn.MissingPriorWarning` (unless
        ``compile(allow_flat_prior=True)``). Dropout, noise and
        batch-normalisation layers get a
        :class:`keras_bnn.StochasticLayerWarning` with an SG-MCMC sampler
        and are refused by HMC (:mod:`keras_bnn.stochastic_layers`).

        Shuffled arrays: each pass's order is keyed on (seed, step) (:mod:`keras_bnn.array_order`).

        With ``step_size="auto"`` the training step is retraced once, after
        the first epoch that ends past the warm-up, without the warm-up's
        code (:meth:`keras_bnn.samplers.Sampler.leave_warmup`: the same
        numbers, a cheaper step). A callback that stops ``fit`` inside the
        warm-up (``EarlyStopping`` on the flat ``val_nll`` of a rising h)
        warns with :class:`keras_bnn.NotConvergedWarning`
        (:func:`keras_bnn.models.entry_points.warn_on_stop_in_warmup`).

        Logs: in training ``loss`` is the sampled potential ``U/n`` =
        ``nll`` + ``prior``/n on the minibatch; ``evaluate`` and validation
        log ``loss`` = ``nll`` = the mean NLL of their data (``val_nll``:
        the key for early stopping and model selection, with ``mode="min"``:
        Keras does not know its direction).

        Raises:
            ValueError: for a model with dropout, noise or batch
                normalisation sampled by HMC, for ``jit_compile=True``
                under a ``tf.distribute`` strategy or weights made under
                another strategy than the model's
                (:func:`keras_bnn.distribute.check_variables`), for empty inputs, inputs of
                another shape, a dataset of single examples (not batched), an
                endless dataset without ``steps_per_epoch`` (or, as
                ``validation_data``, ``validation_steps``;
                :func:`keras_bnn.fit_data.check_epoch_ends`), or labels
                (``validation_data``'s too) that the likelihood
                cannot score (:func:`keras_bnn.fit_data.check_fit_data`:
                class indices in [0, K) for a categorical loss, 0/1 for a
                Bernoulli one, finite values for a Gaussian one), and with a
                sampler for ``callbacks`` holding a ``ReduceLROnPlateau`` or
                ``LearningRateScheduler`` (they would change the step size), and
                under JAX's ``keras.distribution`` for batches that do not split over
                its devices (:func:`keras_bnn.distribute.check_data_batches`).
            keras_bnn.nonfinite.NonFiniteError: (a ``FloatingPointError``)
                when the potential or a gradient becomes NaN/Inf; the weights
                keep their last finite values, and samples already collected
                to disk are untouched.
        """
        kwargs = entry_points.fit_arguments(self, args, kwargs, call_site(2))  # fit's caller
        kwargs = array_order.keyed_arrays(self, kwargs)  # shuffled arrays: keyed on (seed, step)
        with (nonfinite.translated(lambda: current_step(self.optimizer)),
              distribute.explained_uneven_batches("fit"), label_checks.translated("fit")):
            history = super().fit(**kwargs)
        entry_points.warn_on_stop_in_warmup(self, kwargs["callbacks"])
        return history
