"""Files the user reads back: written atomically, with the output folder checked first.

A file is written under a unique temporary name in its destination folder, flushed to disk
(fsync), given the mode a new file gets under the user's umask and renamed over the target
(:func:`os.replace`, atomic on POSIX and Windows), so a full disk, a killed process or two
writers at once leave either the previous file or one complete new one, never a truncated or
mixed one, and no temporary file. Errors of the file system (no space, no permission) are raised
as :class:`OutputError` with one line that names the path. Run folders are claimed by exclusive
creation (:func:`claim_run_folder`) and held by a lock while a run writes into them
(:func:`lock_run_folder`); a run that failed before writing anything gives its folder back
(:func:`remove_unused_run_folder`).

Temporary names say who writes them: ``.<name>.<host>-<pid>-<random>.tmp`` and
``.probe-<host>-<pid>-<random>``. A process killed while writing (``kill -9``) leaves one behind;
:func:`remove_stale_temporaries` (called before a run or ``predict`` writes into a folder) removes
those whose process is gone: on this host when the process no longer exists, from another host
(a shared file system) after a day, and those of the older naming without a process after an
hour.
"""

from __future__ import annotations

import contextlib
import errno
import os
import os.path as osp
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import pandas as pd

__all__ = ["OutputError", "atomic_save", "atomic_write", "atomic_write_csv", "check_writable",
           "claim_run_folder", "lock_run_folder", "refuse_output_over_inputs",
           "remove_stale_temporaries", "remove_unused_run_folder"]

PROBE_BYTES = 1 << 16
"""Size of :func:`check_writable`'s probe file (64 KiB)."""


class OutputError(OSError):
    """An output file could not be written (message names the path and the cause)."""


def _explain(err: OSError, path: str) -> OutputError:
    reason = {
        errno.ENOSPC: "no space left on the device",
        errno.EACCES: "permission denied",
        errno.EROFS: "read-only file system",
        errno.EDQUOT: "disk quota exceeded",
        errno.ENOTDIR: "a part of the path is a file, not a folder",
        errno.EEXIST: "a part of the path is a file, not a folder",
    }.get(err.errno, err.strerror or str(err))
    fix = "free space or choose another output path" if err.errno in (errno.ENOSPC, errno.EDQUOT) \
        else "choose another output path"
    return OutputError(err.errno, f"cannot write {path}: {reason}; {fix}")


def claim_run_folder(parent: str, prefix: str = "version_") -> tuple[int, str]:
    """Create the next free run folder ``<parent>/<prefix><N>`` with an exclusive creation
    (:func:`os.mkdir` fails if it exists), so runs started at the same time never share one:
    ``N`` is one more than the largest existing version (``0`` for none), and the next one is
    tried while another process takes it first.

    Args:
        parent (str): folder of the runs of one name (created if needed).
        prefix (str, optional): the run folders' prefix. (default: ``"version_"``)

    Returns:
        tuple[int, str]: ``N`` and the created folder.

    Raises:
        OutputError: for file-system errors (names ``parent``).
    """
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    try:
        os.makedirs(parent, exist_ok=True)
        found = [int(m.group(1)) for name in os.listdir(parent) if (m := pattern.fullmatch(name))]
        version = max(found) + 1 if found else 0
        while True:
            folder = osp.join(parent, f"{prefix}{version}")
            try:
                os.mkdir(folder)
                return version, folder
            except FileExistsError:
                version += 1
    except OSError as err:
        raise _explain(err, parent) from None


def refuse_output_over_inputs(output: str, inputs: dict[str, str | None]) -> None:
    """Refuse an output path that is one of the inputs (the same file, also through a link).

    Args:
        output (str): the output file.
        inputs (dict[str, str or None]): option -> input path (:obj:`None`: not given).

    Raises:
        OutputError: naming the output, the input's option and the fix.
    """
    for option, path in inputs.items():
        if not isinstance(path, str) or not path:
            continue
        same = osp.realpath(output) == osp.realpath(path)
        with contextlib.suppress(OSError):
            same = same or osp.samefile(output, path)
        if same:
            raise OutputError(errno.EEXIST, f"cannot write {output}: it is the input of {option}; "
                              "choose another output path, so that the input is kept")


def _owner() -> str:
    """``<host>-<pid>`` of this process, for temporary names."""
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname().split(".")[0]) or "host"
    return f"{host}-{os.getpid()}"


_OWNED = (re.compile(r"\..+\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)-[a-z0-9_]+\.tmp"),
          re.compile(r"\.probe-(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)-[a-z0-9_]+"))
_UNOWNED = (re.compile(r"\..+\.[a-z0-9_]{8}\.tmp"), re.compile(r"\.probe-[a-z0-9_]{8}"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder: str) -> list[str]:
    """Remove the temporary files of graph-urpe's own naming in ``folder`` whose writer is gone
    (see the module docstring); files of any other name are never touched.

    Args:
        folder (str): the folder (nothing happens if it does not exist).

    Returns:
        list[str]: the removed files.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    host, now, removed = _owner().rsplit("-", 1)[0], time.time(), []
    for name in names:
        path = osp.join(folder, name)
        owned = next((m for p in _OWNED if (m := p.fullmatch(name))), None)
        try:
            age = now - os.stat(path).st_mtime
        except OSError:
            continue
        if owned is not None:
            stale = (not _alive(int(owned["pid"])) if owned["host"] == host
                     else age > 86400)
        else:
            stale = any(p.fullmatch(name) for p in _UNOWNED) and age > 3600
        if stale:
            with contextlib.suppress(OSError):
                os.remove(path)
                removed.append(path)
    return removed


def lock_run_folder(folder: str) -> object | None:
    """Hold ``folder`` for this process: an exclusive lock on ``<folder>/.lock``, released when
    the process ends (also when it is killed), so two runs never write into one folder.

    Returns:
        the open lock file (keep it), or :obj:`None` where file locks are not available.

    Raises:
        OutputError: another process holds the folder, or the lock file cannot be written.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX
        return None
    path = osp.join(folder, ".lock")
    try:
        os.makedirs(folder, exist_ok=True)
        # held for the process's life; never through a link planted as .lock
        handle = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND
                                   | getattr(os, "O_NOFOLLOW", 0), 0o666), "a+")
    except OSError as err:
        raise _explain(err, path) from None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise OutputError(errno.EBUSY, f"run folder {folder} is in use by another `graph-urpe "
                          "fit`: wait for it to finish, or choose another --version (or none, "
                          "for the next free one)") from None
    return handle


@contextlib.contextmanager
def exclusive_lock(path: str, waiting: str = "") -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created, with its folder) for the block, the
    mechanism of :func:`lock_run_folder` but waiting: while another process holds it, print
    :obj:`waiting` (if given) once to stderr and block until it is released (also when its holder
    is killed). Nothing is locked where file locks are not available.

    Raises:
        OutputError: if the lock file cannot be written.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    try:
        os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115  (closed below)
    except OSError as err:
        raise _explain(err, path) from None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if waiting:
                print(waiting, file=sys.stderr, flush=True)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def remove_unused_run_folder(folder: str) -> bool:
    """Remove a run folder that holds nothing of a run: only its ``.lock``
    (:func:`lock_run_folder`) and empty folders. A fit that failed before writing anything (a
    wrong column, a bad option found at setup) then leaves no empty ``version_N`` behind for the
    next one to skip and the user to look into. Call it while holding the lock.

    Args:
        folder (str): the run folder.

    Returns:
        bool: whether it was removed (:obj:`False` when it holds any file but the lock, or a
        file appeared meanwhile: then it is left as it is).
    """
    folders, lock = [], osp.join(folder, ".lock")
    for parent, subfolders, files in os.walk(folder, topdown=False):
        if any(osp.join(parent, name) != lock for name in files):
            return False
        folders += [osp.join(parent, name) for name in subfolders]
    try:
        if osp.isfile(lock):
            os.remove(lock)
        for path in [*folders, folder]:
            os.rmdir(path)  # refuses a folder that is not empty
    except OSError:
        return False
    return True


def check_writable(path: str) -> None:
    """Fail early if ``path`` cannot be written: its folder is created if needed and a probe file
    of :data:`PROBE_BYTES` is written to disk (fsync) and removed there, so a full disk, a
    quota, a read-only file system or a missing permission is found before any work.

    Args:
        path (str): the future output file.

    Raises:
        OutputError: if the folder cannot be created or written, or ``path`` is a folder.
    """
    if osp.isdir(path):
        raise OutputError(errno.EISDIR, f"cannot write {path}: it is a folder; give a file name")
    folder = osp.dirname(osp.abspath(path))
    remove_stale_temporaries(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".probe-{_owner()}-") as probe:
            probe.write(b"\0" * PROBE_BYTES)  # an empty file fits even on a full disk
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as err:
        raise _explain(err, path) from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temporary(path: str) -> tuple[int, str]:
    """A new, uniquely named temporary file beside ``path``: ``(descriptor, name)``."""
    folder = osp.dirname(osp.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        return tempfile.mkstemp(dir=folder, prefix=f".{osp.basename(path)}.{_owner()}-",
                                suffix=".tmp")
    except OSError as err:
        raise _explain(err, path) from None


def _publish(tmp: str, path: str) -> None:
    """Make the complete temporary file ``tmp`` the file ``path``: its data on disk (fsync), its
    mode that of a new file under the umask (``mkstemp`` makes 0600), then the atomic rename and
    an fsync of the folder so the rename survives a power loss."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every file system can fsync a folder
        folder = os.open(osp.dirname(osp.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def _failed(err: BaseException, tmp: str, path: str, saving: bool = False) -> OutputError | None:
    """Remove ``tmp``; the one-line error for ``err`` (``None``: not a write error). With
    ``saving``, a :class:`RuntimeError` is one too: :func:`torch.save` reports a failed write
    (full disk, quota) as ``RuntimeError: ... unexpected pos ...``, not as an OSError."""
    with contextlib.suppress(OSError):
        os.remove(tmp)
    if isinstance(err, OSError):
        return _explain(err, path)
    if saving and isinstance(err, RuntimeError):
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        return OutputError(errno.EIO, f"cannot write {path}: the write stopped ({first}); the "
                                      "disk may be full: free space or choose another output path")
    return None


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w") -> Iterator:
    """Open a uniquely named temporary file beside ``path``; on success it is flushed to disk
    (fsync), given the mode a new file gets under the umask, and renamed over ``path``
    atomically; on any error it is removed and ``path`` is left as it was.

    Args:
        path (str): destination file.
        mode (str, optional): ``"w"`` (text) or ``"wb"``. (default: ``"w"``)

    Raises:
        OutputError: for file-system errors (names ``path``).
    """
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
        _publish(tmp, path)
    except BaseException as err:
        explained = _failed(err, tmp, path)
        if explained is not None:
            raise explained from None
        raise


def atomic_write_csv(frame: pd.DataFrame, path: str, **kwargs) -> None:
    """Write ``frame`` as CSV to ``path`` atomically (:func:`atomic_write`); ``index=False``
    unless ``kwargs`` says otherwise.

    Raises:
        OutputError: for file-system errors (names ``path``).
    """
    kwargs.setdefault("index", False)
    with atomic_write(path, "w") as handle:
        frame.to_csv(handle, **kwargs)


def atomic_save(save: Callable[[str], None], path: str) -> None:
    """Call ``save(tmp_path)`` on a uniquely named temporary file beside ``path`` and publish it
    as :func:`atomic_write` does (fsync, umask mode, atomic rename); on any error the temporary
    file is removed and ``path`` is left as it was.

    Raises:
        OutputError: for file-system errors (names ``path``), also for the
            :class:`RuntimeError` by which :func:`torch.save` reports a failed write.
    """
    fd, tmp = _temporary(path)
    os.close(fd)
    try:
        save(tmp)
        _publish(tmp, path)
    except BaseException as err:
        explained = _failed(err, tmp, path, saving=True)
        if explained is not None:
            raise explained from None
        raise
