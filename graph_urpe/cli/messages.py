"""One-line messages of ``graph-urpe``: user errors without a traceback, third-party chatter
silenced. Imports nothing heavy (``graph-urpe --help`` uses it)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import os.path as osp
import re
import sys
import warnings
from collections.abc import Iterator

__all__ = ["CLIError", "format_warning", "quiet_third_party", "regrouped_hint", "report_errors",
           "short"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CLIError(Exception):
    """An error in the user's input, printed as one line (no traceback) by ``graph-urpe``."""


def _user_errors() -> tuple[type[BaseException], ...]:
    """The exception types that are the user's to fix (printed as one line). Imported when an
    error is being reported, so that start-up loads none of their modules."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from graph_urpe.data.cache import CorruptCacheError, UnsafeCacheError
    from graph_urpe.data.zinc import ZincDownloadError
    from graph_urpe.files import OutputError

    return (CLIError, FileNotFoundError, FileExistsError, ValueError, OutputError,
            ZincDownloadError, UnsafeCacheError, CorruptCacheError, MisconfigurationException)


@contextlib.contextmanager
def report_errors(argv: list[str]) -> Iterator[None]:
    """Turn a user error raised inside the block into one line on stderr and exit status 2.

    ``GRAPH_URPE_DEBUG=1`` re-raises instead (the whole traceback).

    Args:
        argv (list[str]): the command's arguments (the subcommand names the ``--help`` hint).

    Raises:
        SystemExit: status 2 after a user error.
    """
    debug = bool(os.environ.get("GRAPH_URPE_DEBUG"))
    try:
        yield
    except argparse.ArgumentError as err:
        if debug:
            raise
        hint = ""
        moved = [name for name in RETIRED_PREDICT_OPTIONS if name in str(err)]
        if moved:
            hint += ("\npredict's inputs and output are its own options now: "
                     + ", ".join(f"--data.init_args.{n} -> {RETIRED_PREDICT_OPTIONS[n]}"
                                 for n in moved))
        hint += regrouped_hint(str(err))
        print(f"graph-urpe: error: {short(str(err))}{hint}\n(`graph-urpe {argv[0] if argv else ''} "
              "--help` lists the options; GRAPH_URPE_DEBUG=1 shows the whole message)",
              file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as err:
        if debug or not isinstance(err, _user_errors()):
            raise
        print(f"graph-urpe: error: {short(str(err))}\n(set GRAPH_URPE_DEBUG=1 for the traceback)",
              file=sys.stderr)
        raise SystemExit(2) from None


RETIRED_PREDICT_OPTIONS = {"predict_csv": "--csv", "predict_smiles": "--smiles",
                           "predict_output": "--output", "predict_chunk_rows": "--chunk_rows"}
"""Data-module options of earlier versions that became ``predict``'s own (named in the error)."""


def regrouped_hint(message: str) -> str:
    """A line naming the new place of a model option that earlier versions took flat (``Option
    'loss' is not accepted`` -> ``--model.init_args.objective.loss``; a field of the record,
    which the data module states, is to be deleted), or ``""``."""
    from graph_urpe.models.record import GROUPED_ARGUMENTS

    named = re.findall(r"Option '(\w+)' is not accepted", message)
    moves = [f"{name}: delete it (the data module states it)" if group == "record"
             else f"{name} -> {group}.{name}" for name in named
             for group, fields in GROUPED_ARGUMENTS.items() if name in fields]
    if not moves:
        return ""
    return ("\nthe model's options are grouped since issue 40 (--model.init_args.objective.*, "
            ".finetune.*; record.* comes from the data): " + ", ".join(moves)
            + " (docs/guide/command-line.md)")


def short(message: str, max_lines: int = 2) -> str:
    """The reason of a jsonargparse / Lightning error in one line: the innermost errors, without
    the union bookkeeping ("Does not validate against any of the Union subtypes", "Subtypes:",
    "Expected a <class 'NoneType'>") and without the dumps of the configuration ("Given value",
    ``Namespace(...)``); at most ``max_lines`` reasons, joined by " | "."""
    noise = ("Given value", "Subtypes:", "Errors:", "Expected a <class 'NoneType'>")
    lines: list[str] = []
    key = None
    for raw in message.splitlines():
        line = raw.strip().removeprefix("- ").strip()
        line = line.replace("Does not validate against any of the Union subtypes", "").strip()
        if match := re.fullmatch(r'Parser key "([^"]*)":\s*(.*)', line):
            key, line = match.group(1), match.group(2)
        if not line or line.startswith(noise) or "Namespace(" in line:
            continue
        if key and key not in line:  # the reason first, then the option it is about
            line = f"{line} (option {key})"
        if line not in lines:
            lines.append(line)
    return " | ".join(lines[-max_lines:]) if lines else message.strip().splitlines()[0]


class _DropTips(logging.Filter):
    """Drops Lightning's advertising tips (nothing a user can act on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith("💡 Tip")


def format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                   line: str | None = None) -> str:
    """:func:`warnings.formatwarning` for the command: a warning of graph-urpe's own (raised in
    its code, or of a class it defines) is one line, ``graph-urpe: warning: <message>``, without
    the source path and code line Python adds (they mean nothing to a user of the command); any
    other warning keeps Python's format."""
    own = (osp.abspath(filename).startswith(_PACKAGE_DIR + os.sep)
           or category.__module__.startswith("graph_urpe"))
    if not own:
        return _python_formatwarning(message, category, filename, lineno, line)
    text = " ".join(str(message).split())  # one line
    return f"graph-urpe: warning: {text}\n"


_python_formatwarning = warnings.formatwarning


def quiet_third_party() -> None:
    """Silence third-party messages that say nothing actionable; real warnings stay visible.

    * Lightning's "Tip: ... litlogger" advertisement;
    * Lightning's own ``_pytree`` ``LeafSpec`` deprecation (Lightning's code, not the user's);
    * Lightning's note that a custom batch sampler may drop samples in ``predict``
      (:class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` yields every sample; the tests
      check it);
    * OGB's non-writable NumPy array warning when it converts its cached arrays;
    * Lightning's note that a checkpoint's callbacks are missing, for ``test`` / ``predict`` on a
      checkpoint of ``fit`` (they write no checkpoints, on purpose);
    * Lightning's advice to log epoch metrics with ``sync_dist=True`` under DDP: graph-urpe's
      epoch metrics are computed from rows gathered from every rank
      (:class:`~graph_urpe.models.metrics.EpochPredictions`), every rank logs the same value;

    and prints graph-urpe's own warnings as one line each (:func:`format_warning`).
    """
    warnings.formatwarning = format_warning
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropTips())
    for message in (
        r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        r"You are using a custom batch sampler",
        r"The given NumPy array is not writable",
        r"LightningCLI's args parameter is intended",  # graph-urpe passes argv on purpose
        # predict / test on a checkpoint of fit: its checkpoint callbacks are deliberately absent
        r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint",
        r"It is recommended to use `self\.log\('(val|test)/.*sync_dist=True",  # gathered rows
    ):
        warnings.filterwarnings("ignore", message=message)
