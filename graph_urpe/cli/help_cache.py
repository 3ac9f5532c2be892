"""The text of ``graph-urpe fit --help`` (and ``validate`` / ``test`` / ``predict``): shipped with
the package for the plain ``graph-urpe SUBCOMMAND --help``, and kept after the first call for any
other help command line, so neither imports torch or Lightning.

Why: LightningCLI builds its help from the classes it configures, so it must import
``lightning.pytorch``, which imports ``torch._dynamo``, ``torchmetrics`` (and through them SymPy,
SciPy and Matplotlib): 7-15 CPU seconds on a 2-core machine before the first line of help, of
which the package's own modules are under 2 (``python -X importtime``; ``benchmarks/README.md``
section 16). The help text is a pure function of the command line and the installed code
(:mod:`graph_urpe.cli.parser` makes it independent of the terminal and the install location).

**Shipped** (``graph_urpe/cli/help/``: one plain-text file per subcommand and ``manifest.json``):
``graph-urpe SUBCOMMAND --help`` (``-h``; nothing else on the line) prints the shipped text when
the manifest matches this install: the digest of the package's ``.py`` and ``.yaml`` files, the
Python minor version and the versions of the libraries whose classes the help shows
(:data:`_LIBRARIES`), and no ``JSONARGPARSE_*`` variable set. Otherwise the help is built live (and
kept, below). The files are data (read as text and printed), written by
``python -m graph_urpe.cli.ship_help`` (the live help of each subcommand, about 15 CPU s in all);
``tests/test_cli_help_cache.py`` checks that they equal what ``graph-urpe SUBCOMMAND --help``
prints live and that the manifest matches the sources (run the command after changing any
``.py`` / ``.yaml`` file of the package, and commit ``graph_urpe/cli/help/``).

**Kept** (the first call of any other plain help line, e.g. ``fit --config my.yaml --help``):
stored under a key (SHA-256) of the arguments; the size, modification time and path of every
argument that names an existing file (``--config my.yaml``, ``--ckpt_path X``: their contents
change the defaults shown); the package's digest and the library versions as above, the full
Python version and executable; and the ``JSONARGPARSE_*`` environment. Only a plain ``-h`` /
``--help`` is kept (``--model.help CLASS`` may name a class of another package, whose changes the
key would not see).

Where: ``$GRAPH_URPE_CACHE_DIR/help/`` if set, else ``$XDG_CACHE_HOME/graph-urpe/help/`` or
``~/.cache/graph-urpe/help/``. A folder that cannot be written leaves the help uncached (printed
as usual); ``GRAPH_URPE_HELP_CACHE=0`` turns both the shipped and the kept help off. Files are
plain text, written atomically (a temporary name renamed over the target).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import os.path as osp
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata

__all__ = ["SHIPPED_FOLDER", "SHIPPED_SUBCOMMANDS", "cache_folder", "capture_help", "help_key",
           "help_requested", "package_digest", "read_help", "shipped_environment", "shipped_help"]

_PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))

SHIPPED_FOLDER = osp.join(osp.dirname(osp.abspath(__file__)), "help")
"""The shipped help texts (``<subcommand>.txt``) and their ``manifest.json``."""

SHIPPED_SUBCOMMANDS = ("fit", "validate", "test", "predict")
"""The subcommands whose help is shipped (LightningCLI's)."""

_LIBRARIES = ("lightning", "jsonargparse", "torch", "torch-geometric", "torchmetrics",
              "docstring-parser", "typeshed-client", "ogb", "rdkit")
"""Distributions whose code shapes the help text (classes, signatures, docstrings, formatting)."""


def help_requested(argv: list[str]) -> bool:
    """Whether ``argv`` asks a LightningCLI subcommand for its plain help (``-h`` / ``--help``;
    not ``--model.help CLASS``), the only help that is cached.

    Args:
        argv (list[str]): the arguments after ``graph-urpe`` (subcommand first).
    """
    if os.environ.get("GRAPH_URPE_HELP_CACHE", "1") == "0":
        return False
    if not any(a in ("-h", "--help") for a in argv[1:]):
        return False
    return not any(a.endswith(".help") or ".help=" in a or a == "--print_config"
                   or a.startswith("--print_config=") for a in argv)


def cache_folder() -> str:
    """The folder that holds the help texts (see the module docstring for the order)."""
    root = os.environ.get("GRAPH_URPE_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or osp.join(osp.expanduser("~"), ".cache")
        root = osp.join(base, "graph-urpe")
    return osp.join(root, "help")


@functools.cache
def package_digest() -> str:
    """Hex SHA-256 over the package's ``.py`` and ``.yaml`` files (relative paths and contents)."""
    digest = hashlib.sha256()
    for folder, dirs, names in os.walk(_PACKAGE_DIR, followlinks=True):  # configs: a link
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".yaml")):
                path = osp.join(folder, name)
                digest.update(osp.relpath(path, _PACKAGE_DIR).replace(os.sep, "/").encode())
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def _library_versions() -> dict[str, str]:
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "-"
    return versions


def _jsonargparse_environment() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("JSONARGPARSE")}


def help_key(argv: list[str]) -> str:
    """The cache key of ``argv``'s help text (hex SHA-256; see the module docstring)."""
    digest = hashlib.sha256()
    for arg in argv:
        digest.update(b"\0arg" + arg.encode("utf-8", "surrogateescape"))
        if osp.isfile(arg):
            stat = os.stat(arg)
            digest.update(f"\0file{osp.abspath(arg)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    digest.update(f"\0package={package_digest()}".encode())
    for name, version in _library_versions().items():
        digest.update(f"\0{name}={version}".encode())
    digest.update(f"\0python={sys.version}\0{sys.executable}".encode())
    for name, value in _jsonargparse_environment().items():
        digest.update(f"\0{name}={value}".encode())
    return digest.hexdigest()


def shipped_environment() -> dict:
    """What the shipped help texts must have been written under to be printed here: the
    package's digest (:func:`package_digest`), the Python minor version and the library
    versions (the content of ``manifest.json``)."""
    return {"package": package_digest(), "python": "{}.{}".format(*sys.version_info[:2]),
            "libraries": _library_versions()}


def shipped_help(argv: list[str], folder: str = SHIPPED_FOLDER) -> str | None:
    """The shipped help text of ``argv`` = ``[SUBCOMMAND, "--help"]`` (or ``"-h"``), or
    :obj:`None` when there is none for it or it does not match this install (see the module
    docstring).

    Args:
        argv (list[str]): the arguments after ``graph-urpe``.
        folder (str, optional): the shipped files. (default: :data:`SHIPPED_FOLDER`)
    """
    if (len(argv) != 2 or argv[0] not in SHIPPED_SUBCOMMANDS or argv[1] not in ("-h", "--help")
            or _jsonargparse_environment()):
        return None
    try:
        with open(osp.join(folder, "manifest.json"), encoding="utf-8") as handle:
            manifest = json.load(handle)
        if manifest != shipped_environment():
            return None
        with open(osp.join(folder, f"{argv[0]}.txt"), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, ValueError):  # none shipped, or unreadable: built live
        return None


def read_help(key: str) -> str | None:
    """The stored help text of ``key``, or :obj:`None` when there is none (or it is unreadable)."""
    try:
        with open(osp.join(cache_folder(), f"{key}.txt"), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _store(key: str, text: str) -> None:
    folder = cache_folder()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".help-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, osp.join(folder, f"{key}.txt"))
    except OSError:  # a read-only home or a full disk: the help was printed, only not kept
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


class _Tee(io.TextIOBase):
    """Writes to ``stream`` and keeps a copy."""

    def __init__(self, stream) -> None:
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self):
        return getattr(self.stream, "encoding", "utf-8")


@contextlib.contextmanager
def capture_help(key: str) -> Iterator[None]:
    """Pass the block's standard output through and store it as ``key``'s help text when the
    block ends with a successful exit (argparse exits with status 0 after printing help).

    Args:
        key (str): from :func:`help_key`.
    """
    tee = _Tee(sys.stdout)
    try:
        with contextlib.redirect_stdout(tee):
            yield
    except SystemExit as done:
        if done.code in (0, None) and tee.copy.getvalue():
            _store(key, tee.copy.getvalue())
        raise

