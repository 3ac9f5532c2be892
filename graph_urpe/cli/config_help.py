"""Help that agrees with the run: ``--help`` and ``--data.help CLASS`` after ``--config``.

jsonargparse shows as defaults the package's base file (``default.yaml``) only: ``graph-urpe fit
--config csv/template --help`` showed the base's data module (``ZincLikeDataModule``), and ``fit
--config csv/template --data.help CSVDataModule`` the class's own ``split: random`` where the
template trains with ``scaffold``. Models and data modules are chosen by class path (subclass
mode), so a class's options are listed only by ``--data.help CLASS`` / ``--model.help CLASS``.
Here:

* :func:`help_config_files`: the ``--config`` files given before ``--help``, read as more base
  files (jsonargparse's ``default_config_files``), so the defaults shown are those the run uses;
* :func:`help_epilog`: the end of that help, naming the configuration's data and model classes
  and the exact commands that list their options;
* :func:`configured_values_note`: for ``--data.help CLASS`` after ``--config``, the values the
  configuration gives the class's options where they differ from the class's defaults (printed
  above jsonargparse's help of the class, whose defaults are the class's).
"""

from __future__ import annotations

import importlib
import os.path as osp
import shlex
import textwrap
from collections.abc import Callable
from typing import Any

import yaml

from graph_urpe.cli.argv import option_values

__all__ = ["class_help_option", "configured_values_note", "help_config_files", "help_epilog"]

_HELP = ("-h", "--help")


def _config_values(argv: list[str]) -> list[tuple[int, str]]:
    """``(position, value)`` of every ``--config`` value of ``argv``."""
    return [(found.position, found.value) for found in option_values(argv, "--config")]


def help_config_files(argv: list[str]) -> list[str]:
    """The ``--config`` files (resolved paths, inline configurations left out) given before a
    plain ``-h`` / ``--help`` of ``argv``; empty when no help is asked for.

    Args:
        argv (list[str]): the subcommand's arguments, ``--config`` values resolved
            (:func:`graph_urpe.cli.configs.resolve_config_args`).
    """
    at = next((i for i, a in enumerate(argv) if a in _HELP), None)
    if at is None:
        return []
    return [value for i, value in _config_values(argv) if i < at and osp.isfile(value)]


def _section(files: list[str], key: str) -> dict | None:
    """The last ``key`` section (``"data"``, ``"model"``) with a ``class_path`` among ``files``
    (YAML; a ``--config`` is trusted like a script)."""
    found = None
    for path in files:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
        part = config.get(key) if isinstance(config, dict) else None
        if isinstance(part, dict) and part.get("class_path"):
            found = part
    return found


def help_epilog(files: list[str], user_args: list[str], width: int = 78) -> str:
    """The end of ``SUBCOMMAND --config ... --help`` (plain text, wrapped at ``width``, each
    command on a line of its own): which files the defaults shown come from and, for the data and
    model classes those files choose, the command that lists their options.

    Args:
        files (list[str]): the base file, then :func:`help_config_files`.
        user_args (list[str]): the command line as the user typed it (subcommand first).
        width (int, optional): columns. (default: :obj:`78`)
    """
    shown = " ".join(v for _, v in _config_values(user_args)) or " ".join(files[1:])
    base = [a for a in user_args if a not in _HELP]
    lines = [textwrap.fill(
        f"Defaults shown are those the run uses: the package's base configuration, then "
        f"--config {shown}; options on the command line override them.", width)]
    for key in ("data", "model"):
        part = _section(files, key)
        if part is not None:
            name = part["class_path"].split(".")[-1]
            lines.append(textwrap.fill(f"The {key} options of this configuration "
                                       f"({part['class_path']}) and its values for them:", width))
            lines.append("  " + shlex.join(["graph-urpe", *base, f"--{key}.help", name]))
    return "\n".join(lines)


def class_help_option(argv: list[str]) -> tuple[str, str] | None:
    """``(key, CLASS)`` of a ``--KEY.help CLASS`` (or ``--KEY.help=CLASS``) in ``argv``, e.g.
    ``("data", "CSVDataModule")``; :obj:`None` if there is none."""
    for i, arg in enumerate(argv):
        name, _, value = arg.partition("=")
        if name.startswith("--") and name.endswith(".help") and len(name) > 7:
            if not value and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                value = argv[i + 1]
            if value:
                return name[2:-5], value
    return None


def _signature_defaults(class_path: str) -> dict[str, Any]:
    """The defaults of the options of ``class_path`` as its ``--KEY.help`` lists them
    (jsonargparse's reading of its signature, ``**kwargs`` followed to where they go); empty
    when it cannot be read."""
    from jsonargparse import ArgumentParser

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        parser = ArgumentParser(exit_on_error=False)
        parser.add_class_arguments(cls, "cls", fail_untyped=False)
        found = parser.get_defaults().get("cls")
    except Exception:  # noqa: BLE001  (a note above the help: never a reason to fail it)
        return {}
    return found.as_dict() if found is not None else {}


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip() \
        .removesuffix("\n...").removesuffix(" ...")


def _differences(class_path: str, init_args: dict) -> list[str]:
    """``"name: value"`` for every argument of ``init_args`` that differs from the default of
    ``class_path``; a nested class (``{"class_path", "init_args"}``) as ``name: Class(...)``
    with its own differences."""
    defaults = _signature_defaults(class_path)
    out = []
    for key, value in init_args.items():
        if isinstance(value, dict) and value.get("class_path"):
            inner = _differences(value["class_path"], value.get("init_args") or {})
            out.append(f"{key}: {value['class_path'].split('.')[-1]}({', '.join(inner)})")
        elif key not in defaults or _plain(defaults[key]) != _plain(value):
            out.append(f"{key}: {_yaml(value)}")
    return out


def configured_values_note(argv: list[str], user_args: list[str],
                           print_config: Callable[[list[str]], str]) -> str | None:
    """For ``--KEY.help CLASS`` after ``--config``: one paragraph naming the values that the
    configuration gives the options of ``CLASS`` where they differ from its defaults (which the
    class help lists), e.g. ``split: scaffold`` for ``--config csv/template --data.help
    CSVDataModule``; :obj:`None` when there is no ``--config``, no class help or the
    configuration uses another class there.

    Args:
        argv (list[str]): the arguments (subcommand first, ``--config`` values resolved).
        user_args (list[str]): as the user typed them (for the message).
        print_config (callable): gives the resolved configuration (YAML text) of the arguments
            it is passed (``SUBCOMMAND ... --print_config``).
    """
    asked = class_help_option(argv)
    configs = _config_values(argv)
    if asked is None or not configs:
        return None
    key, name = asked
    args = [argv[0]]
    for i, value in configs:
        args += ["--config", value]
    config = yaml.safe_load(print_config([*args, "--print_config"])) or {}
    part: Any = config
    for step in key.split("."):
        part = part.get(step) if isinstance(part, dict) else None
    if not isinstance(part, dict) or not part.get("class_path"):
        return None
    class_path = part["class_path"]
    if class_path.split(".")[-1] != name.split(".")[-1]:
        return None
    changed = _differences(class_path, part.get("init_args") or {})
    shown = " ".join(v for _, v in _config_values(user_args))
    if not changed:
        return f"--config {shown} uses {class_path} with its defaults, as listed below."
    values = "; ".join(changed)
    return (f"--config {shown} sets these options of {class_path}, which replace the defaults "
            f"listed below: {values}. (The whole configuration: graph-urpe {argv[0]} --config "
            f"{shown} --print_config)")


def _plain(value: Any) -> Any:
    """``value`` as YAML reads it back (tuples as lists), to compare a default with a value."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
