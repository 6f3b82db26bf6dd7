"""The optimizer's step counter, and an epoch count that goes on across ``fit`` calls.

Keras numbers a ``fit``'s epochs from ``initial_epoch`` (0 unless given), so
a notebook's second ``fit`` starts at epoch 0 again while the chain goes on.
:class:`EpochCount` gives a callback the chain's count instead; the
sampler's step counter (``optimizer.iterations``), which goes on across
fits, tells where it is. :class:`keras_bnn.callbacks.CollectSamples` and
:class:`keras_bnn.schedule_callbacks.TemperatureRamp` count their epochs so.
"""

import keras

from keras_bnn import backend


def current_step(optimizer):
    """The optimizer's step counter as a Python int (also for a tf.distribute variable)."""
    return int(backend.to_numpy(optimizer.iterations))


class EpochCount(keras.callbacks.Callback):
    """A callback that counts epochs across ``fit`` calls (:meth:`_count`).

    A subclass calls ``super().on_train_begin()`` and ``super().on_epoch_end(...)``
    where it overrides them.
    """

    def __init__(self):
        super().__init__()
        self._offset = None  # this fit's epoch -> the count across fits
        self._last_end = None  # (epoch on that count, step) of the last epoch end seen

    def on_train_begin(self, logs=None):
        self._offset = None

    def on_epoch_end(self, epoch, logs=None):
        self._last_end = (self._count(epoch), current_step(self.model.optimizer))

    def _count(self, epoch):
        """Epoch ``epoch`` of this ``fit`` on the count that goes on across fits.

        A ``fit`` whose first epoch is 0 at optimizer step s > 0 (a later
        ``fit`` without ``initial_epoch``) goes on from the epoch after the
        last one this callback saw end at step s, or else (a new callback)
        from epoch ``s // steps_per_epoch``; any other ``fit`` keeps its own
        numbering (``initial_epoch``, or the epoch BackupAndRestore restored).
        """
        if self._offset is None:
            self._offset, step = 0, current_step(self.model.optimizer)
            if epoch == 0 and step > 0:
                last_epoch, last_step = self._last_end or (None, None)
                steps = (self.params or {}).get("steps")
                self._offset = last_epoch + 1 if last_step == step else (
                    step // steps if steps else 0)
        return epoch + self._offset
