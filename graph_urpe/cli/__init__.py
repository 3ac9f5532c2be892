"""The ``graph-urpe`` command: training, evaluation and prediction, built on LightningCLI.

Usage::

    graph-urpe fit                                   # URPE-Graphormer on the embedded ZINC-like data
    graph-urpe fit --config zinc/zinc-like-rpe       # a shipped experiment: what differs
    graph-urpe fit --config csv/template --data.init_args.path my.csv   # your own molecules
    graph-urpe fit --name my-run --ckpt_path last    # resume the latest version of run my-run
    graph-urpe test --ckpt_path runs/NAME/version_0/checkpoints/best.ckpt
    graph-urpe predict --ckpt_path CKPT --csv mols.csv --output out.csv
    graph-urpe summarize zinc-like                   # graphs, splits and label statistics
    graph-urpe plot RUN_DIR_OR_CKPT --out DIR        # figures of a run or a checkpoint
    graph-urpe collect runs/NAME/version_*           # test metrics over runs, mean ± std
    graph-urpe seeds --config CONFIG --seeds 10      # 10 fits, their table and leaderboard row

Modules: this one reads the subcommand and imports only what it needs (``graph-urpe --help``
loads neither torch nor Lightning); :mod:`graph_urpe.cli.lightning_cli` holds the LightningCLI
subcommands (``fit``, ``validate``, ``test``, ``predict``), :mod:`graph_urpe.cli.plot` the ``plot``
command, :mod:`graph_urpe.cli.configs` the shipped experiment files that ``--config`` names
without a path, :mod:`graph_urpe.cli.messages` the one-line error messages, :mod:`graph_urpe.cli.help_cache` the
help of the LightningCLI subcommands, shipped with the package or kept after its first call (0.1
CPU s instead of 7-15).
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
import gc
import importlib
import itertools
import os
import sys
import threading

from graph_urpe.cli.help_cache import (
    capture_help,
    help_key,
    help_requested,
    read_help,
    shipped_help,
)
from graph_urpe.cli.messages import quiet_third_party, report_errors

__all__ = ["COMMANDS", "HELP", "SUBCOMMANDS", "main", "program"]

COMMANDS = {
    "summarize": "graph_urpe.cli.summarize",
    "plot": "graph_urpe.cli.plot",
    "collect": "graph_urpe.cli.collect",
    "seeds": "graph_urpe.cli.seeds",
    "hpopt": "graph_urpe.cli.hpopt",
    "fingerprint": "graph_urpe.cli.fingerprint",
    "explain": "graph_urpe.cli.explain",
}
"""The subcommands outside LightningCLI: name -> the module whose ``main(argv)`` runs it (imported
only when that subcommand runs). A new command is one line here and one in :data:`HELP`."""

SUBCOMMANDS = ("fit", "validate", "test", "predict", *COMMANDS)
"""Every subcommand of ``graph-urpe``; the first four are LightningCLI's."""

HELP = """graph-urpe: URPE-Graphormer training, evaluation and prediction (LightningCLI).

subcommands:
  fit        train (one run folder per run), then test the best checkpoint and print a summary
  validate   evaluate a checkpoint on the validation split
  test       evaluate a checkpoint on the test split
  predict    predict SMILES (--csv FILE or --smiles CCO ..., --output) with a checkpoint
  summarize  a dataset's splits and label statistics (graph-urpe summarize --help)
  plot       figures of a run folder or a checkpoint (graph-urpe plot --help)
  collect    test metrics of several runs in one table with mean ± std (graph-urpe collect --help)
  seeds      fit one experiment over N seeds, then collect it and the leaderboard row (--help)
  hpopt      hyperparameter search (Optuna): N fits, bad ones pruned, the best as a config file
  fingerprint  learned molecule embeddings of a checkpoint, CSV or .npz (--help)
  explain    why this prediction: per-atom attributions of a checkpoint, PNG per molecule + CSV

`graph-urpe SUBCOMMAND --help` lists the options of a subcommand; `--model.help CLASS` and
`--data.help CLASS` those of a class (e.g. --model.help graph_urpe.models.GraphPropertyModule).

--config FILE: an experiment file (only what differs from the package's default.yaml). The
experiments shipped with the package are named without a path, e.g. `--config csv/template`
(your own SMILES CSV) or `--config zinc/zinc-like-rpe`; a local file of that name wins.
`graph-urpe fit --config list` lists them.
"""


def unknown_subcommand(name: str) -> str:
    """The one-line message for an unknown subcommand ``name``: all subcommands, and the closest
    one's ``--help`` when ``name`` looks like a typo of it."""
    close = difflib.get_close_matches(name, SUBCOMMANDS, n=1, cutoff=0.6)
    if name.startswith("-"):
        first = f"give a subcommand before the options ({name} came first)"
    else:
        first = f"unknown subcommand {name!r}"
    hint = f"; did you mean `graph-urpe {close[0]} --help`?" if close else ""
    return f"{first}: choose one of {', '.join(SUBCOMMANDS)}{hint}"


def main(args: list[str] | None = None) -> None:
    """The ``graph-urpe`` command as a function (see the module docstring); it returns (or
    raises :class:`SystemExit`) to its caller. The program itself is :func:`program`.

    Args:
        args (list[str], optional): the arguments (default: ``sys.argv[1:]``).

    Raises:
        SystemExit: with status 2 after a user error (one line on stderr), else the status of
            the subcommand.
    """
    _main(args)


def _main(args: list[str] | None, freeze_imports: bool = False) -> None:
    argv = list(sys.argv[1:] if args is None else args)
    # OpenMP threads that busy-wait between parallel regions collapse when the CPU is shared
    # (another job, DDP ranks on one machine): measured 5-10x slower steps on a busy 2-core
    # machine. Passive waiting costs little when the machine is idle. Must be set before torch
    # starts OpenMP; an explicit OMP_WAIT_POLICY in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    quiet_third_party()
    with report_errors(argv):
        code = _dispatch(argv, freeze_imports)
    if code:
        raise SystemExit(code)


def program() -> None:
    """The ``graph-urpe`` program (its console script and ``python -m graph_urpe.cli``):
    :func:`main` on ``sys.argv[1:]``, then the end of the process.

    What it adds to :func:`main`, for the LightningCLI subcommands only (their imports are most
    of a short run's fixed cost; ``benchmarks/README.md`` section 18):

    * those imports run with the cyclic garbage collector paused, and the objects they made are
      then moved out of its reach (:func:`gc.freeze`): its full collections walked all of them
      again and again (about 0.5 M objects; 7 full collections during the imports and 1 after,
      1.2 CPU s of a FreeSolv fit of the CSV template, 1.5 CPU s with the younger generations).
      The cost: the few cycles the imports leave as garbage (about 24 k objects) stay in memory;
    * after the command, the process ends without the interpreter's teardown, which collects and
      frees all of them once more (about 2 CPU s): standard output and error are flushed and
      the ``atexit`` handlers run (Lightning's, logging's, multiprocessing's: what a normal exit
      runs), then :func:`os._exit` with the command's status. Where a non-daemon thread is
      still running, the normal exit (which waits for it) is kept.

    Raises:
        SystemExit: the command's status, where the normal exit is kept.
    """
    try:
        _main(None, freeze_imports=True)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # a traceback: the normal exit
        gc.unfreeze()
        raise
    else:
        code = 0
    if gc.get_freeze_count():  # a LightningCLI subcommand ran
        _end_process(code)
    raise SystemExit(code)


def exit_status(code: object) -> int:
    """The exit status of a process that ends with ``SystemExit(code)``: :obj:`None` 0, an
    integer its low byte, anything else 1 (Python prints it)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def _end_process(code: object) -> None:
    """End the process with ``code`` (as :class:`SystemExit` would read it) without the
    interpreter's teardown (see :func:`program`); return (having undone :func:`gc.freeze`) when
    a non-daemon thread is still running, for the normal exit to wait for it."""
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        gc.unfreeze()
        return
    if code is not None and not isinstance(code, int):  # SystemExit("message"), as Python does
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
    atexit._run_exitfuncs()  # what a normal exit runs before the teardown
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(exit_status(code))


def _dispatch(argv: list[str], freeze_imports: bool = False) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        try:
            print(HELP)
        except BrokenPipeError:  # `graph-urpe --help | head`
            pass
        return 0
    sub = argv[0]
    if sub not in SUBCOMMANDS:
        print(f"graph-urpe: error: {unknown_subcommand(sub)}", file=sys.stderr)
        return 2
    if sub in COMMANDS:
        command = importlib.import_module(COMMANDS[sub])
        return command.main(argv[1:]) or 0
    from graph_urpe.cli.configs import list_configs, resolve_config_args

    if "--config=list" in argv or ("--config", "list") in itertools.pairwise(argv):
        print(list_configs())
        return 0
    resolved = resolve_config_args(argv)
    if help_requested(argv):  # LightningCLI's help: shipped, or kept after the first call
        key = help_key(resolved)
        text = read_help(key)
        if text is None:
            text = shipped_help(resolved)
        if text is not None:
            with contextlib.suppress(BrokenPipeError):
                sys.stdout.write(text)
            return 0
        with capture_help(key):
            _run_lightning(resolved, argv)
        return 0
    _run_lightning(resolved, argv, freeze_imports)
    return 0


def _run_lightning(resolved: list[str], argv: list[str], freeze_imports: bool = False) -> None:
    collecting = gc.isenabled()
    if freeze_imports:  # see program()
        gc.disable()
    try:
        from graph_urpe.cli.lightning_cli import run
    finally:
        if freeze_imports:
            gc.freeze()
            if collecting:
                gc.enable()

    run(resolved, user_args=argv)

