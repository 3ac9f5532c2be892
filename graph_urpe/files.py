"""Files the user reads back: written atomically, with the output folder checked first.

A file is written under a unique temporary name in its destination folder, flushed to disk
(fsync), given the mode a new file gets under the user's umask and renamed over the target
(:func:`os.replace`, atomic on POSIX and Windows), so a full disk, a killed process or two
writers at once leave either the previous file or one complete new one, never a truncated or
mixed one, and no temporary file. Errors of the file system (no space, no permission) are raised
as :class:`OutputError` with one line that names the path. Run folders are claimed by exclusive
creation (:func:`claim_run_folder`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import os.path as osp
import re
import tempfile
from collections.abc import Callable, Iterator

import pandas as pd

__all__ = ["OutputError", "atomic_save", "atomic_write", "atomic_write_csv", "check_writable",
           "claim_run_folder"]

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
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-") as probe:
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
        return tempfile.mkstemp(dir=folder, prefix=f".{osp.basename(path)}.", suffix=".tmp")
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
