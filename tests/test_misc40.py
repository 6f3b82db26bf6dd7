"""Small defects found by session 39 and left (misc40): a zombie writer's temp file, a
models.config that pins old versions, a NUL byte in a plot path, and the fingerprint of
a mixed-precision model."""

import os
import signal
import subprocess
import sys
import time

import pytest

from keras_bnn import durable


# ------------------------------------------------------------------ a zombie writer

def _state(pid):
    """The state letter of ``pid`` in ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0].decode()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads Linux /proc")
def test_a_killed_writer_not_yet_reaped_leaves_no_temp_file(tmp_path):
    """A writer killed (SIGKILL) whose parent has not reaped it is a zombie:
    ``kill(pid, 0)`` still succeeds, so until 2026-12-01 ``remove_stale`` took it for a
    live writer and kept its temp file ("assert [] == ['.tmp-...']"). Now ``/proc``'s
    state ``Z`` makes it dead; a live writer's file is still kept."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = os.path.basename(durable.temp_path(str(tmp_path))).replace(
            f"-{os.getpid()}-", f"-{child.pid}-")
        (tmp_path / live).write_bytes(b"half a sample")
        assert durable.remove_stale(str(tmp_path)) == []
        os.kill(child.pid, signal.SIGKILL)  # not waited for: a zombie until reaped
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z":
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        assert durable.remove_stale(str(tmp_path)) == [live]
        assert os.listdir(tmp_path) == []
    finally:
        child.kill()
        child.wait()
