"""How a :class:`keras_bnn.PosteriorEnsemble` predicts over a dataset.

:class:`Prediction` is the ensemble's ``keras.Model`` methods of prediction
(mixed into it): ``predict``, ``predict_uncertainty`` and ``predict_members``
each run one graph per ensemble for any batch size (under JAX, Keras' step
compiled for a few batch shapes: arrays' last batch is padded, :func:`bucketed`),
a :class:`FunctionModel` view made on first use and held out of Keras' tracking
(:class:`Untracked`);
an empty dataset and examples of another shape than the members' input are
refused before Keras' predict loop, as are arrays whose batches
``keras.distribution`` cannot split over its devices (JAX), and an array of 0
examples gives an empty result.
"""

import functools

import keras
import numpy as np
from keras import ops

from keras_bnn import backend
from keras_bnn import distribute, ensemble_inputs
from keras_bnn.fit_data import check_dataset_batched
from keras_bnn.validation import argument_error


class Untracked:
    """Holds an object out of Keras' and TensorFlow's attribute tracking.

    The member model is only a function of the stacked weights: tracking it
    would save (and export) an unused copy of its weights.
    """

    def __init__(self, value):
        self.value = value


class Prediction:
    """The prediction methods of :class:`keras_bnn.PosteriorEnsemble` (mixed into it).

    Reads the ensemble's ``call``, ``predictive_summary``,
    ``_batch_first_members``, member input shape and ``jit_compile``, and keeps
    its views in the ensemble's ``_views`` (emptied where its state changes).
    """

    def _predict_with(self, owner, function, x, batch_size, steps, verbose, callbacks=None,
                      view_name=None):
        """``function`` over ``x`` in the predict loop of the view model of
        ``owner`` (the method's name, in errors) or of ``view_name`` (another name for
        another function of one method), made on its first use (one graph for
        any batch size, see :class:`FunctionModel`).

        Keras' predict loop runs no batch on an empty array (and then fails),
        so an array of 0 examples is passed to ``function`` directly: the
        outputs have 0 rows and their usual trailing shape. ``x`` may take
        the other forms Keras takes (:func:`keras_bnn.ensemble_inputs.by_position`).
        """
        x = ensemble_inputs.by_position(x, self.member_input_shape, self.member_input_names)
        self._check_inputs(x, owner)
        check_dataset_batched(self._member.value, x, owner)  # the member's inputs
        if ensemble_inputs.is_empty_batch(x):
            return keras.tree.map_structure(ops.convert_to_numpy, function(x))
        # Before Keras' JAX loop, which takes the weights out of the variables and
        # loses them when a batch cannot be sharded.
        distribute.check_data_batches({"x": x, "batch_size": batch_size, "steps": steps},
                                      None, owner)
        key = (view_name or owner, bool(self.jit_compile))  # compile(jit_compile=...) may change it
        if key not in self._views:
            self._views[key] = Untracked(FunctionModel(self, function, key[1],
                                                       name=f"{self.name}_{key[0]}"))
        view = self._views[key].value
        padded, rows = (x, None) if steps is not None or callbacks else bucketed(x, batch_size)
        with backend.values_kept(view):  # a dataset's ragged last batch raises inside
            outputs = view.predict(padded, batch_size=batch_size, steps=steps, verbose=verbose,
                                   callbacks=callbacks)
        if rows is None:
            return outputs
        return keras.tree.map_structure(lambda leaf: leaf[:rows], outputs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The posterior predictive (:meth:`call`) over a dataset, batched.

        ``keras.Model.predict``, except that an array of 0 examples gives an
        empty result ([0, K], [0, 1] or [0, 2D]) instead of Keras' error.

        Args:
            x, batch_size, verbose, steps, callbacks: as for ``keras.Model.predict``.

        Returns:
            numpy array, the examples of every batch concatenated (a list or dict of
            them, one per output, for a member of several outputs).
        """
        return self._predict_with("predict", self.call, x, batch_size, steps, verbose,
                                  callbacks)

    def _check_inputs(self, x, owner):
        """Refuses, before Keras' predict loop, an empty dataset (Keras fails on
        one with an internal error) and an array of examples of another shape
        than the members' input (a raw TensorFlow error from deep inside)."""
        if hasattr(x, "cardinality") and int(x.cardinality()) == 0:
            raise argument_error("x", "hold at least one batch", x, owner,
                                 got="an empty dataset")
        ensemble_inputs.check_examples(x, self.member_input_shape, owner)

    def predict_uncertainty(self, x, batch_size=None, steps=None, verbose=0):
        """:meth:`predictive_summary` over a dataset, batched like ``predict``.

        Args:
            x: inputs as for ``keras.Model.predict`` (array, or a dataset of
                inputs or of (inputs, labels)).
            batch_size, steps, verbose: as for ``keras.Model.predict``.

        Returns:
            dict of numpy arrays (keys as :meth:`predictive_summary`), the
            examples of every batch concatenated; one per output, in a list or dict, for
            a member of several outputs.
        """
        return self._predict_with("predict_uncertainty", self.predictive_summary, x,
                                  batch_size, steps, verbose)

    def predict_members(self, x, batch_size=None, steps=None, verbose=0,
                        log_probabilities=False):
        """Each member's own prediction (e.g. for :func:`keras_bnn.metrics.evaluate_members`).

        Args:
            x, batch_size, steps, verbose: as for ``keras.Model.predict``.
            log_probabilities: each member's log-probabilities instead of its
                probabilities (a ``"gaussian"`` output's stay its raw outputs),
                computed as such, finite where a probability underflows float32:
                what :func:`keras_bnn.metrics.predictive_log_probs` and
                ``evaluate_members(..., member_log_probs=...)`` score exactly.

        Returns:
            numpy array [S, N, ..., units]: class probabilities softmax f(x;θ_s)
            (``"categorical"``), p(y=1) = sigmoid f(x;θ_s) (``"bernoulli"``,
            units = 1) or the raw ``[mean, log variance]``
            (``"gaussian"``); one per output (a list or dict) for several outputs.
            With ``log_probabilities``: log_softmax f(x;θ_s) [S, N, ..., K], and
            for ``"bernoulli"`` both outcomes [log σ(−f), log σ(f)] [S, N, ..., 2].
        """
        function = functools.partial(self._batch_first_members,
                                     log_probabilities=bool(log_probabilities))
        outputs = self._predict_with("predict_members", function, x, batch_size, steps, verbose,
                                     view_name="predict_member_log_probabilities"
                                     if log_probabilities else None)
        return keras.tree.map_structure(lambda leaf: np.swapaxes(leaf, 0, 1), outputs)


def bucketed(x, batch_size):
    """Under JAX, arrays ``x`` with zero rows added so that their last batch of
    ``batch_size`` holds a power of two examples (or ``batch_size``).

    Keras' JAX predict step compiles once per batch shape, and an array's
    last batch holds ``n mod batch_size`` examples: 20 predicts of 1-69 rows
    at ``batch_size=16`` compiled an S = 4 ensemble's step 14 times (7.5 s;
    TensorFlow's one graph: once). With the last batch padded to a power of
    two, at most ``log2(batch_size) + 2`` shapes are ever compiled, for less
    than twice the last batch's work. Members run in inference mode, each
    example on its own, so the added rows change no other row; they are cut
    from the outputs. Nothing is padded on TensorFlow (one graph for any
    batch size), for a dataset or generator, or under ``keras.distribution``
    (whose devices must split every batch).

    Args:
        x: ``predict``'s inputs: an array, a list or dict of arrays, or a
            dataset (NumPy and JAX arrays are padded).
        batch_size: ``predict``'s ``batch_size`` (None: Keras' 32).

    Returns:
        ``(inputs, n)``: the padded arrays and the number of examples given,
        or ``(x, None)`` where nothing was padded.
    """
    if keras.backend.backend() != "jax" or keras.distribution.distribution() is not None:
        return x, None
    leaves = keras.tree.flatten(x)
    if not leaves or not all(isinstance(leaf, np.ndarray) or ops.is_tensor(leaf)
                             for leaf in leaves):  # dense arrays only, not a dataset
        return x, None
    batch_size = batch_size or 32
    rows = int(leaves[0].shape[0])
    last = rows % batch_size
    added = min(1 << (last - 1).bit_length(), batch_size) - last if last else 0
    if not added:
        return x, None

    def pad(leaf):
        leaf = np.asarray(leaf)
        return np.concatenate([leaf, np.zeros((added, *leaf.shape[1:]), leaf.dtype)])

    return keras.tree.map_structure(pad, x), rows


class FunctionModel(keras.Model):
    """A keras.Model whose call is ``function(inputs)`` over an ensemble's weights.

    ``function`` is compiled once for any batch size
    (:func:`keras_bnn.backend.predict_graph`): on TensorFlow a graph traced
    here, which Keras' predict loop calls batch by batch without tracing a
    step of its own (``run_eagerly``), so that no later batch size, call or
    ensemble traces anything again. ``jit_compile`` (the ensemble's) compiles
    that graph by XLA, or under JAX Keras' predict step.
    """

    def __init__(self, ensemble, function, jit_compile, **kwargs):
        super().__init__(**kwargs)
        self.ensemble = ensemble
        self._function, self.run_eagerly = backend.predict_graph(
            function, ensemble.member_input_shape, ensemble.member_input_dtype, jit_compile)
        self.jit_compile = jit_compile and not self.run_eagerly  # JAX: Keras' step compiles
        self.built = True

    def call(self, inputs):
        ensemble = self.ensemble
        inputs = ensemble_inputs.by_position(inputs, ensemble.member_input_shape,
                                             ensemble.member_input_names)
        return self._function(ensemble_inputs.convert(
            inputs, ensemble.member_input_shape, ensemble.member_input_dtype))
