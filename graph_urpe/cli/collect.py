"""``graph-urpe collect``: the test metrics of several runs in one table, with mean ± std.

::

    graph-urpe collect RUN_DIR... [--out table.csv] [--markdown] [--leaderboard FILE.md]

Results over seeds (as OGB leaderboards ask: 10 runs, mean ± sample std): ``graph-urpe seeds``
(:mod:`graph_urpe.cli.seeds`) runs the fits and calls this; by hand::

    for s in 0 1 2 3 4 5 6 7 8 9; do graph-urpe fit --config CONFIG --seed_everything $s; done
    graph-urpe collect runs/NAME/version_* --markdown --out runs/NAME/seeds.csv \
        --leaderboard runs/NAME/leaderboard.md

Each ``fit`` writes a new ``<trainer.default_root_dir>/<name>/version_<N>`` folder (``name`` from
the config or ``--name``), so the ten runs land side by side. Each ``RUN_DIR`` is a run folder of
``graph-urpe fit``; a folder without ``metrics.csv`` that holds ``version_<N>`` folders (e.g.
``runs/NAME``) stands for all of them, and a quoted glob pattern (``'runs/NAME/version_*'``) is
expanded here as the shell would.

From each run: the test metrics are the ``test/*`` columns of the last row of ``metrics.csv``
(Lightning's ``CSVLogger``) that has any (``fit`` tests the best checkpoint at its end;
``test/num_graphs`` is left out), ``seed_everything`` and ``name`` from its ``config.yaml``, the
version from the folder name, whether its test metric is a leaderboard number (official evaluator,
official data, whole test split) from its ``leaderboard.json``; the notes of the runs that are not
are printed under the table. The printed table has one row per run and a last row
``mean ± std`` over runs (sample standard deviation, ``ddof=1``; a run without a metric is left
out of that metric's statistics; ``std`` is empty for fewer than two values). ``--out`` writes the
same as CSV, numbers only: the runs, then a row whose ``run`` is ``mean`` and one whose ``run`` is
``std``. Runs of one name that share a seed are reported on stderr (their spread understates the
seed-to-seed spread).
"""

from __future__ import annotations

import argparse
import glob
import os.path as osp
import re
import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from graph_urpe.cli.leaderboard import RECORD_FILE, read_record
from graph_urpe.files import OutputError, atomic_write, atomic_write_csv, check_writable
from graph_urpe.models.metrics import METRICS
from graph_urpe.trust import read_run_config

__all__ = ["build_parser", "collect_runs", "expand_run_dirs", "format_table",
           "leaderboard_notes", "leaderboard_table", "main", "read_run", "summarize"]

#: Leading columns of the table (the rest are the test metrics, without the ``test/`` prefix);
#: ``note`` is printed under the table, not in it.
INFO_COLUMNS = ("run", "name", "version", "seed", "leaderboard", "note")

_ORDER = tuple(METRICS)
_SKIPPED = ("test/num_graphs",)


class CollectError(ValueError):
    """A run folder that cannot be read (message names the folder and the fix)."""


def _version_key(path: str) -> tuple:
    match = re.search(r"version_(\d+)$", osp.normpath(path))
    return (osp.dirname(osp.normpath(path)), int(match.group(1)) if match else -1, path)


def expand_run_dirs(paths: Sequence[str]) -> list[str]:
    """The run folders named by ``paths``, in the given order (each expansion by version number).

    Args:
        paths (Sequence[str]): run folders; a folder without ``metrics.csv`` that holds
            ``version_<N>`` folders stands for those that have a ``metrics.csv`` (the others are
            named on stderr and skipped); a pattern with ``*``, ``?`` or ``[`` that
            is not an existing path is expanded with :func:`glob.glob`.

    Returns:
        list[str]: run folders, duplicates removed (first occurrence kept).

    Raises:
        CollectError: if a path does not exist or a pattern matches nothing.
    """
    found: list[str] = []
    for path in paths:
        if not osp.exists(path) and any(c in path for c in "*?["):
            matches = sorted(glob.glob(path), key=_version_key)
            if not matches:
                raise CollectError(f"no run folder matches {path!r}: check the pattern (e.g. "
                                   "runs/NAME/version_*).")
            found += matches
        elif not osp.isdir(path):
            raise CollectError(f"run folder {path!r} does not exist: give folders written by "
                               "`graph-urpe fit` (e.g. runs/NAME/version_0).")
        elif not osp.isfile(osp.join(path, "metrics.csv")) and (
            versions := glob.glob(osp.join(path, "version_*"))
        ):
            runs = sorted((v for v in versions if osp.isdir(v)), key=_version_key)
            # A fit refused before training (bad option, error at setup) leaves a version folder
            # without metrics.csv: not a run to collect.
            for v in runs:
                if not osp.isfile(osp.join(v, "metrics.csv")):
                    print(f"skipped {v}: no metrics.csv (a fit that stopped before training)",
                          file=sys.stderr)
            found += [v for v in runs if osp.isfile(osp.join(v, "metrics.csv"))]
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def read_run(run_dir: str) -> dict[str, object]:
    """One run's identity and test metrics.

    Args:
        run_dir (str): a run folder of ``graph-urpe fit`` (``metrics.csv``, ``config.yaml``).

    Returns:
        dict: ``run`` (str, the folder as given), ``name`` (str or :obj:`None`), ``version``
        (int or :obj:`None`, from ``version_<N>``), ``seed`` (int or :obj:`None`, the config's
        ``seed_everything``), ``leaderboard`` (``"yes"`` / ``"no"``) and ``note`` (why) from its
        ``leaderboard.json`` (:obj:`None` for a run without one), then ``metric -> float`` for each ``test/<metric>`` column of the
        last ``metrics.csv`` row that has a test value (``test/num_graphs`` excluded).

    Raises:
        CollectError: if ``metrics.csv`` is missing or holds no test metrics (a run stopped
            before its test, or fit with ``--test_after_fit false``).
    """
    metrics_path = osp.join(run_dir, "metrics.csv")
    if not osp.isfile(metrics_path):
        raise CollectError(f"{run_dir} has no metrics.csv: give run folders written by "
                           "`graph-urpe fit` (runs/NAME/version_<N>).")
    try:
        metrics = pd.read_csv(metrics_path)
    except pd.errors.EmptyDataError:
        metrics = pd.DataFrame()
    test_cols = [c for c in metrics.columns if c.startswith("test/") and c not in _SKIPPED]
    rows = metrics[test_cols].dropna(how="all") if test_cols else metrics.iloc[0:0]
    if rows.empty:
        raise CollectError(
            f"{metrics_path} holds no test metrics (test/* columns): the run was stopped before "
            "its test or fit with --test_after_fit false; finish it (--ckpt_path last) or leave "
            "it out."
        )
    last = rows.iloc[-1]
    config_path = osp.join(run_dir, "config.yaml")
    config = {}
    if osp.isfile(config_path):  # a run folder may be received: read as data (graph_urpe.trust)
        try:
            config = read_run_config(config_path)
        except ValueError as err:
            raise CollectError(f"{err} (or leave this run out of collect)") from None
    seed = config.get("seed_everything")
    match = re.fullmatch(r"version_(\d+)", osp.basename(osp.normpath(run_dir)))
    result: dict[str, object] = {
        "run": run_dir,
        "name": config.get("name"),
        "version": int(match.group(1)) if match else None,
        "seed": int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None,
    }
    record = read_record(run_dir)
    result["leaderboard"] = None if record is None else ("yes" if record["leaderboard"] else "no")
    result["note"] = None if record is None else record["note"]
    for column in test_cols:
        result[column[len("test/"):]] = float(last[column])
    return result


def _metric_order(name: str) -> tuple[int, str]:
    base = name.split("/", 1)[0]
    rank = _ORDER.index(base) if base in _ORDER else len(_ORDER) + (base == "loss")
    return rank, name


def collect_runs(run_dirs: Sequence[str]) -> pd.DataFrame:
    """The table of :func:`read_run` rows, one per run, in the given order.

    Columns: :data:`INFO_COLUMNS`, then the metrics (MAE, RMSE, R², ROC-AUC, AP first, per-task
    ``metric/<task>`` next to them, the loss last); a metric a run lacks is NaN.

    Raises:
        CollectError: as :func:`read_run`; if ``run_dirs`` is empty.
    """
    if not run_dirs:
        raise CollectError("no run folders given: graph-urpe collect runs/NAME/version_*")
    frame = pd.DataFrame([read_run(d) for d in run_dirs])
    metrics = sorted((c for c in frame.columns if c not in INFO_COLUMNS), key=_metric_order)
    return frame[list(INFO_COLUMNS) + metrics]


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std (``ddof=1``) and count of each metric over the runs of ``frame``.

    Args:
        frame (pandas.DataFrame): a table of :func:`collect_runs`.

    Returns:
        pandas.DataFrame: index ``["mean", "std", "n"]``, one column per metric; NaN values are
        left out, ``std`` is NaN with fewer than two values.
    """
    metrics = frame.drop(columns=list(INFO_COLUMNS))
    return pd.DataFrame({"mean": metrics.mean(), "std": metrics.std(ddof=1),
                         "n": metrics.count()}).T


def _number(value: object, digits: int) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def format_table(frame: pd.DataFrame, *, markdown: bool = False, digits: int = 4) -> str:
    """The runs and a last ``mean ± std`` row, as aligned text or a markdown table.

    Args:
        frame (pandas.DataFrame): a table of :func:`collect_runs`.
        markdown (bool, optional): GitHub markdown instead of aligned text.
            (default: :obj:`False`)
        digits (int, optional): decimals of the metrics. (default: :obj:`4`)
    """
    stats = summarize(frame)
    metrics = list(stats.columns)
    shown = [c for c in INFO_COLUMNS if c != "note"]
    header = shown + metrics
    rows = [[_number(r[c], digits) if c in metrics else ("" if pd.isna(r[c]) else str(r[c]))
             for c in header] for r in frame.to_dict("records")]
    last = [f"mean ± std (n={len(frame)})"] + [""] * (len(shown) - 1)
    for m in metrics:
        mean, std = stats.at["mean", m], stats.at["std", m]
        text = _number(float(mean), digits)
        if np.isfinite(std):
            text += f" ± {std:.{digits}f}"
        last.append(text)
    rows.append(last)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def leaderboard_notes(frame: pd.DataFrame) -> list[str]:
    """One line per distinct leaderboard note of the runs of ``frame`` (with the runs it
    concerns), and one naming the runs that have no ``leaderboard.json``."""
    lines = []
    for note, group in frame.dropna(subset=["note"]).groupby("note", sort=False):
        lines.append(f"{note} ({len(group)} run{'s' * (len(group) > 1)})")
    unknown = frame[frame["note"].isna()]
    if len(unknown):
        lines.append(f"Leaderboard status unknown for {len(unknown)} run(s) without "
                     f"{RECORD_FILE} (written by fit since this version).")
    return lines


def leaderboard_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """The row OGB's leaderboard submission form asks for, as a markdown table: test and
    validation metric (mean ± sample std over the runs), parameter count, hardware and number of
    runs, followed by the leaderboard notes (:func:`leaderboard_notes`).

    Args:
        frame (pandas.DataFrame): a table of :func:`collect_runs` whose runs all have a
            ``leaderboard.json`` (written by ``fit``).
        digits (int, optional): decimals. (default: :obj:`4`)

    Raises:
        CollectError: if a run has no ``leaderboard.json`` or the runs monitor different metrics.
    """
    records = [read_record(str(run)) for run in frame["run"]]
    missing = [str(run) for run, r in zip(frame["run"], records) if r is None]
    if missing:
        raise CollectError(f"{missing[0]} has no {RECORD_FILE}: the leaderboard table needs runs "
                           "of `graph-urpe fit` (this version) that ended with their test.")
    metrics = {r["metric"] for r in records}
    if len(metrics) != 1:
        raise CollectError(f"the runs monitor different metrics {sorted(metrics)}: collect runs "
                           "of one experiment.")
    metric = metrics.pop()
    label = METRICS[metric].label if metric in METRICS else metric
    evaluator = records[0]["evaluator"]

    def spread(values) -> str:
        values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
        if not len(values):
            return ""
        std = f" ± {values.std(ddof=1):.{digits}f}" if len(values) > 1 else ""
        return f"{values.mean():.{digits}f}{std}"

    params = sorted({int(r["parameters"]) for r in records if r.get("parameters") is not None})
    hardware = sorted({r["hardware"] for r in records if r.get("hardware")})
    names = sorted({str(n) for n in frame["name"].dropna()})
    by = f" ({evaluator})" if evaluator else ""
    header = ["method", f"test {label}{by}", f"validation {label}", "#params", "hardware", "runs"]
    row = [", ".join(names) or "-", spread(frame[metric]) if metric in frame else "",
           spread(r.get("valid") for r in records), " / ".join(f"{p:,}" for p in params),
           "; ".join(hardware), str(len(frame))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
             "| " + " | ".join(row) + " |", ""]
    return "\n".join(lines + leaderboard_notes(frame))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-urpe collect``."""
    parser = argparse.ArgumentParser(
        prog="graph-urpe collect",
        description="Collect the test metrics of several `graph-urpe fit` runs (e.g. one per "
        "seed) into one table with mean ± sample std.",
        epilog="N seeds: for s in 0 1 2 3 4 5 6 7 8 9; do graph-urpe fit --config CONFIG "
        "--seed_everything $s; done; then graph-urpe collect runs/NAME/version_*",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="run folders (runs/NAME/version_<N>), a run name's folder "
                        "(runs/NAME: all its versions), or a quoted glob pattern")
    parser.add_argument("--out", default=None,
                        help="also write the table as CSV: the runs, then rows 'mean' and 'std'")
    parser.add_argument("--markdown", action="store_true",
                        help="print a markdown table instead of aligned text")
    parser.add_argument("--digits", type=int, default=4, help="decimals shown (default: 4)")
    parser.add_argument("--leaderboard", default=None, metavar="FILE",
                        help="also print and write to FILE (markdown) the row OGB's leaderboard "
                        "form asks for: test and validation mean ± std, #params, hardware")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``graph-urpe collect`` (see the module docstring).

    Args:
        argv (Sequence[str], optional): the arguments after ``collect``
            (default: ``sys.argv[1:]``).

    Returns:
        int: ``0``, or ``2`` after printing a one-line error (unreadable run, unwritable
        ``--out``).
    """
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.out:
            check_writable(args.out)
        frame = collect_runs(expand_run_dirs(args.run_dirs))
        seeded = frame.dropna(subset=["seed"])
        for (name, seed), group in seeded.groupby(["name", "seed"], dropna=False, sort=True):
            if len(group) > 1:
                print(f"graph-urpe collect: warning: runs {', '.join(group['run'])} of {name!r} "
                      f"share seed {int(seed)}: their spread understates the seed-to-seed "
                      "spread.", file=sys.stderr)
        print(format_table(frame, markdown=args.markdown, digits=args.digits))
        print("\n".join(leaderboard_notes(frame)), file=sys.stderr)
        if args.out:
            tail = summarize(frame).loc[["mean", "std"]].reset_index(names="run")
            ids = frame.astype({"version": "Int64", "seed": "Int64"})
            table = pd.concat([ids, tail], ignore_index=True)
            atomic_write_csv(table, args.out)
            print(f"wrote {args.out}")
        if args.leaderboard:
            check_writable(args.leaderboard)
            text = leaderboard_table(frame, args.digits)
            with atomic_write(args.leaderboard) as handle:
                handle.write(text + "\n")
            print(f"\n{text}\nwrote {args.leaderboard}")
    except (CollectError, OutputError) as err:
        print(f"graph-urpe collect: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
