"""Durable file writes: temp name + fsync + rename, and exclusive claims.

Samples, ``store.json``, the run's JSON and CSV files, export versions and
``models.config`` are written through these helpers, so a crash (kill -9,
power loss after the fsync) leaves either the old state or the complete new
file, never a partial one.

:func:`open_regular` is the readers' counterpart: it opens a file only if
it is a regular one, without blocking on a named pipe.

Temporary names are ``.tmp-<host>-<pid>-<random>``: :func:`remove_stale`
deletes those whose writer (same host, dead or zombie pid) can no longer finish
them, and never touches a live writer's.
"""

import errno
import fcntl
import itertools
import os
import secrets
import shutil
import socket
import stat

TEMP_PREFIX = ".tmp-"
_HOST = socket.gethostname().replace("-", "_").replace(os.sep, "_") or "host"


def temp_path(directory, tag=""):
    """A fresh temporary path in ``directory`` (``.tmp-<host>-<pid>-<tag><random>``)."""
    return os.path.join(
        directory, f"{TEMP_PREFIX}{_HOST}-{os.getpid()}-{tag}{secrets.token_hex(6)}"
    )


def _umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


def fsync_directory(path):
    """fsyncs a directory, so a rename or link inside it survives a crash."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def fsync_tree(root):
    """fsyncs every file and directory under ``root``."""
    for directory, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_directory(directory)


def _write_temp(directory, write, target):
    """Writes ``write(fileobj)`` to a new fsynced temp file; returns its path.

    The file gets the usual permissions (0666 less the umask), so a server
    running as another user can read exports and samples. An OSError (a
    full disk: ENOSPC, EFBIG, EDQUOT) names ``target``, the file being
    written, and the temp file is removed. So does one at creating the temp
    file (a read-only directory or file system: EACCES, EROFS; no inode left).
    """
    tmp = temp_path(directory)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 & ~_umask())
    except OSError as error:
        raise _naming(error, target) from error
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        _remove_quietly(tmp)
        raise _naming(error, target) from error
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


def _naming(error, target):
    """``error`` (an OSError) again, its message naming ``target``, the file being written."""
    return type(error)(error.errno, f"{error.strerror or error}: cannot write {target} "
                                    "(nothing already written is lost)")


def _remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def atomic_write(path, write):
    """Writes a file through ``write(fileobj)``: temp name, fsync, rename.

    Replaces ``path`` if it exists (use :func:`create_exclusive` to never
    replace).

    Args:
        path: destination file.
        write: callable writing the content to a binary file object.

    Raises:
        OSError: naming ``path``, when it cannot be written or renamed into
            place (a full disk); the temp file is removed and an existing
            ``path`` is left as it was.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = _write_temp(directory, write, path)
    try:
        os.replace(tmp, path)  # rename(2) too can fail for a full disk: ENOSPC, EDQUOT
    except OSError as error:
        _remove_quietly(tmp)
        raise _naming(error, path) from error
    except BaseException:
        _remove_quietly(tmp)
        raise
    fsync_directory(directory)


def create_exclusive(path, write):
    """Publishes a complete new file at ``path``, or fails if one exists.

    The content is written and fsynced under a temp name, then hard-linked
    to ``path``: ``link(2)`` fails with EEXIST when ``path`` exists, so of
    several concurrent writers exactly one creates it, and a reader sees no
    file or the whole file.

    Args:
        path: destination file.
        write: callable writing the content to a binary file object.

    Returns:
        True if this call created ``path``; False if it already existed
        (nothing was changed).
    """
    return create_first_free([path], write) is not None


def create_first_free(paths, write):
    """Publishes ``write``'s content at the first of ``paths`` that is free.

    Like :func:`create_exclusive`, but the content is written once and
    linked to each candidate in turn until one does not exist yet: the way
    concurrent appenders claim distinct indices without a lock.

    Args:
        paths: iterable of candidate destinations (same directory).
        write: callable writing the content to a binary file object.

    Returns:
        The path created, or None if every candidate existed.
    """
    paths = iter(paths)
    first = next(paths, None)
    if first is None:
        return None
    directory = os.path.dirname(os.path.abspath(first))
    tmp = _write_temp(directory, write, first)
    try:
        for path in itertools.chain([first], paths):
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue
            except OSError as error:  # link(2) too can fail for a full disk: ENOSPC, EDQUOT
                raise _naming(error, path) from error
            fsync_directory(directory)
            return path
        return None
    finally:
        _remove_quietly(tmp)


def open_regular(path):
    """Opens ``path`` for reading if it is a regular file, without blocking.

    ``O_NONBLOCK`` makes opening a named pipe return at once instead of
    waiting for a writer; a non-regular file is then refused.

    Args:
        path: the file.

    Returns:
        A binary file object.

    Raises:
        ValueError: if ``path`` is not a regular file (pipe, device, socket,
            directory).
        OSError: if it cannot be opened.
    """
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise ValueError("it is not a regular file")
    return os.fdopen(handle, "rb")


def publish_directory(staging, target):
    """Renames a fully written directory ``staging`` to a new ``target``.

    Raises:
        FileExistsError: if ``target`` exists (``staging`` is left for the
            caller to remove).
    """
    fsync_tree(staging)
    # rename(2) fails (ENOTEMPTY/EEXIST) onto a non-empty directory, so a
    # published version is never replaced; an empty one is checked first.
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "Directory exists; refusing to replace it", target)
    try:
        os.rename(staging, target)
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(errno.EEXIST, "Directory appeared meanwhile; refusing "
                                  "to replace it", target) from None
        raise
    fsync_directory(os.path.dirname(os.path.abspath(target)))


def _writer_alive(name):
    """False only for a temp name of this host whose writing process is gone."""
    parts = name[len(TEMP_PREFIX):].split("-")
    if len(parts) < 3 or parts[0] != _HOST or not parts[1].isdigit():
        return True
    pid = int(parts[1])
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return not _zombie(pid)


def _zombie(pid):
    """Whether ``pid`` has exited but is not yet reaped (Linux ``/proc`` state ``Z``).

    Such a process answers ``kill(pid, 0)`` but can never finish its file.
    False where ``/proc`` cannot say (other systems, a process gone meanwhile).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat_line = handle.read()
    except OSError:
        return False
    # "<pid> (<comm>) <state> ...": comm may hold spaces and parentheses.
    fields = stat_line[stat_line.rfind(b")") + 1:].split()
    return bool(fields) and fields[0] == b"Z"


def remove_stale(directory):
    """Deletes temp files and staging directories left by killed writers.

    Args:
        directory: where to look (not recursive).

    Returns:
        The names removed.
    """
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(TEMP_PREFIX) or _writer_alive(name):
            continue
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except OSError:  # e.g. a read-only store: reading must still work
            continue
        removed.append(name)
    return removed


class InUseError(RuntimeError):
    """A directory is locked by another live process (see :class:`DirectoryLock`)."""


class DirectoryLock:
    """An exclusive, advisory lock on a directory: one writer at a time.

    ``flock(2)`` on ``<directory>/.lock``, which holds the owner's pid. The
    kernel releases the lock when its process exits, however it ends
    (kill -9 included), so a crashed writer never leaves a stale lock.

    Use as a context manager::

        with DirectoryLock(run_dir):
            ...  # train, append samples, write backups

    Args:
        directory: the directory to lock (created if missing).

    Raises:
        InUseError: on entry, if another process holds the lock; the
            message names the directory and that process's pid.
    """

    NAME = ".lock"

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self._handle = None

    def __enter__(self):
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, self.NAME)
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(handle, 32).decode(errors="replace").strip() or "unknown"
            os.close(handle)
            raise InUseError(f"{self.directory} is in use by pid {owner} (one writer per "
                             "directory); wait for it to finish or use another directory."
                             ) from None
        os.ftruncate(handle, 0)
        os.write(handle, str(os.getpid()).encode())
        self._handle = handle
        return self

    def __exit__(self, *exc_info):
        handle, self._handle = self._handle, None
        if handle is not None:
            os.close(handle)  # releases the lock
        return False
