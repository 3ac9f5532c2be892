"""Writes that stay inside graph-urpe's own folders: no symbolic link is followed, no name from a
received file reaches outside its folder.

A run folder, a processed-data store or a prediction's parts folder may arrive from someone else
(copied, unpacked, shared). graph-urpe writes into such a folder only files it names itself, as
plain base names, and never through a symbolic link: :func:`refuse_links` refuses a folder
holding one where graph-urpe writes, :func:`open_no_follow` opens a file for writing with
``O_NOFOLLOW`` (a link planted between the check and the write still fails), and
:func:`own_name` accepts a name read from a file only when it is a plain base name.
"""

from __future__ import annotations

import errno
import os
import os.path as osp
import re
from typing import IO

from graph_urpe.files import OutputError

__all__ = ["LinkRefusedError", "open_no_follow", "own_name", "refuse_links"]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")


class LinkRefusedError(OutputError):
    """A folder graph-urpe writes into holds a symbolic link (message names it and the fix)."""


def refuse_links(folder: str, depth: int = 1, what: str = "folder") -> None:
    r"""Refuse a folder that is, or holds, a symbolic link where graph-urpe writes.

    Args:
        folder (str): the folder (nothing is checked if it does not exist).
        depth (int, optional): levels of sub-folders looked into (``0``: the folder's own
            entries only). (default: :obj:`1`)
        what (str, optional): what the folder is, for the message (e.g. ``"run folder"``).
            (default: ``"folder"``)

    Raises:
        LinkRefusedError: naming the link and where it points.
    """
    if osp.islink(folder):
        raise _refused(folder, what)
    stack = [(folder, 0)]
    while stack:
        current, level = stack.pop()
        try:
            entries = list(os.scandir(current))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_symlink():
                raise _refused(entry.path, what)
            if level < depth and entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, level + 1))


def _refused(path: str, what: str) -> LinkRefusedError:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return LinkRefusedError(errno.ELOOP, f"{path} in the {what} is a symbolic link (to {target}); "
                            "graph-urpe writes only files it created there and never through a "
                            "link: remove the link or use a fresh folder")


def open_no_follow(path: str, mode: str = "ab") -> IO:
    r"""Open ``path`` for writing (binary ``"wb"``, ``"ab"`` or ``"r+b"``) without following a
    symbolic link at its last component (``O_NOFOLLOW``).

    Args:
        path (str): the file.
        mode (str, optional): ``"wb"`` (create or truncate), ``"ab"`` (create or append) or
            ``"r+b"`` (an existing file, read and write). (default: ``"ab"``)

    Raises:
        LinkRefusedError: ``path`` is a symbolic link.
        ValueError: another mode.
        OSError: as :func:`os.open`.
    """
    flags = {"wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
             "r+b": os.O_RDWR}.get(mode)
    if flags is None:
        raise ValueError(f"mode must be 'wb', 'ab' or 'r+b', got {mode!r}")
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                     0o666)
    except OSError as err:
        if err.errno == errno.ELOOP or osp.islink(path):
            raise _refused(path, "folder") from None
        raise
    return os.fdopen(fd, mode)


def own_name(name: object) -> str | None:
    r"""``name`` when it is a plain base name graph-urpe could have written (letters, digits,
    ``_ . + -``; no separator, no ``..``, not absolute, at most 200 characters), else
    :obj:`None`: a name read from a received file is never joined to a folder otherwise.

    Args:
        name: the name read from a file (any type).
    """
    if isinstance(name, str) and _PLAIN.fullmatch(name) and ".." not in name:
        return name
    return None
