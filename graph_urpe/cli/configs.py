"""The experiment files, named by ``--config`` without a path.

One set of files: the repository's top-level ``configs/``. The package reads them as
``graph_urpe/configs/``, a symbolic link to ``../configs`` in a clone (and in an editable install);
building a wheel copies the files behind the link into the package, so an installed package holds
the same files under the same names.

``--config csv/template``, ``--config csv/template.yaml`` and ``--config configs/csv/template.yaml``
(the path in a clone of the repository) all name ``configs/csv/template.yaml`` when no
local file of that name exists; a local file always wins, so a copy edited in the current folder
is read instead. ``default.yaml`` there is the base that every run reads first.
"""

from __future__ import annotations

import os.path as osp
from importlib.resources import files
from pathlib import Path

from graph_urpe.cli.argv import option_values
from graph_urpe.cli.messages import CLIError

__all__ = ["CONFIG_DIR", "DEFAULT_CONFIG", "list_configs", "resolve_config", "resolve_config_args"]

CONFIG_DIR = Path(str(files("graph_urpe") / "configs"))
"""The folder of the shipped experiment files (package data)."""

DEFAULT_CONFIG = str(CONFIG_DIR / "default.yaml")
"""The base configuration, read before any ``--config``."""


def shipped_configs() -> list[str]:
    """The names of the shipped experiment files (``"csv/template"``, ...), sorted, without the
    base ``default``."""
    names = (p.relative_to(CONFIG_DIR).with_suffix("").as_posix()
             for p in CONFIG_DIR.rglob("*.yaml"))
    return sorted(n for n in names if n != "default")


def list_configs() -> str:
    """One line per shipped experiment file: its name and the first line of its comment."""
    lines = [f"Experiment files shipped with graph-urpe ({CONFIG_DIR}); name one with --config NAME:"]
    for name in shipped_configs():
        with open(CONFIG_DIR / f"{name}.yaml", encoding="utf-8") as handle:
            first = handle.readline().lstrip("# ").strip()
        lines.append(f"  {name:32s} {first[:80]}{'...' if len(first) > 80 else ''}")
    return "\n".join(lines)


def resolve_config(value: str) -> str:
    """The file a ``--config`` value names.

    Args:
        value (str): a path, a shipped name (``csv/template``, optionally with ``.yaml`` or the
            clone's ``configs/`` prefix), or a configuration given inline (YAML / JSON text).

    Returns:
        str: ``value`` itself when it is an existing file or inline configuration, else the path
        of the shipped file.

    Raises:
        CLIError: if ``value`` is neither an existing file nor a shipped name.
    """
    if osp.exists(value) or any(c in value for c in ":{}[]\n"):
        return value
    name = value.removeprefix("configs/").removesuffix(".yaml")
    shipped = CONFIG_DIR / f"{name}.yaml"
    if not osp.isabs(value) and shipped.is_file():
        return str(shipped)
    close = [n for n in shipped_configs() if n.split("/")[-1] == name.split("/")[-1]]
    hint = f" (did you mean --config {close[0]}?)" if close else ""
    raise CLIError(
        f"--config {value}: no such file and no shipped experiment of that name{hint}; "
        "`graph-urpe fit --config list` lists the shipped ones."
    )


def resolve_config_args(argv: list[str]) -> list[str]:
    """``argv`` with every ``--config VALUE`` / ``--config=VALUE`` resolved by
    :func:`resolve_config`.

    Raises:
        CLIError: for a ``--config`` that names nothing.
    """
    out = list(argv)
    for i, value, inline in option_values(out, "--config"):
        if inline:
            out[i] = "--config=" + resolve_config(value)
        else:
            out[i + 1] = resolve_config(value)
    return out
