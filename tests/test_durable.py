"""keras_bnn.durable.DirectoryLock: one writer per directory, across processes."""

import os
import signal
import subprocess
import sys

import pytest

from keras_bnn import durable

_HOLDER = """
import sys, time
from keras_bnn import durable
with durable.DirectoryLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


def _holder(path):
    process = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_process_is_refused_naming_the_owner_and_a_kill_releases(tmp_path):
    """#21 item 13: two writers on one run directory. The second gets
    InUseError naming the first's pid; after kill -9 of the first the
    lock is free at once (the kernel drops flock locks of dead processes)."""
    holder = _holder(tmp_path)
    try:
        with pytest.raises(durable.InUseError, match=f"in use by pid {holder.pid}"):
            with durable.DirectoryLock(tmp_path):
                pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    with durable.DirectoryLock(tmp_path) as lock:
        assert lock.directory == str(tmp_path)
        assert (tmp_path / ".lock").read_text() == str(os.getpid())


def test_the_lock_is_released_on_exit_and_reentry_by_another_lock_fails(tmp_path):
    with durable.DirectoryLock(tmp_path):
        with pytest.raises(durable.InUseError):  # flock is per open file
            with durable.DirectoryLock(tmp_path):
                pass
    with durable.DirectoryLock(tmp_path):
        pass


@pytest.mark.parametrize("step, writer", [
    ("replace", lambda path: durable.atomic_write(path, lambda f: f.write(b"new"))),
    ("link", lambda path: durable.create_exclusive(path + ".2", lambda f: f.write(b"new"))),
])
def test_a_full_disk_at_publishing_names_the_file_and_keeps_what_was_there(tmp_path,
                                                                           monkeypatch, step,
                                                                           writer):
    """rename(2) and link(2) can fail for a full disk (ENOSPC, EDQUOT) after
    the content was written: the error names the file being written (a
    backup's error line read "[Errno 28] No space left on device; free space,
    then continue the run with --resume", naming none), the temp file is
    removed and the file already there is unchanged."""
    import errno

    path = str(tmp_path / "file")
    durable.atomic_write(path, lambda f: f.write(b"old"))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, step, full)
    with pytest.raises(OSError, match=f"No space left on device: cannot write {path}") as raised:
        writer(path)
    assert raised.value.errno == errno.ENOSPC
    assert sorted(os.listdir(tmp_path)) == ["file"]
    assert open(path, "rb").read() == b"old"
