"""Files the user reads back: written atomically, with the output folder checked first.

A file is written under a temporary name in its destination folder and renamed over the target
(:func:`os.replace`, atomic on POSIX and Windows), so a full disk or a killed process leaves
either the previous file or the complete new one, never a truncated one. Errors of the file
system (no space, no permission) are raised as :class:`OutputError` with one line that names the
path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import os.path as osp
import tempfile
from collections.abc import Callable, Iterator

import pandas as pd

__all__ = ["OutputError", "atomic_write", "atomic_write_csv", "check_writable"]


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


def check_writable(path: str) -> None:
    """Fail early if ``path`` cannot be written: its folder is created if needed and a probe file
    is written and removed there.

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
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as err:
        raise _explain(err, path) from None


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w") -> Iterator:
    """Open a temporary file beside ``path``; on success it replaces ``path`` atomically, on any
    error it is removed and ``path`` is left as it was.

    Args:
        path (str): destination file.
        mode (str, optional): ``"w"`` (text) or ``"wb"``. (default: ``"w"``)

    Raises:
        OutputError: for file-system errors (names ``path``).
    """
    folder = osp.dirname(osp.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{osp.basename(path)}.", suffix=".tmp")
    except OSError as err:
        raise _explain(err, path) from None
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise _explain(err, path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
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
    """Call ``save(tmp_path)`` and rename the result over ``path`` atomically.

    Raises:
        OutputError: for file-system errors (names ``path``).
    """
    folder = osp.dirname(osp.abspath(path))
    tmp = osp.join(folder, f".{osp.basename(path)}.tmp")
    try:
        os.makedirs(folder, exist_ok=True)
        save(tmp)
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise _explain(err, path) from None
