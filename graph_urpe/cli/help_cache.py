"""The text of ``graph-urpe fit --help`` (and ``validate`` / ``test`` / ``predict``), kept after the
first call so later calls print it without importing torch or Lightning.

Why: LightningCLI builds its help from the classes it configures, so it must import
``lightning.pytorch``, which imports ``torch._dynamo``, ``torchmetrics`` (and through them SymPy,
SciPy and Matplotlib): 8-10 CPU seconds on a 2-core machine before the first line of help, of
which the package's own modules are under 2 (``python -X importtime``; ``benchmarks/README.md``
section 16). The help text is a pure function of the command line, the installed code and the
terminal width, so it is stored under a key of all three and printed from there next time
(0.1 CPU s). The first call still builds it with LightningCLI.

The key (SHA-256) covers: the arguments; the size, modification time and path of every argument
that names an existing file (``--config my.yaml``, ``--ckpt_path X``: their contents change the
defaults shown); the package's version and the content of its ``.py`` and ``.yaml`` files; the
versions of Python and of the libraries whose classes or formatting the help shows; the terminal
width and the ``JSONARGPARSE_*`` / ``COLUMNS`` environment. Only a plain ``-h`` / ``--help`` is
kept (``--model.help CLASS`` may name a class of another package, whose changes the key would
not see).

Where: ``$GRAPH_URPE_CACHE_DIR/help/`` if set, else ``$XDG_CACHE_HOME/graph-urpe/help/`` or
``~/.cache/graph-urpe/help/``. A folder that cannot be written leaves the help uncached (printed
as usual); ``GRAPH_URPE_HELP_CACHE=0`` turns the cache off. Files are plain text, written
atomically (a temporary name renamed over the target).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import os.path as osp
import shutil
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata

__all__ = ["cache_folder", "capture_help", "help_key", "help_requested", "read_help"]

_PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))

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


def _package_digest(digest: hashlib._Hash) -> None:
    for folder, dirs, names in os.walk(_PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".yaml")):
                path = osp.join(folder, name)
                digest.update(osp.relpath(path, _PACKAGE_DIR).encode())
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())


def help_key(argv: list[str]) -> str:
    """The cache key of ``argv``'s help text (hex SHA-256; see the module docstring)."""
    digest = hashlib.sha256()
    for arg in argv:
        digest.update(b"\0arg" + arg.encode("utf-8", "surrogateescape"))
        if osp.isfile(arg):
            stat = os.stat(arg)
            digest.update(f"\0file{osp.abspath(arg)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    _package_digest(digest)
    for name in _LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"\0{name}={version}".encode())
    digest.update(f"\0python={sys.version}\0{sys.executable}".encode())
    digest.update(f"\0columns={shutil.get_terminal_size().columns}".encode())
    for name in sorted(os.environ):
        if name.startswith("JSONARGPARSE") or name == "COLUMNS":
            digest.update(f"\0{name}={os.environ[name]}".encode())
    return digest.hexdigest()


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
