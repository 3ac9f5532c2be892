"""The argument parser of the LightningCLI subcommands, with a help text that depends only on the
installed code: the same on every terminal and from every install location, so the package can
ship it (:mod:`graph_urpe.cli.help_cache`) and ``graph-urpe fit --help`` prints it without
importing torch or Lightning.

Three things make argparse's help depend on where it runs, and all are fixed here:

* the program's name: ``graph-urpe``, also under ``python -m graph_urpe.cli``;
* the width: argparse wraps at the terminal's width; here always :data:`HELP_WIDTH` columns
  (what argparse gives an 80-column terminal, or output to a pipe or a file);
* jsonargparse's "default config file locations" section, which prints the absolute path of the
  package's ``default.yaml``; here a sentence naming it relative to the package instead.
"""

from __future__ import annotations

from typing import Any

from jsonargparse import DefaultHelpFormatter
from lightning.pytorch.cli import LightningArgumentParser

__all__ = ["BASE_CONFIG_NOTE", "HELP_WIDTH", "GraphURPEArgumentParser", "HelpFormatter"]

HELP_WIDTH = 78
"""Columns of the help text (argparse's width for an 80-column terminal: 80 - 2)."""

BASE_CONFIG_NOTE = ("Defaults shown include the package's base configuration "
                    "(graph_urpe/configs/default.yaml); --config files and options override it.")
"""Said in place of jsonargparse's list of default config files (absolute paths)."""


class HelpFormatter(DefaultHelpFormatter):
    """jsonargparse's help formatter at :data:`HELP_WIDTH` columns, whatever the terminal."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         HELP_WIDTH if width is None else width)


class GraphURPEArgumentParser(LightningArgumentParser):
    """:class:`~lightning.pytorch.cli.LightningArgumentParser` whose help is the same wherever
    it runs (see the module docstring); parsing is unchanged."""

    def __init__(self, *args: Any, help_epilog: str | None = None, **kwargs: Any) -> None:
        """LightningArgumentParser's arguments, plus ``help_epilog``: the help's last lines,
        printed as written (default: :data:`BASE_CONFIG_NOTE`, wrapped)."""
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("prog", "graph-urpe")  # not sys.argv[0] (`python -m` gives __main__.py)
        super().__init__(*args, **kwargs)
        # jsonargparse's section lists default_config_files (absolute paths); kept out of the help
        # (a private attribute, fenced in tests/test_private_apis.py) and said in the epilog.
        group = getattr(self, "_default_config_files_group", None)
        if group is not None:
            self._action_groups.remove(group)
            self.epilog = None if help_epilog else BASE_CONFIG_NOTE
        self._help_tail = help_epilog

    def format_help(self, *args: Any, **kwargs: Any) -> str:
        """jsonargparse's help, then ``help_epilog`` as it is written (its commands unwrapped)."""
        text = super().format_help(*args, **kwargs)
        return text if not self._help_tail else f"{text.rstrip()}\n\n{self._help_tail}\n"
