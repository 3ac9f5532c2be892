"""``graph-urpe seeds``: one experiment over N seeds (OGB's rule: 10), then its tables.

::

    graph-urpe seeds --config configs/ogbg-molhiv/graphormer-slim-urpe.yaml --seeds 10
    graph-urpe seeds --config CONFIG --seeds 3 -- --trainer.max_epochs 5   # options for every fit

Runs ``graph-urpe fit ... --seed_everything S`` for ``S = first_seed, ..., first_seed + N - 1``,
one after the other, each in its own process (Lightning's own ``fit``: its run folder, checkpoints,
test and ``leaderboard.json``), then :func:`graph_urpe.cli.collect.main` over the N run folders:
the per-run table with mean ± std, ``seeds.csv`` and ``leaderboard.md`` (test and validation
mean ± std, #params, hardware: the row OGB's submission form asks for) beside the runs. A fit that
fails stops the loop (its exit status is returned); runs already done are kept, and
``--first-seed`` continues from the next seed.
"""

from __future__ import annotations

import argparse
import os.path as osp
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence

from graph_urpe.cli.argv import split_passthrough
from graph_urpe.cli.collect import main as collect_main

__all__ = ["build_parser", "main", "seeds_command"]

_RUN_FOLDER = re.compile(r"^Run folder: (\S+)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-urpe seeds``."""
    parser = argparse.ArgumentParser(
        prog="graph-urpe seeds",
        description="Fit one experiment once per seed, then collect the runs into a table with "
        "mean ± std and the leaderboard row (test, validation, #params, hardware).",
        epilog="Options after `--` are passed to every `graph-urpe fit`.",
    )
    parser.add_argument("--config", action="append", required=True,
                        help="experiment file(s), as for `graph-urpe fit --config`")
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds (default: 10)")
    parser.add_argument("--first-seed", type=int, default=0, help="first seed (default: 0)")
    parser.add_argument("--name", default=None, help="run name (default: the config's)")
    return parser


def _absolute(arg: str) -> str:
    """``arg`` (``VALUE`` or ``--option=VALUE``) with a value that names an existing file made
    absolute; other arguments (shipped configuration names, numbers, options) as they are."""
    key, has_value, value = arg.partition("=")
    if arg.startswith("--") and has_value:
        return f"{key}={_absolute(value)}" if _absolute(value) != value else arg
    if not arg.startswith("-") and osp.isfile(arg):
        return osp.abspath(arg)
    return arg


def seeds_command(fit_args: Sequence[str], seeds: int = 3) -> str | None:
    """The ``graph-urpe seeds`` command that repeats a ``graph-urpe fit`` over ``seeds`` seeds.

    Args:
        fit_args (Sequence[str]): the fit's command line as typed (``fit`` first or not).
        seeds (int, optional): seeds of the printed command. (default: :obj:`3`)

    Returns:
        str or None: ``graph-urpe seeds --seeds N --config C ... -- OPTIONS`` (shell-quoted;
        the fit's ``--config`` files before ``--``, its other options after, ``--seed_everything``,
        ``--version`` and ``--ckpt_path`` left out: each seed is a new run; a value that names an
        existing file, as ``--config my.yaml``, absolute, so the command runs from any folder);
        :obj:`None` for a fit without ``--config`` (``seeds`` needs one).
    """
    args = [_absolute(a) for a in fit_args]
    if args[:1] == ["fit"]:
        args = args[1:]
    configs, rest, i = [], [], 0
    while i < len(args):
        arg = args[i]
        key, has_value, value = arg.partition("=")
        if key in ("--config", "--seed_everything", "--version", "--ckpt_path"):
            if not has_value:
                value, i = (args[i + 1] if i + 1 < len(args) else ""), i + 1
            if key == "--config":
                configs += ["--config", value]
        else:
            rest.append(arg)
        i += 1
    if not configs:
        return None
    return shlex.join(["graph-urpe", "seeds", "--seeds", str(seeds), *configs,
                       *(["--", *rest] if rest else [])])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``graph-urpe seeds`` (see the module docstring).

    Returns:
        int: ``0``; a failing fit's exit status; ``2`` for bad arguments or a fit that printed no
        run folder.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    own, extra = split_passthrough(argv)
    args = build_parser().parse_args(own)
    if args.seeds < 1:
        print(f"graph-urpe seeds: error: --seeds must be >= 1, got {args.seeds}", file=sys.stderr)
        return 2
    fit = [sys.executable, "-m", "graph_urpe.cli", "fit"]
    for config in args.config:
        fit += ["--config", config]
    if args.name:
        fit += ["--name", args.name]
    runs = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        print(f"graph-urpe seeds: seed {seed} ({len(runs) + 1} of {args.seeds})", flush=True)
        proc = subprocess.Popen([*fit, "--seed_everything", str(seed), *extra],
                                stdout=subprocess.PIPE, text=True, bufsize=1)
        run = None
        for line in proc.stdout:
            sys.stdout.write(line)
            match = _RUN_FOLDER.match(line)
            run = match.group(1) if match else run
        if proc.wait():
            print(f"graph-urpe seeds: the fit of seed {seed} failed (exit {proc.returncode}); "
                  f"runs done: {runs or 'none'}; continue with --first-seed {seed}.",
                  file=sys.stderr)
            return proc.returncode
        if run is None:
            print(f"graph-urpe seeds: error: the fit of seed {seed} printed no run folder.",
                  file=sys.stderr)
            return 2
        runs.append(run)
    folder = osp.dirname(osp.normpath(runs[0]))
    return collect_main([*runs, "--markdown", "--out", osp.join(folder, "seeds.csv"),
                         "--leaderboard", osp.join(folder, "leaderboard.md")])
