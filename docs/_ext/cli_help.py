"""Sphinx directive ``graph-urpe-help``: the ``--help`` text of a ``graph-urpe`` subcommand, taken
from its parser at build time (the CLI reference, ``docs/cli.md``).

``.. graph-urpe-help:: fit`` runs ``graph-urpe fit --help`` in the build's process, as a user's
shell would (the LightningCLI subcommands answer from the help shipped in
``graph_urpe/cli/help/``, checked against the sources; the others from their argparse parser), and
inserts the text as a literal block; without an argument, ``graph-urpe --help``. A subcommand
whose help cannot be produced fails the build.
"""

from __future__ import annotations

import contextlib
import io
import os

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.errors import ExtensionError

WIDTH = "100"
"""Terminal width the help is formatted for (the project's line length)."""


def subcommand_help(args: list[str]) -> str:
    """The text ``graph-urpe ARGS --help`` prints.

    Args:
        args (list[str]): the subcommand, or nothing for the top-level help.

    Raises:
        sphinx.errors.ExtensionError: when the command exits with a non-zero status.
    """
    from graph_urpe.cli import main

    out = io.StringIO()
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        with contextlib.redirect_stdout(out):
            try:
                main([*args, "--help"])
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise ExtensionError(
                        f"graph-urpe {' '.join(args)} --help exited with {exc.code}") from exc
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return out.getvalue().rstrip() + "\n"


class GraphUrpeHelp(Directive):
    """``.. graph-urpe-help:: [SUBCOMMAND]``: the subcommand's ``--help`` as a literal block."""

    optional_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        text = subcommand_help(list(self.arguments))
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def setup(app) -> dict:
    """Registers the directive (Sphinx's extension entry point)."""
    app.add_directive("graph-urpe-help", GraphUrpeHelp)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
