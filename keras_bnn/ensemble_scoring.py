"""What a :class:`keras_bnn.PosteriorEnsemble` scores: ``compile``, ``evaluate``'s loss.

:class:`Scoring` is the ensemble's ``keras.Model`` methods of scoring: its
``compile`` refuses losses and metrics that would misread the ensemble's
output (:func:`keras_bnn.loss_checks.check_ensemble_scoring`), a reloaded
ensemble compiles as it was saved, ``fit`` is refused (nothing to train),
and ``evaluate``'s loss of a ``"gaussian"`` ensemble reads the members'
outputs, not the ensemble's (``compute_loss``): the NLL of the posterior
predictive, the mixture (1/S) Σ_s N(μ_s, σ²_s), as ``keras-bnn evaluate``
scores it, where the ensemble outputs its moment-matched Gaussian; that of a
categorical or Bernoulli one reads log p̄ (:func:`attach_log_probabilities`),
not p̄, which underflows float32 for members certain of a wrong class. The
members are computed once per ``evaluate`` batch: ``call`` carries them on
its output (:func:`attach_members`, as Keras carries ``_keras_mask``), and
``compute_loss`` reads them there (Keras' ``test_step`` has no other way to
hand them on, on TensorFlow or JAX). What ``call`` carries is a function
that makes them from the members it ran: ``predict``, which reads no loss,
never makes them (until 2026-11-29 every ``call`` made them, work an eager
call paid for). In Keras' one-off symbolic pass, which only builds the
loss's state from shapes, the loss is given a stand-in of the members'
shape, not the members run again (until 2026-11-29 under JAX the first
``evaluate`` traced them once more there). ``loss`` and each output's logged
loss (``cls_loss``, ...) weigh each batch by the terms its loss counts
(:mod:`keras_bnn.loss_shares`, as for a :class:`keras_bnn.BayesianModel`):
the mean over the set's counted terms (examples, unmasked tokens, labels not
an ``ignore_class``, the weights of ``"mean_with_sample_weight"``) for any
``batch_size``; of several outputs ``loss`` is their λ-weighted sum.
"""

import keras
from keras import ops

from keras_bnn import backend, distribute
from keras_bnn import ensemble_outputs
from keras_bnn import label_checks
from keras_bnn import likelihoods
from keras_bnn import loss_shares
from keras_bnn.keras_private import get_tensor_attr, in_symbolic_scope, set_tensor_attr
from keras_bnn.validation import bound_arguments


#: The attribute of a Gaussian ensemble's output that carries its members' outputs.
MEMBERS_ATTR = "_keras_bnn_members"
#: The attribute of a categorical or Bernoulli ensemble's output that carries log p̄.
LOG_PROBABILITIES_ATTR = "_keras_bnn_log_probabilities"


def attach_members(output, members):
    """Carries ``members`` on ``output`` for :meth:`Scoring.compute_loss`.

    Keras' ``set_tensor_attr`` (as for ``_keras_mask``): an attribute of a
    TensorFlow tensor, a weak map by ``id`` for a JAX array.

    Args:
        output: the ensemble's output tensor.
        members: a function of no arguments returning the members' outputs on
            the same inputs, [N, S, ..., units] (called where the loss reads them).

    Returns:
        None.
    """
    set_tensor_attr(output, MEMBERS_ATTR, members)


def attach_log_probabilities(output, log_probs):
    """Carries log p̄ on a categorical or Bernoulli ``output`` for :meth:`Scoring.compute_loss`.

    Args:
        output: the ensemble's output tensor, p̄ [N, ..., K] or p̄(y=1) [N, ..., 1].
        log_probs: log p̄ of each outcome, [N, ..., K] or [N, ..., 2] (y=0, y=1)
            (:func:`keras_bnn.uncertainty.log_predictive_outcomes`), carrying the mask;
            marked (:func:`keras_bnn.likelihoods.mark_log_probabilities`) here.

    Returns:
        None.
    """
    set_tensor_attr(output, LOG_PROBABILITIES_ATTR,
                    likelihoods.mark_log_probabilities(log_probs))


def _nothing_to_train(method):
    return TypeError(
        f"PosteriorEnsemble.{method}: an ensemble of posterior samples has nothing to train "
        "(its weights are the samples). Fit the BayesianModel with "
        "kb.callbacks.CollectSamples, then build the ensemble from its store "
        "(kb.PosteriorEnsemble.from_store).")


class Scoring:
    """The scoring methods of :class:`keras_bnn.PosteriorEnsemble` (mixed into it).

    Reads the ensemble's ``likelihood``, the members carried on its output
    (:func:`attach_members`) or else its ``_batch_first_members``
    (each member's raw output, ``[N, S, ..., units]``, NaN in the rows of a
    non-finite input).
    """

    def compile(self, *args, **kwargs):
        """``keras.Model.compile``, for ``evaluate``: losses and metrics of the predictive.

        ``evaluate`` scores :meth:`call`'s output: the predictive
        probabilities p̄, not logits, so a ``from_logits=True`` loss or metric
        (the one the member model was trained with) would score
        log-softmax(p̄), a wrong NLL with no error. Use
        :class:`keras_bnn.likelihoods.PredictiveNLL` (Keras' cross-entropies
        clip p̄ at 1e-7): ``loss`` is then ``−(1/N)·Σ log p̄(y_i|x_i)``, read
        from log p̄ in log space (:meth:`compute_loss`), exact where p̄
        underflows float32 (:func:`keras_bnn.metrics.nll` floors it). A
        ``"gaussian"`` ensemble's loss is
        :class:`keras_bnn.likelihoods.PredictiveGaussianNLL` (a
        ``GaussianNLL`` is replaced by one), fed the members' outputs: the
        mixture's NLL ``(1/N)·Σ_i [log S − logsumexp_s log N(y_i; μ_si, σ²_si)]``,
        the ``nll`` of :func:`keras_bnn.metrics.evaluate_gaussian_members`;
        its metrics (your own) read the output ``[mean, log variance]``.

        An ensemble of several outputs takes Keras' multi-output ``loss`` and
        ``metrics`` (a list or a dict by output name), checked per output
        (:func:`keras_bnn.ensemble_outputs.check_scoring`); ``evaluate`` logs
        each output's loss (``<output>_loss``) weighed, batch by batch, by the
        terms the loss counts (:func:`keras_bnn.loss_shares.weigh_by_share`),
        and ``loss`` their λ-weighted sum: Keras weighed each batch 1 when the
        batch size is not static (TensorFlow), a ragged last batch as much as
        a full one, and ``loss`` by its examples.

        Args:
            *args, **kwargs: as for ``keras.Model.compile``.

        Returns:
            None.

        Raises:
            ValueError: as :func:`keras_bnn.loss_checks.check_ensemble_scoring`
                (naming ``loss``, ``metrics`` or ``weighted_metrics``).
        """
        arguments = bound_arguments(keras.Model.compile, args, kwargs)
        super().compile(**ensemble_outputs.check_scoring(arguments, self.likelihood,
                                                         self._outputs.value[0]))
        loss_shares.weigh_by_share(self)

    def compile_from_config(self, config):
        """Compiles a loaded ensemble as it was saved (Keras' own skips an overridden
        ``compile``, warning, and left a reloaded ensemble uncompiled).

        Args:
            config: the dict :meth:`get_compile_config` saved with the ensemble.
        """
        self.compile(**keras.saving.deserialize_keras_object(config))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """``keras.Model.compute_loss``; a ``"gaussian"`` ensemble's loss reads the members.

        The ``"gaussian"`` ensemble's output ``y_pred`` is the mixture's
        moment-matched ``[mean, log variance]``, which cannot give the
        mixture's NLL: its loss (a
        :class:`keras_bnn.likelihoods.PredictiveGaussianNLL`) is given the
        members' outputs on ``x``, ``[N, S, 2D]``: those ``call`` carried on
        ``y_pred`` (:func:`attach_members`), computed again from ``x`` only
        for a ``y_pred`` that does not carry them (zeros of their shape in
        Keras' symbolic shape pass, ``in_symbolic_scope``). A categorical or
        Bernoulli output's :class:`keras_bnn.likelihoods.PredictiveNLL` is
        given log p̄ of each outcome, which ``call`` carried on ``y_pred``
        (:func:`attach_log_probabilities`, marked as log-probabilities; a
        ``y_pred`` without it stays p̄, which the loss floors at PROB_FLOOR):
        −log p̄_y exact where p̄_y underflows float32 (until 2026-11-30
        floored at 87.3 nats); their other losses read ``y_pred``. Of an
        ensemble of several outputs, each output's loss reads its own so.

        Args:
            x, y, y_pred, sample_weight, training: as for ``keras.Model.compute_loss``.

        Returns:
            The loss, a scalar tensor.
        """
        if self.loss is None or x is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        label_checks.count_labels(self, y, y_pred, label_checks.EVALUATION)  # p̄, before log p̄
        outputs, again = keras.tree.flatten(y_pred), None
        names = self._outputs.value[0] or [None]
        for j, likelihood in enumerate(self._likelihoods):
            if likelihood == "gaussian":
                members = get_tensor_attr(outputs[j], MEMBERS_ATTR)
                if members is not None:
                    outputs[j] = members()
                elif in_symbolic_scope():  # shapes only: [N, S, ..., 2D] of zeros
                    outputs[j] = ops.zeros_like(ops.repeat(
                        ops.expand_dims(outputs[j], 1), self.num_members, axis=1))
                else:
                    again = again or keras.tree.flatten(self._batch_first_members(x))
                    outputs[j] = again[j]
            elif isinstance(ensemble_outputs.output_loss(self.loss, names[j], j),
                            likelihoods.PredictiveNLL):
                log_probs = get_tensor_attr(outputs[j], LOG_PROBABILITIES_ATTR)
                outputs[j] = outputs[j] if log_probs is None else log_probs
        return super().compute_loss(x, y, self._pack(outputs), sample_weight,
                                    training=training)

    def test_step(self, *args):
        """Keras' test step, each output's loss weighed by the terms it counts.

        The loss trackers weigh each batch by its loss's denominator
        (:func:`keras_bnn.loss_shares.counting_terms`): ``loss`` and each
        output's loss are means over the set's counted terms (unmasked
        tokens, labels not an ``ignore_class``, the weights of
        ``"mean_with_sample_weight"``) for any ``batch_size``.

        Args:
            *args: as for Keras' ``test_step`` of the backend.

        Returns:
            As Keras' ``test_step``.

        Raises:
            ValueError: ``jit_compile=True`` under a ``tf.distribute`` strategy of several
                replicas (:func:`keras_bnn.distribute.check_jit_compile`), at the trace.
        """
        distribute.check_jit_compile(self, "PosteriorEnsemble.evaluate/test_on_batch")
        with loss_shares.counting_terms():
            return super().test_step(*args)

    def evaluate(self, *args, **kwargs):
        """``keras.Model.evaluate``, batches checked first under ``keras.distribution``.

        As the model's :meth:`keras_bnn.BayesianModel.evaluate`: arrays whose
        batches do not split over the devices are refused before Keras' JAX
        loop, which takes the weights out of the variables; where a dataset's
        ragged last batch fails inside it, the error names ``batch_size`` and
        the weights are put back (:func:`keras_bnn.backend.values_kept`; until
        2026-11-30 the ensemble was left without weights, every later call
        failing with ``TypeError: 'NoneType' object is not callable``).

        Args:
            *args, **kwargs: as for ``keras.Model.evaluate``.

        Returns:
            As ``keras.Model.evaluate``.

        Raises:
            ValueError: naming ``batch_size`` where batches do not split over
                the devices (:func:`keras_bnn.distribute.check_data_batches`).
        """
        kwargs = bound_arguments(keras.Model.evaluate, args, kwargs)
        distribute.check_data_batches(kwargs, None, "evaluate")
        with (distribute.explained_uneven_batches("evaluate"), backend.values_kept(self),
              label_checks.raising_after(self, "evaluate")):
            return super().evaluate(**kwargs)

    def get_metrics_result(self):
        """``keras.Model.get_metrics_result``; ``loss`` of several outputs the sum of
        their weighed losses (:func:`keras_bnn.loss_shares.evaluation_logs`).

        Returns:
            dict: the metrics' results by name.
        """
        return loss_shares.evaluation_logs(self, super().get_metrics_result())

    def fit(self, *args, **kwargs):
        """Refused: an ensemble of posterior samples has nothing to train.

        Raises:
            TypeError: always, saying what to do instead.
        """
        raise _nothing_to_train("fit")

    def train_on_batch(self, *args, **kwargs):
        """Refused, as :meth:`fit`.

        Raises:
            TypeError: always, saying what to do instead.
        """
        raise _nothing_to_train("train_on_batch")
