"""``keras-bnn`` in a test process: deterministic ops, a kill point, a file size limit.

Usage: ``python cli_run.py <keras-bnn arguments>``, configured by the
environment:

* ``KB_KILL_AT=<point>:<epochs>``: SIGKILL this process while it writes the
  backup after ``<epochs>`` epochs: ``before_publish`` (its file is fully
  written under the temporary name, not yet renamed into place) or
  ``after_publish`` (renamed into place; the epoch's sample, collected after
  the backup, is not stored yet);
* ``KB_FSIZE=<bytes>``: ``RLIMIT_FSIZE``, no file can grow beyond it (a full
  disk: writes fail with EFBIG; SIGXFSZ is ignored so the write returns the
  error instead of killing the process).
* ``KB_FULL_AT=<epochs>``: the disk fills up at the backup after ``<epochs>``
  epochs: publishing it fails with ENOSPC (earlier backups and samples are
  on disk).

The run is backed up after every epoch (``RunBackup`` interval 0, not the
default 10 s), so a kill point can name any epoch.

Under TensorFlow, ops are deterministic
(``tf.config.experimental.enable_op_determinism()``), so two processes that
train the same chain compute the same bits.
"""

import errno
import os
import resource
import signal
import sys

if os.environ.get("KB_FSIZE"):
    limit = int(os.environ["KB_FSIZE"])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()


def _backup_name(epochs):
    return f"epoch-{int(epochs):06d}.npz"


if os.environ.get("KB_KILL_AT") or os.environ.get("KB_FULL_AT"):
    point, killed = os.environ.get("KB_KILL_AT", ":").split(":")
    full = os.environ.get("KB_FULL_AT")
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if full and dst.endswith(_backup_name(full)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)
        if not (killed and dst.endswith(_backup_name(killed))):
            return real_replace(src, dst, *args, **kwargs)
        if point == "before_publish":
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return None

    os.replace = replace  # keras_bnn.durable publishes every file with os.replace


if __name__ == "__main__":
    from keras_bnn import cli
    from keras_bnn.runs import checkpoints

    checkpoints.BACKUP_INTERVAL = 0

    sys.exit(cli.main(sys.argv[1:]))
