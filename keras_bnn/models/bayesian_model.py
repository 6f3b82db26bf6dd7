"""The Keras model that trains by sampling the tempered posterior."""

import copy
import functools

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import clone_priors
from keras_bnn import distribute
from keras_bnn import label_checks
from keras_bnn import loss_shares
from keras_bnn import precision
from keras_bnn import prior_attachment
from keras_bnn import prior_guard
from keras_bnn import samplers as samplers_lib
from keras_bnn import trainable_flags
from keras_bnn.keras_private import legacy_h5_saving  # Keras' legacy HDF5 saving scope
from keras_bnn.loss_checks import head_metrics
from keras_bnn.models import entry_points, sampling_step, subclassing
from keras_bnn.models.loop_methods import LoopMethods
from keras_bnn.samplers import kernel as kernel_lib
from keras_bnn.validation import argument_error


@keras.saving.register_keras_serializable(package="keras_bnn")
class BayesianModel(LoopMethods, keras.Model):
    """A ``keras.Model`` whose ``fit`` samples ``p(θ|D) ∝ exp(-U(θ)/T)``.

    ``U(θ) = -Σ_i log p(y_i|x_i,θ) - log p(θ)`` over the ``n`` training
    examples. Keras' compiled loss is the per-example mean NLL and every layer
    loss (the priors, :mod:`keras_bnn.priors`, each ``-log p(w)``) is a
    negative log prior, which :meth:`potential_terms` scales by ``1/n``: the
    model's loss is the mean-form potential ``U(θ)/n`` on a minibatch, and
    samplers multiply its gradient by ``n`` themselves.

    Use it functionally (``BayesianModel(inputs, outputs)``; the builders in
    :mod:`keras_bnn.models` return one) or by subclassing (a subclass is
    made before any functional one in its process: Keras then changes the
    class's bases; else subclass ``keras.Model`` and apply
    :func:`keras_bnn.bayesian`).

    Its loops (``fit``, ``evaluate``, ``predict``, ``train_on_batch``,
    ``test_on_batch``) are :class:`keras_bnn.models.loop_methods.LoopMethods`'.
    """

    def __new__(cls, *args, **kwargs):
        # keras.Model.__new__ (and Functional's) call Layer.__new__ without the arguments:
        # Keras' record of a subclass's __init__ arguments got its defaults (subclassing).
        return keras.Layer.__new__(cls, *args, **kwargs)

    def __init__(self, *args, **kwargs):
        """``keras.Model.__init__``: functional (``inputs``, ``outputs``) or a subclass's.

        Raises:
            TypeError: for a subclass made after a functional
                ``BayesianModel`` in the same process: Keras has then put
                ``Functional`` among ``BayesianModel``'s bases, and would
                fail with "missing 'inputs' and 'outputs'".
        """
        functional = subclassing.functional_arguments(args, kwargs)
        if not functional and keras.Model not in BayesianModel.__bases__:
            raise TypeError(
                f"{type(self).__name__}: a subclass of kb.BayesianModel cannot be made after a "
                "functional BayesianModel (kb.bayesian, kb.models builders) in the same process: "
                "Keras has put keras.Functional among BayesianModel's bases. Subclass "
                "keras.Model instead, call it on a batch and give it priors with "
                "kb.bayesian(model), or make the subclass before any functional one.")
        recorded, _ = prior_attachment.take_recorded(kwargs)  # from a subclass's from_config
        super().__init__(*args, **kwargs)
        prior_attachment.keep_for_build(  # set by build_from_config
            self, recorded, from_config=prior_attachment.deserializing())
        if functional:
            clone_priors.keep_flat(self)  # a clone's weights made flat on purpose

    def get_config(self):
        """Keras' config and every trainable weight's prior.

        For a subclass that does not override it, Keras' config holds the
        arguments its ``__init__`` was called with, where all are of basic
        types, as for a ``keras.Model`` subclass
        (:mod:`keras_bnn.models.subclassing`): ``load_model`` calls
        ``Net(units=8)`` again, not ``Net()``.
        The priors are those the weights carry (their regularizers), under
        ``"weight_priors"``, and for a built subclassed model its build
        config: a reload sets them again, also where no layer config (or
        subclass's code) gives them (:mod:`keras_bnn.prior_attachment`).

        Returns:
            The config dict.

        Raises:
            ValueError: for a prior that a reload could not rebuild (its class
                not registered with Keras, or without ``get_config``), naming the
                weight: ``keras.saving.save_model(model, "x.keras")`` asks for the
                config only once it has opened (emptied) the file, and asks the
                model nothing before (it reads ``model.built``), so the file is lost
                there; :meth:`save` checks first. Inside Keras'
                legacy HDF5 saving (``keras.saving.save_model(model, "x.h5")``,
                which asks for the config first): the file could not be
                reloaded, as :meth:`save` says, and Keras would go on to pop
                the sampler from the model's compile config (a later
                ``.keras`` file then reloaded with SGD). Keras has created (or
                emptied) the ``.h5`` file by then; the model is left as it was.
        """
        if legacy_h5_saving():
            raise ValueError(
                "keras.saving.save_model: a BayesianModel cannot be saved in Keras' legacy "
                "HDF5 format (.h5/.hdf5): load_model could not reload it (\"Unknown layer: "
                "'BayesianModel'\"). Save it to a '.keras' file.")
        # the priors first: a layer's config raises a bare NotImplementedError for one
        # without get_config, where record names the weight
        recorded = prior_attachment.record(self) if prior_attachment.has_weights(self) else None
        config = {**subclassing.init_arguments(self, BayesianModel.get_config),
                  **super().get_config()}  # Keras' order: its own keys win
        config.update(prior_attachment.config_entries(self, config, recorded))
        return config

    def save(self, filepath, *args, **kwargs):
        """``keras.Model.save``, once every prior is known to be savable.

        Keras opens the file before it serializes the model, so a prior that
        :meth:`get_config` refuses would leave it empty: the priors go first.

        Args:
            filepath, *args, **kwargs: as in ``keras.Model.save``.

        Returns:
            None.

        Raises:
            ValueError: for a prior that a reload could not rebuild, naming
                the weight, for a layer that samples LoRA weights
                (:func:`keras_bnn.prior_attachment.refuse_lora`), or for a
                legacy ``.h5``/``.hdf5`` ``filepath``, before the file is touched:
                Keras' HDF5 format records the class by its bare name, so
                ``load_model`` cannot find it ("Unknown layer: 'BayesianModel'"),
                and it pops the sampler from the model's compile config, so a
                later ``.keras`` file reloaded with SGD.
        """
        if str(filepath).endswith((".h5", ".hdf5")):
            raise argument_error("filepath", "end in '.keras' (a BayesianModel cannot be "
                                 "reloaded from Keras' legacy HDF5 format)", str(filepath),
                                 "BayesianModel.save")
        prior_attachment.refuse_lora(self, "save")
        if prior_attachment.has_weights(self):  # get_config records their priors
            prior_attachment.record(self)
        return super().save(filepath, *args, **kwargs)

    def save_weights(self, filepath, *args, **kwargs):
        """``keras.Model.save_weights``, refusing a layer that samples LoRA weights.

        Args:
            filepath, *args, **kwargs: as in ``keras.Model.save_weights``.

        Returns:
            None.

        Raises:
            ValueError: for a layer that samples LoRA weights, which Keras would
                save merged into its kernel
                (:func:`keras_bnn.prior_attachment.refuse_lora`).
        """
        prior_attachment.refuse_lora(self, "save_weights")
        return super().save_weights(filepath, *args, **kwargs)

    def save_own_variables(self, store):
        """``keras.Model.save_own_variables``, refusing a layer that samples LoRA weights.

        Keras' saving (``keras.saving.save_model``, which does not call :meth:`save`, and
        ``save_weights``) asks the model for its own weights before its layers'.

        Args:
            store: as in ``keras.Model.save_own_variables``.

        Raises:
            ValueError: as :meth:`save_weights`.
        """
        prior_attachment.refuse_lora(self, "save_own_variables (keras.saving.save_model)")
        return super().save_own_variables(store)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Rebuilds the model from :meth:`get_config`, its weights' priors included.

        Args:
            config: the dict :meth:`get_config` returned.
            custom_objects: as in ``keras.Model.from_config``.

        Returns:
            The model, its priors set as they were saved (a config written
            before they were recorded gives those its layer configs record);
            a subclassed one built on the input shape it was saved with.

        Raises:
            ValueError: where the recorded priors do not fit the rebuilt
                model's weights (an altered config, a subclass's changed code),
                or the saved model had a layer shared across nested models
                (:func:`keras_bnn.prior_attachment.refuse_shared`).
        """
        keras_config = copy.deepcopy(config)  # Keras pops keys of the configs it is given
        prior_attachment.refuse_shared(keras_config)
        recorded, build = prior_attachment.take_recorded(keras_config)
        model = super().from_config(keras_config, custom_objects=custom_objects)
        trainable_flags.restore(model, config)  # a nested Sequential's, which Keras drops
        prior_attachment.keep_for_build(model, recorded)
        prior_attachment.restore_built(model, build)
        return model

    def build_from_config(self, config):
        """``keras.Model.build_from_config``, then the priors the config recorded.

        Keras calls it on a subclassed model rebuilt by a subclass's own
        ``from_config`` (:mod:`keras_bnn.prior_attachment`).

        Args:
            config: the build config, as in Keras.

        Raises:
            ValueError: where the recorded priors do not fit the built weights.
        """
        super().build_from_config(config)
        prior_attachment.restore_built(self)

    def _run_through_graph(self, *args, **kwargs):
        # keras.models.clone_model runs the graph on new layers: they get the priors.
        return clone_priors.run_through_graph(super()._run_through_graph, args, kwargs)

    def compile(
        self,
        optimizer=None,
        loss=None,
        *,
        sampler=None,
        temperature=None,
        train_size=None,
        allow_flat_prior=False,
        **kwargs,
    ):
        """Configures the model for sampling (or for an SGD/MAP baseline).

        Args:
            optimizer: a plain Keras optimizer (or name) for the SGD/MAP
                baseline. Mutually exclusive with ``sampler``.
            loss: the per-example negative log-likelihood, as in Keras.
            sampler: a :class:`keras_bnn.samplers.Sampler` or one of the names
                ``"sgld", "sghmc", "sgnht", "atmc", "hmc"``.
            temperature: posterior temperature T > 0 (default: the sampler's,
                1.0 unless set). Only meaningful with a sampler.
            train_size: number n of training examples (an integer ≥ 1); required.
            allow_flat_prior: True to sample trainable weights that carry
                no prior (a flat, improper prior) without the
                :class:`keras_bnn.MissingPriorWarning` that ``fit`` issues
                otherwise.
            **kwargs: passed to ``keras.Model.compile`` (``metrics``, ...;
                with a sampler ``auto_scale_loss`` is set to False, with a
                warning where ``True`` was passed under ``"mixed_float16"``:
                :func:`keras_bnn.precision.keep_out_of_loss_scaling`).

        Raises:
            ValueError: if both ``sampler`` and ``optimizer`` are given, if
                ``train_size`` is missing or not an integer ≥ 1, if ``temperature``
                is not positive or is given without a sampler, for an
                unknown sampler name, for a sampler and a layer that
                keeps its weights in float16 or bfloat16
                (:func:`keras_bnn.precision.check_sampling_policy`: use
                ``"mixed_bfloat16"`` or ``"mixed_float16"``, whose float16
                gradients the backend scales, never Keras'
                ``LossScaleOptimizer``), for the baseline under
                ``"mixed_float16"`` on JAX, or for a model that outputs
                probabilities or a cross-entropy without ``from_logits=True``
                (:func:`keras_bnn.loss_checks.check_logit_head`: the model
                must output logits), a loss whose reduction is not a
                batch mean (:func:`keras_bnn.loss_checks.check_loss_reduction`),
                in a ``tf.distribute`` scope for weights made outside it
                (:func:`keras_bnn.distribute.check_variables`), for a sampler
                given a Keras optimizer option that changes the chain
                (``clipnorm``, ``clipvalue``, ``global_clipnorm``,
                ``weight_decay``, ``use_ema``, ``gradient_accumulation_steps``:
                :data:`keras_bnn.models.entry_points.CHAIN_CHANGING_OPTIONS`), or
                ``metrics`` that misread the head: of probabilities, or
                Keras' own for a Gaussian one
                (:func:`keras_bnn.loss_checks.head_metrics`, which also makes a
                Bernoulli model's ``"accuracy"`` threshold its logit at 0).
        """
        optimizer = entry_points.compile_arguments(self, optimizer, loss, sampler, temperature,
                                                   train_size, allow_flat_prior)
        if not hasattr(self, "_sampling_trackers"):
            subclassing.make_sampling_trackers(self, loss)  # a built subclassed one too
        for name in ("metrics", "weighted_metrics"):
            if name in kwargs:
                kwargs[name] = head_metrics(kwargs[name], loss)
        if self.sampler is not None:  # the backend scales float16 gradients, not Keras
            precision.keep_out_of_loss_scaling(self, kwargs)
        super().compile(
            optimizer=optimizer if optimizer is not None else "sgd",
            loss=loss,
            **kwargs,
        )
        self._compile_config.config.update(train_size=self.train_size)
        loss_shares.weigh_by_share(self)
        if self.allow_flat_prior:
            self._compile_config.config.update(allow_flat_prior=True)

    def compile_from_config(self, config):
        """Re-compiles from :meth:`get_compile_config` (sampler, n included).

        Args:
            config: the dict saved with the model.
        """
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @property
    def metrics(self):
        metrics = super().metrics
        trackers = getattr(self, "_sampling_trackers", {})
        wanted = ["nll", "prior", "weight_totals", "validation_weight_totals"]
        if self.compiled:
            wanted += self.transition_kernel.metric_names
        if self.compiled and self._skips_nonfinite_steps():
            wanted.append("nonfinite_steps")
        extra = [trackers[name] for name in wanted if name in trackers]
        return [m for m in metrics if all(m is not t for t in trackers.values())] + extra

    @property
    def transition_kernel(self):
        """The :class:`~keras_bnn.samplers.kernel.TransitionKernel` each train step drives.

        The sampler itself, or for the SGD/MAP baseline its optimizer wrapped
        in :class:`~keras_bnn.samplers.kernel.OptimizerKernel`.
        """
        if isinstance(self.optimizer, kernel_lib.TransitionKernel):
            return self.optimizer
        return kernel_lib.OptimizerKernel(self.optimizer)

    def potential_terms(self, y, y_pred, sample_weight, losses):
        """The two terms of the mean-form potential ``U(θ)/n`` on a batch.

        ``U(θ)/n = mean_i(-log p(y_i|x_i,θ)) + (1/n)·Σ_k ℓ_k`` where the
        ``ℓ_k`` are the layer losses (each prior's ``-log p(w)``). Under
        ``tf.distribute`` both terms are divided by the replica count, as
        Keras does, so that summing gradients over replicas gives the
        global-batch gradient; each output's loss is rescaled to its share of
        the global batch's (masks, weights: :mod:`keras_bnn.loss_shares`).

        Args:
            y, y_pred, sample_weight: the batch's targets, predictions and
                weights.
            losses: the layer losses of this forward pass.

        Returns:
            ``(nll, prior_term)``: scalar tensors.
        """
        nll = self._compile_loss(y, y_pred, sample_weight) if self._compile_loss else None
        nll = ops.zeros(()) if nll is None else nll
        if not losses:
            return nll, ops.zeros((), dtype=nll.dtype)
        prior = ops.sum(ops.stack([self._aggregate_additional_loss(term) for term in losses]))
        return nll, ops.divide(ops.cast(prior, nll.dtype), float(self.train_size))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The mean-form potential ``U(θ)/n`` in training; the mean NLL in evaluation.

        ``training=True``: ``mean NLL + (1/n)·(-log p(θ))``
        (:meth:`potential_terms`), what the kernel samples. ``training=False``
        (``evaluate``, validation): the mean NLL of the data given, without
        the training set's prior term, so that ``val_loss`` is a data loss.

        A training loop of your own takes the gradient of this (``training=True``,
        ``y_pred = model(x, training=True)``) and hands it to
        ``model.optimizer.apply_gradients``: the compiled loss alone leaves the
        prior out, ``loss + sum(model.losses)`` counts it n times, and the
        sampler cannot tell.
        """
        del x
        if not training:
            if sample_weight is not None and hasattr(self, "_sampling_trackers"):
                # validation's weights, checked after the first epoch (weight_mean.for_validation)
                self._sampling_trackers["validation_weight_totals"].update_step(
                    self, y, y_pred, sample_weight)
            label_checks.count_labels(self, y, y_pred, label_checks.EVALUATION)  # evaluate's
            return self.potential_terms(y, y_pred, sample_weight, ())[0]
        return ops.add(*self.potential_terms(y, y_pred, sample_weight, self.losses))

    def train_step(self, *args):
        """One transition of the model's kernel on a batch, with sampling diagnostics.

        The same step on every backend
        (:func:`keras_bnn.models.sampling_step.sampling_step`, written with
        ``keras.ops``); ``backend.run_train_step`` adapts it to the backend's
        trainer (under JAX it runs purely on Keras' state). It binds the
        batch into a :class:`~keras_bnn.samplers.kernel.BatchPotential`,
        runs :attr:`transition_kernel`'s transition under the NaN/Inf policy of
        :mod:`keras_bnn.nonfinite`, and logs ``loss``, ``nll``, ``prior``
        (``-log p(θ)``) and the kernel's diagnostics (its ``metric_names``:
        for the SG samplers ``step_size``, ``kinetic_temperature``,
        ``configurational_temperature`` and ``gradient_noise_ratio``, see
        :meth:`keras_bnn.samplers.Sampler.gradient_noise_ratio`; for HMC
        ``step_size``, ``configurational_temperature`` and
        ``acceptance_rate``) as epoch means, plus ``nonfinite_steps`` where
        non-finite steps are skipped.
        """
        return backend.run_train_step(self, functools.partial(sampling_step.sampling_step, self),
                                      *args)

    def make_train_function(self, force=False):
        """``keras.Model.make_train_function``; on TensorFlow its traces are not kept.

        Keras' optimizer all-reduces the gradients (also without a strategy)
        through a graph-mode ``tf.custom_gradient``, which registers a
        gradient function in TensorFlow's global registry and never removes
        it: each trace of the train step was kept for the process, its graph
        and the functions it added to the eager context (measured: ~130 and
        ~8 MB a fit of a small model with SGHMC). Nothing differentiates the
        train function: the entries a call's trace added go when it returns.

        A train step traced under other priors than the weights carry now is
        traced again: ``kb.bayesian`` of the Keras model that a ``BayesianModel``
        shares its layers with sets new priors on them (until 2026-12-01 that
        model went on sampling under the old ones: ``prior`` logged 10.5 where
        the new priors' -log p(θ) was 20252).

        Args:
            force: as in Keras: make it again even if it exists.

        Returns:
            The train function.
        """
        priors = tuple(variable.regularizer for variable in self.trainable_variables)
        traced = getattr(self, "_keras_bnn_traced_priors", None)
        if self.train_function is not None and not force and traced is not None and len(
                traced) == len(priors) and all(a is b for a, b in zip(traced, priors)):
            return self.train_function
        self._keras_bnn_traced_priors = priors
        super().make_train_function(force=True)
        if keras.backend.backend() == "tensorflow":
            self.train_function = sampling_step.dropping_traced_gradients(self.train_function)
        return self.train_function

    def test_step(self, *args):
        """Keras' test step, logging ``loss`` = ``nll`` = the mean NLL of the data.

        :meth:`compute_loss` leaves the prior out of evaluation; the
        sampler's diagnostics and ``prior`` belong to training and are not
        logged here. ``nll`` and each output's loss are means over the terms
        the loss counts in the whole set, for any batch size
        (:func:`keras_bnn.loss_shares.counting_terms`): its unmasked tokens,
        its labels not the loss's ``ignore_class``, its sum of weights for
        ``"mean_with_sample_weight"``.
        """
        with loss_shares.counting_terms():
            result = super().test_step(*args)
        if isinstance(result, tuple):  # JAX: (logs, state)
            return sampling_step.evaluation_logs(self, result[0]), result[1]
        return sampling_step.evaluation_logs(self, sampling_step.reducible(self, result))

    def _get_metrics_result_or_logs(self, logs):
        # Keras reads the epoch's logs from the metrics (totals summed over
        # replicas) only when a step's keys are those of `metrics`; evaluation's
        # differ (nll in, the sampler's trackers out), and it kept the last
        # step's mean of per-replica means: wrong for a batch that splits unevenly.
        evaluation = sampling_step.evaluation_logs(self, self.get_metrics_result())
        if isinstance(logs, dict) and set(logs) == set(evaluation):
            return evaluation
        return super()._get_metrics_result_or_logs(logs)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # keras#20585 workaround 1 (see keras_bnn.distribute).
        if (iterator is not None and keras.backend.backend() == "tensorflow"
                and distribute.needs_local_batch(self.distribute_strategy)):
            iterator, data_batch = None, distribute.local_batch(iterator, self.distribute_strategy)
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def _skips_nonfinite_steps(self):
        """Whether the compiled step skips non-finite steps (XLA, JAX) instead of raising."""
        return keras.backend.backend() == "jax" or self.jit_compile is True

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """``keras.Model.load_weights``, the sampler's state included.

        A ``.weights.h5`` written during ``fit`` (``model.save_weights``,
        ``ModelCheckpoint(save_weights_only=True)``) holds the sampler's
        state: the step counter, the warm-up's h and step factors, momenta
        and thermostats. Keras restores an optimizer's variables only if it
        is built; a freshly compiled model's sampler is not, and Keras would
        skip them, so a later ``fit`` would restart the chain (warm-up
        included). Here an unbuilt sampler is built when the file holds a
        built one's state (:meth:`keras_bnn.samplers.Sampler.load_own_variables`;
        under ``tf.distribute`` in the model's strategy, inside its scope or not),
        and the chain goes on exactly where the file left it.

        Args:
            filepath: the weights file.
            skip_mismatch: as in ``keras.Model.load_weights``.
            **kwargs: passed to ``keras.Model.load_weights``.

        Returns:
            None.
        """
        with entry_points.sampler_state_on_load(self):
            return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)


prior_guard.install_compile_guard(BayesianModel, samplers_lib.Sampler)
