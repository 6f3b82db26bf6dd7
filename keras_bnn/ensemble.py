"""The posterior predictive ensemble over stored posterior samples.

:class:`PosteriorEnsemble` is a ``keras.Model`` holding S posterior samples
θ_1..θ_S of one network f (the *member* model) and predicting with the Monte
Carlo posterior predictive

    p(y|x, D) ≈ (1/S) Σ_s p(y|x, θ_s),

in log space for the categorical and Bernoulli heads and as the moment-matched
Gaussian of the mixture for the Gaussian head: the formulas and the
uncertainty decomposition are in :mod:`keras_bnn.uncertainty`. ``call``
returns the predictive probabilities p̄ [N, K] (``"categorical"``: the member
outputs K logits), p̄(y=1|x) [N, 1] (``"bernoulli"``: one logit) or the
mixture's ``[mean, log variance]`` [N, 2D] (``"gaussian"``: the member
outputs ``[μ, log σ²]``).

All members run inside one traced graph: the S weight sets are stored as
non-trainable variables of shape [S, *weight.shape] (one per member weight
that differs between members; a weight the same in every member, such as a
frozen backbone's, is one variable of its own shape, see
:mod:`keras_bnn.ensemble_weights`) and each member is the member model's
``stateless_call`` on a slice. A Functional or Sequential member's frozen
trunk (the layers whose weights are all held once, fed by the input
through such layers only) runs once per call, and only the rest runs per
member (:mod:`keras_bnn.ensemble_trunk`). The
slices are evaluated by a trace-time unrolled loop for up to
:data:`AUTO_UNROLL_MAX` members (per backend) and by a loop over the stacks above
(``member_loop="auto"``; see :class:`PosteriorEnsemble` and
``benchmarks/ensemble_latency.py`` for why).

Any Keras backend (``keras.ops``). ``predict``, ``predict_uncertainty`` and
``predict_members`` each run one graph per ensemble for any batch size
(:func:`keras_bnn.backend.predict_graph`: traced once, never retraced), as
:mod:`keras_bnn.ensemble_prediction` holds them.
:func:`keras_bnn.member_model.check_ensemble_model` holds the rules a member
model must meet (``CollectSamples`` checks them when ``fit`` starts); a member
of several outputs is averaged per output (:mod:`keras_bnn.ensemble_outputs`).
Serving: :meth:`PosteriorEnsemble.export` delegates to :mod:`keras_bnn.export`
(TensorFlow backend): a TF Serving version directory whose ``serving_default``
outputs are :meth:`PosteriorEnsemble.predictive_summary` (named as in
:data:`CATEGORICAL_OUTPUTS`, :data:`BERNOULLI_OUTPUTS` or
:data:`GAUSSIAN_OUTPUTS`); :mod:`keras_bnn.serving` is a TF Serving client.
Scoring: ``compile`` and ``evaluate`` are :mod:`keras_bnn.ensemble_scoring`'s
(a Gaussian ensemble's loss is its mixture's NLL, read from the members).
Creation from stores and serialisation (``from_store``, ``get_config``/
``from_config``, ``ensemble.save("x.keras")`` / ``keras.saving.load_model``:
the member architecture and which weights are held once are in the config,
the weights in the weights file) are :mod:`keras_bnn.ensemble_loading`'s.
"""

import functools

import keras
from keras import ops

from keras_bnn import ensemble_inputs, ensemble_outputs, ensemble_scoring, ensemble_trunk
from keras_bnn import backend, distribute, ensemble_loading, ensemble_prediction
from keras_bnn import ensemble_weights, uncertainty
from keras_bnn import export as export_lib
from keras_bnn.ensemble_prediction import Untracked
from keras_bnn.keras_private import get_keras_mask, set_keras_mask  # as Keras' losses
from keras_bnn.member_model import check_ensemble_model
from keras_bnn.uncertainty import BERNOULLI_OUTPUTS, CATEGORICAL_OUTPUTS, GAUSSIAN_OUTPUTS
from keras_bnn.validation import check_choice

__all__ = ["PosteriorEnsemble", "MEMBER_LOOPS", "CATEGORICAL_OUTPUTS",
           "BERNOULLI_OUTPUTS", "GAUSSIAN_OUTPUTS"]

MEMBER_LOOPS = ("unroll", "map", "vectorized_map")
# member_loop="auto": "unroll" up to this many members, "map" above, per Keras
# backend (benchmarks/ensemble_latency.py --compile; README "Ensemble latency":
# under JAX each unrolled member adds compile time, ~0.3 s for a small MLP, and
# the compiled loop ran as fast).
AUTO_UNROLL_MAX = {"tensorflow": 10, "jax": 1}


@keras.saving.register_keras_serializable(package="keras_bnn")
class PosteriorEnsemble(ensemble_prediction.Prediction, ensemble_scoring.Scoring,
                        ensemble_loading.Loading, keras.Model):
    """Posterior predictive average of S weight sets of one member model.

    See :mod:`keras_bnn.uncertainty` for the formulas. ``ensemble(x)`` and
    ``ensemble.predict(ds)`` return the predictive probabilities [N, K]
    (``"categorical"``) or the mixture's ``[mean, log variance]`` [N, 2D]
    (``"gaussian"``); :meth:`predict_uncertainty` adds the uncertainty
    decomposition and :meth:`predict_members` the members' own predictions.

    Args:
        model: the member model: a built Keras model (Functional,
            Sequential or subclassed) with one input, or a list or dict of
            inputs (:mod:`keras_bnn.ensemble_inputs`), and one [batch, ..., units]
            output (the models of :mod:`keras_bnn.models` qualify), or a list or dict of them
            (:mod:`keras_bnn.ensemble_outputs`). Its own weights are not used and
            not modified, but for those of layers whose call reads state that
            Keras derives from their weights (``finalize_state``: an adapted
            ``Normalization``, lookups), which get the first weight set's
            values (see :meth:`load_own_variables`).
        weight_sets: S ≥ 1 lists of arrays, each in ``model.weights`` order
            (``model.get_weights()`` or ``Sample.weights`` of a
            :class:`keras_bnn.SampleStore`).
        likelihood: ``"categorical"`` (member outputs K ≥ 2 logits),
            ``"bernoulli"`` (one logit, p(y=1|x) = sigmoid) or
            ``"gaussian"`` (member outputs ``[mean, log variance]``); None:
            inferred, as :meth:`from_store` does, from the loss ``model`` was
            compiled with, and without one ``"categorical"`` for K ≥ 2 units,
            ``"bernoulli"`` for one (:func:`keras_bnn.likelihoods.infer`; until
            2026-11-30 ``"categorical"`` always: a compiled Gaussian head's
            ``[mean, log variance]`` was read as two logits). For several
            outputs, one per output (a list or a dict by output name;
            :func:`keras_bnn.ensemble_outputs.choose`; None: inferred).
        member_loop: how the graph evaluates the S members:
            ``"auto"`` (default) is ``"unroll"`` for S ≤ :data:`AUTO_UNROLL_MAX`
            (10 under TensorFlow, 1 under JAX) and ``"map"`` above
            (:attr:`loop_used`); ``"unroll"`` traces S
            copies of the member graph, which the runtime runs concurrently;
            ``"map"`` is a loop over the stacked weights (``tf.map_fn``,
            ``jax.lax.map``: :func:`keras_bnn.backend.map_members`) whose
            graph holds the member once or twice; ``"vectorized_map"``
            vectorises one member over S (``tf.vectorized_map``,
            ``jax.vmap``). All give the same numbers. An unrolled graph's
            trace, compile and export time grow with S (700 members of a
            small MLP: minutes of JAX compiling); ``benchmarks/ensemble_latency.py``
            compares the loops (``--compile``: first and steady calls at
            S = 10, 100, 700). On CPU ``"unroll"`` was fastest or tied with
            ``"map"`` at small S, and ``"vectorized_map"`` slowest for a CNN.
        shared_weights: indices (in ``model.weights``) of the weights held
            once, not stacked; None (default): every weight whose value is
            the same, bit for bit, in all S sets (a frozen backbone's, which
            a :class:`keras_bnn.SampleStore` stores once); ``()`` stacks
            every weight. :meth:`from_config` passes the saved ensemble's.
            The member's layers whose weights are all held once and whose
            inputs come from the model's input through such layers only (a
            frozen trunk) run once per call, not once per member.
        **kwargs: ``keras.Model`` arguments (``name``, ...).

    Attributes:
        num_members: S.
        likelihood, member_loop: as given (``member_loop`` is saved as given:
            an ``"auto"`` ensemble loaded again chooses again).
        loop_used: the loop ``member_loop`` stands for at this S.
        member_input_shape, member_input_dtype: one example's shape (no batch
            axis) and dtype, from the member model: the serving signature
            (lists or dicts of them for several inputs).
        member_input_names: the serving names of the inputs
            (:func:`keras_bnn.ensemble_inputs.names`).

    Raises:
        ValueError: if ``model`` is not a built model of [batch, ..., units] outputs whose
            input shapes are known, if ``weight_sets`` is empty or does not match
            ``model.weights``, for an unknown ``likelihood``/``member_loop``
            (``"auto"``, ``"unroll"``, ``"map"``, ``"vectorized_map"``),
            for a head that does not fit ``likelihood`` (categorical with
            one logit, bernoulli with more than one, gaussian with an odd
            number of outputs; a categorical or Bernoulli output layer with a
            softmax or sigmoid activation: the member outputs logits), or
            naming ``shared_weights`` for an index of a weight that differs
            between the sets; without ``likelihood``, naming it when the
            model's compiled loss names none (a mean squared error).
    """

    def __init__(self, model, weight_sets, likelihood=None, member_loop="auto",
                 shared_weights=None, **kwargs):
        super().__init__(**kwargs)
        self.member_loop = member_loop
        self.member_input_shape, self.member_input_dtype, units = check_ensemble_model(model)
        self.likelihood = ensemble_outputs.choose(likelihood, units, getattr(model, "loss", None))
        names = list(units) if isinstance(units, dict) else None
        if names:  # Keras' compile reads a multi-output model's loss dict by these
            self.output_names = names
        self._likelihoods = [self.likelihood[n] for n in names] if names else [self.likelihood]
        ensemble_outputs.check_logit_outputs(model, self._likelihoods)
        outputs = ensemble_inputs.symbolic(model)[1]
        self._outputs = Untracked((names, isinstance(outputs, dict)))
        values, self._shared, self._num_members = ensemble_weights.arrange(
            model, weight_sets, shared_weights)
        self._member = Untracked(model)
        # One variable per member weight: its [S, ...] stack, or the weight
        # itself for one held once (an index in self._shared).
        self._stacks = []
        for j, (weight, value) in enumerate(zip(model.weights, values)):
            variable = self.add_weight(
                shape=value.shape,
                dtype=weight.dtype,
                initializer="zeros",
                trainable=False,
                name=f"{'shared' if j in self._shared else 'members'}_{j}_{weight.name}",
            )
            variable.assign(value)
            self._stacks.append(variable)
        # The member's frozen trunk, run once per call (None: the whole member
        # runs per member), and the part run per member.
        parts = ensemble_trunk.split(model, self._shared)
        self._trunk = Untracked(parts and parts[0])
        self._per_member = Untracked(parts[1] if parts else model)
        self.member_input_names = ensemble_inputs.names(model)
        self.input_spec = ensemble_inputs.input_spec(self.member_input_shape)
        # Whether the member's output carries a Keras mask (padding under
        # Embedding(mask_zero=True)): the ensemble's output then carries it.
        outputs = getattr(model, "outputs", None) or ()  # a model without a graph has none
        self._output_masked = [get_keras_mask(output) is not None for output in outputs]
        self.built = True
        self._finalize_member_state()

    @property
    def num_members(self):
        """The number S of posterior samples."""
        return self._num_members

    @property
    def member_loop(self):
        """``member_loop`` as given; set it (e.g. ``"auto"`` on an ensemble loaded from a
        file that recorded ``"unroll"``) to evaluate the members another way from the next
        prediction on (the graphs traced before are dropped).

        Raises:
            ValueError: when set to anything but ``"auto"``, ``"unroll"``, ``"map"`` or
                ``"vectorized_map"``.
        """
        return self._member_loop

    @member_loop.setter
    def member_loop(self, value):
        self._member_loop = check_choice(value, "member_loop", ("auto",) + MEMBER_LOOPS)
        self._views = {}
        self.test_function = None  # evaluate's graph (Keras' cache), traced with the old loop

    @property
    def loop_used(self):
        """The loop the graph evaluates the members by: ``member_loop``, or for
        ``"auto"`` ``"unroll"`` up to :data:`AUTO_UNROLL_MAX` members (10 under
        TensorFlow, 1 under JAX) and ``"map"`` above.

        ``"auto"`` never picks ``"vectorized_map"``: it is chosen once for
        every batch size, and ``benchmarks/member_loop.py`` (CPU, 2 cores
        under load, an MLP 13-32-32-3, S = 4..64) found it at best 25%
        faster than ``"map"`` (JAX ``predict``, S = 64, batches of 32 to
        1024: 2.9 against 3.8 ms; under TensorFlow ties, within the noise of
        ``predict``'s 0.1-0.3 s per call) and 3-8x slower on batches of 8192
        (JAX ``predict``, S = 32: 214 against 31 ms; TensorFlow's graph,
        S = 64: 296 against 80 ms).
        """
        if self.member_loop != "auto":
            return self.member_loop
        unrolled = AUTO_UNROLL_MAX[keras.backend.backend()]
        return "unroll" if self.num_members <= unrolled else "map"

    # ----------------------------------------------------------- the graph
    def _run(self, part, inputs, weights):
        """``part`` (the member model or a part of it) on ``inputs`` with the
        weights ``weights`` (a full list, in the member's ``weights`` order)."""
        position = {id(w): j for j, w in enumerate(self._member.value.weights)}

        def values(variables):
            # A variable that is not a weight (seed-generator or metric
            # state) is the member's own, the same in every member.
            return [weights[position[id(v)]] if id(v) in position else v for v in variables]

        # A subclassed member's call may take no `training` (Keras' own call then
        # leaves it out; stateless_call passes what it is given).
        training = {"training": False} if getattr(part, "_call_has_training_arg", True) else {}
        outputs, _ = part.stateless_call(values(part.trainable_variables),
                                         values(part.non_trainable_variables),
                                         inputs, **training)
        return outputs

    def _members_and_finite_rows(self, inputs):
        """(per output the raw [S, N, ..., units] member outputs, [N] finite-input mask or
        None, per output the member output's Keras mask [N, ...] or None): lists, one
        item per output (:mod:`keras_bnn.ensemble_outputs`).

        The Keras mask (``Embedding(mask_zero=True)``'s padding, carried to a
        per-timestep output) is the first member's: it depends on the input,
        not on the weights. Each member returns its masks beside its outputs,
        so that the loops of ``"map"`` and ``"vectorized_map"`` hand them on
        ([S, N, ...], of which the first is kept) without a member traced for
        the mask alone (until 2026-11-29 one more member was).
        """
        inputs = ensemble_inputs.convert(
            ensemble_inputs.by_position(inputs, self.member_input_shape,
                                        self.member_input_names),
            self.member_input_shape, self.member_input_dtype)
        values = [v.value for v in self._stacks]
        stacked = [j for j in range(len(values)) if j not in self._shared]

        # The frozen trunk's output, the same in every member, computed once.
        head_inputs = inputs if self._trunk.value is None else self._run(
            self._trunk.value, inputs, values)

        masked = [j for j, is_masked in enumerate(self._output_masked) if is_masked]

        def member(slices):  # one member's slices of the stacks, in `stacked` order
            weights = list(values)  # a weight held once is every member's
            for j, weight in zip(stacked, slices):
                weights[j] = weight
            leaves = keras.tree.flatten(self._run(self._per_member.value, head_inputs, weights))
            return leaves + [get_keras_mask(leaves[j]) for j in masked]  # outputs, masks

        stacks = [values[j] for j in stacked]
        if not stacked:  # every member the same
            outputs = [ops.stack([leaf] * self.num_members) for leaf in member([])]
        elif self.loop_used == "unroll":
            members = [member(list(w)) for w in zip(*[ops.unstack(s, axis=0) for s in stacks])]
            outputs = [ops.stack(leaf) for leaf in zip(*members)]
        elif self.loop_used == "map":
            outputs = backend.map_members(member, stacks)
        else:
            outputs = list(ops.vectorized_map(member, stacks))
        cut = len(outputs) - len(masked)
        masks = [None] * cut
        for j, mask in zip(masked, outputs[cut:]):  # [S, N, ...]: the first member's
            masks[j] = mask[0]
        outputs = outputs[:cut]
        # Mixed precision: the members compute in low precision, the average,
        # entropies and std (differences of nearly equal numbers) in float32.
        outputs = [ops.cast(leaf, "float32") if keras.backend.standardize_dtype(leaf.dtype) in (
            "float16", "bfloat16") else leaf for leaf in outputs]
        return outputs, ensemble_inputs.finite_rows(inputs, self.member_input_shape,
                                                    self.member_input_dtype), masks

    def call(self, inputs, training=None):
        """The posterior predictive.

        Per position for a member output ``[N, ..., units]`` of higher rank
        (a tagger's ``[N, T, K]``: p̄ [N, T, K]), which carries the member's
        Keras mask (padding), so that ``evaluate``'s loss and metrics average
        over the unmasked positions only, as Keras' do for the member.

        Args:
            inputs: [N, *input_shape] tensor (a list or dict of them for several inputs).
            training: ignored (members always run in inference mode).

        Returns:
            ``"categorical"``: p̄ = exp(logsumexp_s(log_softmax f_s) − log S),
            [N, K]. ``"bernoulli"``: p̄(y=1) = exp(logsumexp_s(log sigmoid
            f_s) − log S), [N, 1]. ``"gaussian"``: ``[mean, log(var)]``, [N, 2D], with mean
            and var of the mixture (:mod:`keras_bnn.uncertainty`); per output, in the
            member's list or dict, for several outputs (each under its own likelihood).
        """
        members, finite, masks = self._members_and_finite_rows(inputs)
        outputs = []
        for leaf, likelihood, mask in zip(members, self._likelihoods, masks):
            if likelihood == "gaussian":
                output = uncertainty.nan_rows(uncertainty.predictive(leaf, likelihood), finite)
                # for evaluate's loss, made only if it is read
                ensemble_scoring.attach_members(output, functools.partial(
                    self._batch_first, leaf, likelihood, finite, mask))
            else:  # evaluate's loss reads log p̄, exact where p̄ underflows
                log_probs = uncertainty.log_predictive_outcomes(leaf, likelihood)
                output = uncertainty.nan_rows(
                    uncertainty.outcome_probabilities(log_probs, likelihood), finite)
                log_probs = uncertainty.nan_rows(log_probs, finite)
                set_keras_mask(log_probs, mask)
                ensemble_scoring.attach_log_probabilities(output, log_probs)
            set_keras_mask(output, mask)
            outputs.append(output)
        return self._pack(outputs)

    def _pack(self, leaves):
        """Per-output values in the member's output structure (one: the value)."""
        return ensemble_outputs.pack(leaves, *self._outputs.value)

    def _batch_first_members(self, inputs, log_probabilities=False):
        """Each member's prediction (:func:`keras_bnn.uncertainty.member_predictions`,
        ``log_probabilities`` as there) on ``inputs``, [N, S, ..., units], NaN in the
        rows of a non-finite input, carrying the member's Keras mask [N, ...] (for a
        loss of the members)."""
        members, finite, masks = self._members_and_finite_rows(inputs)
        return self._pack([self._batch_first(*item, finite, mask, log_probabilities)
                           for item, mask in zip(zip(members, self._likelihoods), masks)])

    def _batch_first(self, members, likelihood, finite, mask, log_probabilities=False):
        """One output's :meth:`_batch_first_members` of its [S, N, ..., units] members."""
        predictions = uncertainty.member_predictions(members, likelihood, log_probabilities)
        output = uncertainty.nan_rows(ops.swapaxes(predictions, 0, 1), finite)
        set_keras_mask(output, mask)
        return output

    def predictive_summary(self, inputs):
        """The posterior predictive and its uncertainty decomposition.

        :func:`keras_bnn.uncertainty.summary` of the members' outputs on
        ``inputs``: for ``"categorical"`` the predictive p̄ and log p̄, the
        predictive entropy H[p̄] (total), the expected entropy
        (1/S) Σ_s H[p_s] (aleatoric), their difference, the mutual
        information (epistemic), and the per-class std across members; for
        ``"bernoulli"`` the same for the two outcomes; for ``"gaussian"``
        the mixture's mean and its variance, aleatoric + epistemic.

        Args:
            inputs: [N, *input_shape] tensor (a list or dict of them for several inputs).

        Returns:
            dict of tensors, keys :data:`CATEGORICAL_OUTPUTS`,
            :data:`BERNOULLI_OUTPUTS` or :data:`GAUSSIAN_OUTPUTS`; NaN in the
            rows whose (floating) input holds a NaN or Inf; one per output (a list or dict).
        """
        members, finite, _ = self._members_and_finite_rows(inputs)
        return self._pack([{name: uncertainty.nan_rows(value, finite) for name, value in
                            uncertainty.summary(leaf, likelihood).items()}
                           for leaf, likelihood in zip(members, self._likelihoods)])

    def predict_on_batch(self, x):
        """``keras.Model.predict_on_batch`` of the posterior predictive, one row an example
        under ``tf.distribute`` (:func:`keras_bnn.distribute.each_example_once`).

        Args:
            x: as in Keras.

        Returns:
            As ``keras.Model.predict_on_batch``.
        """
        return distribute.each_example_once(self, super().predict_on_batch(x))

    def member_weights(self, held_once=True):
        """The stacked weight sets, one array per member weight.

        Args:
            held_once: False leaves out the weights held once (the same in every
                member, e.g. a frozen backbone's), as weight-space diagnostics do.

        Returns:
            List of numpy arrays ``[S, *weight.shape]`` in the member model's
            ``weights`` order (``[j][s]``: weight j of sample s, as stored); a
            weight held once is a read-only view broadcast over the S members.
        """
        kept = [v.value for j, v in enumerate(self._stacks) if held_once or j not in self._shared]
        return ensemble_weights.as_stacks([ops.convert_to_numpy(v) for v in kept],
                                          self._shared if held_once else (), self.num_members)

    # ------------------------------------------------------------ export
    def export(self, model_dir, version=None, verbose=False):
        """Writes a TensorFlow Serving version directory ``model_dir/<version>``.

        :func:`keras_bnn.export.export_ensemble` of this ensemble (see there
        for the signature, versioning and durability).

        Args:
            model_dir: the model's base path, e.g. ``saved_models/cifar10_atmc``.
            version: positive integer version; ``None`` takes the next free one.
            verbose: print the exported endpoint.

        Returns:
            The path of the new version directory (None on a multi-worker
            cluster's worker that is not the chief, which exports nothing).

        Raises:
            FileExistsError: if ``model_dir/<version>`` already exists.
            ValueError: for a bad ``version`` or ``model_dir``.
            NotImplementedError: under a Keras backend other than TensorFlow.
        """
        return export_lib.export_ensemble(self, model_dir, version=version, verbose=verbose)
