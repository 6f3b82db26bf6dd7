"""Each output's compiled loss weighed by its share of the global batch.

Keras' compiled loss (``model._compile_loss``, a ``CompileLoss``) sums,
over the model's outputs ``k``, ``λ_k·L_k`` where ``L_k`` is the output's
loss reduced on this replica's shard: ``Σ_r ℓ / d_k,r`` with a denominator
of its own (the shard's number of loss values, of unmasked timesteps, of
labels not the loss's ``ignore_class``, or its sum of weights). Under
``tf.distribute`` the global batch's loss is ``Σ_k λ_k·Σ ℓ / D_k`` with
``D_k = Σ_r d_k,r``, so each output has to be rescaled by its own share
(:func:`keras_bnn.backend.tensorflow.loss_as_shard`)
before the outputs are summed: one factor for the sum cannot do it.
:func:`weigh_by_share` wraps each output's loss function in the compiled
loss, once it is built; the wrapper is the identity on one device and under
JAX.
"""

from keras_bnn import backend
from keras_bnn.loss_terms import label_mask


def weigh_by_share(compile_loss):
    """Wraps each output's loss in ``compile_loss`` in :func:`backend.loss_as_shard`.

    ``Σ_k λ_k·L_k`` becomes ``Σ_k λ_k·L_k·(d_k,r/D_k)·(B/b_r)``: each output's
    loss weighs as a plain mean of the shard's ``b_r`` examples, which the
    step (and Keras' logged ``loss``) weighs by ``b_r/B``.

    Keras builds the compiled loss (its list of ``(path, loss, weight,
    name)`` per output) at its first call; an unbuilt one is wrapped right
    after its build.

    Args:
        compile_loss: the model's ``_compile_loss`` (Keras' ``CompileLoss``),
            or None (a model compiled without a loss).
    """
    if compile_loss is None:
        return
    if compile_loss.built:
        _wrap(compile_loss)
        return
    build = compile_loss.build

    def build_and_wrap(y_true, y_pred):
        build(y_true, y_pred)
        _wrap(compile_loss)

    compile_loss.build = build_and_wrap


def _wrap(compile_loss):
    compile_loss._flat_losses[:] = [
        entry._replace(loss=_share_of_global_batch(entry.loss))
        for entry in compile_loss._flat_losses]


def _share_of_global_batch(loss):
    reduction = getattr(loss, "reduction", "sum_over_batch_size")

    def call(y_true, y_pred, sample_weight=None):
        return backend.loss_as_shard(loss(y_true, y_pred, sample_weight), y_pred,
                                     sample_weight, reduction,
                                     label_mask(loss, y_true, y_pred))

    return call
