"""``python -m graph_urpe.cli.ship_help``: write the help texts shipped with the package
(``graph_urpe/cli/help/``, read by :mod:`graph_urpe.cli.help_cache`). Run it after changing any
``.py`` / ``.yaml`` file of the package (``tests/test_cli_help_cache.py`` fails until it is run),
and commit the files.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import os.path as osp

from graph_urpe.cli import help_cache, main

__all__ = ["write_shipped"]


def write_shipped(folder: str = help_cache.SHIPPED_FOLDER) -> None:
    """Write the shipped help texts: what ``graph-urpe SUBCOMMAND --help`` prints with the help
    cache off, for each subcommand, and ``manifest.json``
    (:func:`~graph_urpe.cli.help_cache.shipped_environment`). Run it in a fresh process (as
    ``python -m graph_urpe.cli.ship_help`` does): the help lists the subclasses imported so far.

    Args:
        folder (str, optional): where.
            (default: :data:`~graph_urpe.cli.help_cache.SHIPPED_FOLDER`)

    Raises:
        RuntimeError: a help command failed (nothing is written).
    """
    texts = {}
    previous = os.environ.get("GRAPH_URPE_HELP_CACHE")
    os.environ["GRAPH_URPE_HELP_CACHE"] = "0"  # built live, neither read nor kept
    try:
        for sub in help_cache.SHIPPED_SUBCOMMANDS:
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    main([sub, "--help"])
            except SystemExit as done:
                if done.code not in (0, None):
                    raise RuntimeError(f"graph-urpe {sub} --help exited with {done.code}") from None
            texts[sub] = out.getvalue()
    finally:
        if previous is None:
            del os.environ["GRAPH_URPE_HELP_CACHE"]
        else:
            os.environ["GRAPH_URPE_HELP_CACHE"] = previous
    os.makedirs(folder, exist_ok=True)
    for sub, text in texts.items():
        with open(osp.join(folder, f"{sub}.txt"), "w", encoding="utf-8") as handle:
            handle.write(text)
    with open(osp.join(folder, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(help_cache.shipped_environment(), handle, indent=1, sort_keys=True)
        handle.write("\n")


def _main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m graph_urpe.cli.ship_help",
                            description=__doc__.splitlines()[0]).parse_args(argv)
    write_shipped()
    print(f"wrote the {', '.join(help_cache.SHIPPED_SUBCOMMANDS)} help and manifest.json to "
          f"{help_cache.SHIPPED_FOLDER}")


if __name__ == "__main__":
    _main()
