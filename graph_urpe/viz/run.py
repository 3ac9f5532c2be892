"""All figures of one run folder, redrawn from its files (see :func:`plot_run`)."""

from __future__ import annotations

import warnings
from pathlib import Path

from graph_urpe.choices import check_choice
from graph_urpe.viz._mpl import save
from graph_urpe.viz.curves import learning_curves_figure, read_metrics_csv
from graph_urpe.viz.results import (
    TASK_TYPES,
    confusion_figure,
    infer_task,
    parity_figure,
    read_predictions_csv,
    roc_pr_figure,
)

__all__ = ["find_run_file", "plot_run"]

METRICS_FILE = "metrics.csv"
PREDICTIONS_FILE = "test_predictions.csv"


def find_run_file(run_dir: str | Path, name: str) -> Path | None:
    """``run_dir / name`` if it exists, else the one file of that name below ``run_dir`` (e.g. a
    logger's ``version_N/metrics.csv``), else :obj:`None`.

    Raises:
        ValueError: if several files of that name lie below ``run_dir`` (a folder of several
            runs: the figures would mix them); the message names them.
    """
    run_dir = Path(run_dir)
    direct = run_dir / name
    if direct.is_file():
        return direct
    found = sorted(run_dir.rglob(name))
    if len(found) > 1:
        shown = ", ".join(str(p.parent) for p in found[:4]) + (" ..." if len(found) > 4 else "")
        raise ValueError(f"{run_dir} holds {len(found)} runs' {name} ({shown}): pass one run "
                         "folder, e.g. runs/NAME/version_0.")
    return found[0] if found else None


def plot_run(
    run_dir: str | Path,
    task: str | None = None,
    out_dir: str | Path | None = None,
) -> list[Path]:
    """Draw every figure that a run folder's files allow.

    * ``metrics.csv`` (:mod:`graph_urpe.viz.curves`) -> ``learning_curves.png``;
    * ``test_predictions.csv`` (:mod:`graph_urpe.viz.results`) -> ``parity.png`` (regression),
      ``roc_pr.png`` (classification) or ``confusion.png`` (multi-class).

    Each file is looked up by :func:`find_run_file`. A classification run in which no task has
    both classes in the test set gets no ``roc_pr.png`` (with a warning).

    Args:
        run_dir (str or Path): the run folder.
        task (str, optional): ``"regression"``, ``"classification"`` or ``"multiclass"``;
            :obj:`None` infers it from the predictions
            (:func:`~graph_urpe.viz.results.infer_task`). (default: :obj:`None`)
        out_dir (str or Path, optional): where to write. (default: ``run_dir / "figures"``)

    Returns:
        list[Path]: the files written, in the order above.

    Raises:
        FileNotFoundError: if ``run_dir`` is not a folder or holds neither file.
        ValueError: for an unknown ``task``, malformed files, or a folder of several runs
            (:func:`find_run_file`).
        ImportError: if matplotlib is missing.
    """
    run_dir = Path(run_dir)
    if task is not None:
        check_choice("task", task, TASK_TYPES)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run folder {run_dir} does not exist.")
    out_dir = run_dir / "figures" if out_dir is None else Path(out_dir)
    metrics = find_run_file(run_dir, METRICS_FILE)
    predictions = find_run_file(run_dir, PREDICTIONS_FILE)
    if metrics is None and predictions is None:
        raise FileNotFoundError(
            f"{run_dir} holds neither {METRICS_FILE} nor {PREDICTIONS_FILE}: pass the folder of a "
            "run made by `graph-urpe fit`."
        )
    written = []
    if metrics is not None:
        written.append(
            save(learning_curves_figure(read_metrics_csv(metrics)), out_dir / "learning_curves.png")
        )
    if predictions is not None:
        frame = read_predictions_csv(predictions)
        kind = infer_task(frame) if task is None else task
        if kind == "regression":
            written.append(save(parity_figure(frame), out_dir / "parity.png"))
        elif kind == "multiclass":
            written.append(save(confusion_figure(frame), out_dir / "confusion.png"))
        else:
            try:
                fig = roc_pr_figure(frame)
            except ValueError as err:
                warnings.warn(f"no roc_pr.png: {err}", stacklevel=2)
            else:
                written.append(save(fig, out_dir / "roc_pr.png"))
    return written
