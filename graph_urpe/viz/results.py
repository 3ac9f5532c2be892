"""Test-set figures from a run's ``test_predictions.csv``: parity plots (regression), ROC and
precision-recall curves (binary classification), a confusion matrix (multi-class).

Expected file: a header ``row, smiles`` followed, for each task ``T``, by the columns ``T`` (the
target; empty = missing, read as NaN) and ``T_pred`` (the prediction, in the target's units for
regression, the probability of class 1 in ``[0, 1]`` for classification). One row per test
molecule (node-level runs: one per test node). A task is every column ``T`` that has a partner
``T_pred``; other columns are ignored. A multi-class run has one task whose ``T`` and ``T_pred``
are class indices, followed by ``T_prob_0, T_prob_1, ...`` (class probabilities).

Task type rule (:func:`infer_task`): ``"multiclass"`` when a task has a ``T_prob_0`` column;
else ``"classification"`` when, for every task, all non-missing targets are 0 or 1 and all
non-missing predictions lie in ``[0, 1]``; ``"regression"`` otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from graph_urpe.choices import check_at_least
from graph_urpe.viz._mpl import pyplot, save

__all__ = [
    "TASK_TYPES",
    "confusion_figure",
    "infer_task",
    "parity_figure",
    "plot_parity",
    "plot_roc_pr",
    "prediction_tasks",
    "read_predictions_csv",
    "roc_pr_figure",
]

TASK_TYPES = ("regression", "classification", "multiclass")
PRED_SUFFIX = "_pred"


def read_predictions_csv(path: str | Path) -> pd.DataFrame:
    """Read ``test_predictions.csv`` (format in the module docstring).

    Args:
        path (str or Path): the CSV file.

    Returns:
        pandas.DataFrame: the table; empty target cells are NaN.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file has no ``T`` / ``T_pred`` column pair.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no test predictions at {path} (a run folder holds "
                                "test_predictions.csv after `fit` tested the model).")
    frame = pd.read_csv(path)
    prediction_tasks(frame, source=str(path))
    return frame


def prediction_tasks(frame: pd.DataFrame, source: str = "the table") -> list[str]:
    """Task names of a predictions table: each column ``T`` with a partner ``T_pred``, in order.

    Raises:
        ValueError: if there is no such pair (``source`` names the table in the message).
    """
    cols = set(frame.columns)
    tasks = [
        c for c in frame.columns
        if not c.endswith(PRED_SUFFIX) and f"{c}{PRED_SUFFIX}" in cols
    ]
    if not tasks:
        raise ValueError(
            f"{source} has no target/prediction column pair 'T', 'T_pred' "
            f"(columns: {list(frame.columns)})."
        )
    return tasks


def infer_task(frame: pd.DataFrame) -> str:
    """``"multiclass"``, ``"classification"`` or ``"regression"`` by the rule in the module
    docstring."""
    tasks = prediction_tasks(frame)
    if any(f"{task}_prob_0" in frame.columns for task in tasks):
        return "multiclass"
    for task in tasks:
        y = frame[task].to_numpy(dtype=float)
        p = frame[f"{task}{PRED_SUFFIX}"].to_numpy(dtype=float)
        y, p = y[~np.isnan(y)], p[~np.isnan(p)]
        if not (np.isin(y, (0.0, 1.0)).all() and ((p >= 0) & (p <= 1)).all()):
            return "regression"
    return "classification"


def _pairs(frame: pd.DataFrame, task: str) -> tuple[np.ndarray, np.ndarray]:
    """Targets and predictions of ``task`` where both are finite."""
    y = frame[task].to_numpy(dtype=float)
    p = frame[f"{task}{PRED_SUFFIX}"].to_numpy(dtype=float)
    keep = np.isfinite(y) & np.isfinite(p)
    return y[keep], p[keep]


def _grid(num: int, ncols: int = 4):
    plt = pyplot()
    ncols = min(num, ncols)
    nrows = math.ceil(num / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.8 * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[num:]:
        ax.set_visible(False)
    return fig, axes.flat[:num]


def _shown(tasks: list[str], max_tasks: int) -> tuple[list[str], str]:
    check_at_least(1, max_tasks=max_tasks)
    if len(tasks) <= max_tasks:
        return tasks, ""
    return tasks[:max_tasks], f"first {max_tasks} of {len(tasks)} tasks"


def parity_figure(frame: pd.DataFrame, max_tasks: int = 12):
    """Predicted against true value, one panel per task, with the line ``y = x``.

    Rows with a missing target or prediction are left out. Each panel's title gives the task, the
    mean absolute error ``MAE = mean |p - y|``, the coefficient of determination
    ``R² = 1 - Σ(y - p)² / Σ(y - ȳ)²`` (scikit-learn's ``r2_score``; NaN with fewer than two
    points) and the number of points.

    Args:
        frame (pandas.DataFrame): a predictions table (module docstring).
        max_tasks (int, optional): draw at most this many tasks (the first ones).
            (default: :obj:`12`)

    Returns:
        matplotlib.figure.Figure: panel ``t`` holds one scatter (``collections[0]``, points
        ``(y, p)``) and the ``y = x`` line.

    Raises:
        ValueError: if the table has no task pair or a task has no labelled row.
        ImportError: if matplotlib is missing.
    """
    from sklearn.metrics import mean_absolute_error, r2_score

    tasks, note = _shown(prediction_tasks(frame), max_tasks)
    fig, axes = _grid(len(tasks))
    for ax, task in zip(axes, tasks):
        y, p = _pairs(frame, task)
        if not len(y):
            raise ValueError(f"task {task!r} has no row with both a target and a prediction.")
        mae = mean_absolute_error(y, p)
        r2 = r2_score(y, p) if len(y) > 1 else float("nan")
        ax.scatter(y, p, s=6, alpha=0.5, color="tab:blue", edgecolors="none")
        lo, hi = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
        pad = 0.03 * (hi - lo or 1.0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="black", lw=0.8, ls="--")
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_aspect("equal")
        ax.set_title(f"{task}\nMAE {mae:.4g}, R² {r2:.3f} (n={len(y)})", fontsize=10)
        ax.set_xlabel("true")
        ax.set_ylabel("predicted")
        ax.grid(alpha=0.3)
    if note:
        fig.suptitle(note, fontsize=9)
    fig.tight_layout()
    return fig


def roc_pr_figure(frame: pd.DataFrame, max_tasks: int = 12):
    """ROC and precision-recall curves, one line per task (binary tasks, probabilities).

    Curves come from scikit-learn (``roc_curve`` with every threshold kept,
    ``precision_recall_curve``); the legend gives each task's ROC-AUC (``roc_auc_score``) and
    average precision (``average_precision_score``). Rows with a missing target are left out;
    tasks whose labelled rows hold only one class are skipped and named under the panels.

    Args:
        frame (pandas.DataFrame): a predictions table (module docstring).
        max_tasks (int, optional): draw at most this many tasks (the first with both classes).
            (default: :obj:`12`)

    Returns:
        matplotlib.figure.Figure: panel 0 ROC (line ``t`` is task ``t``'s ``(fpr, tpr)``; the last
        line the chance diagonal), panel 1 precision-recall (line ``t``: ``(recall, precision)``;
        line ``T + t``, dashed: the chance level of task ``t``, its prevalence, i.e. the share of
        positives among its labelled rows, for ``T`` tasks drawn).

    Raises:
        ValueError: if no task has both classes among its labelled rows.
        ImportError: if matplotlib is missing.
    """
    from sklearn.metrics import (
        average_precision_score,
        precision_recall_curve,
        roc_auc_score,
        roc_curve,
    )

    tasks = prediction_tasks(frame)
    usable = [t for t in tasks if len(np.unique(_pairs(frame, t)[0])) == 2]
    skipped = [t for t in tasks if t not in usable]
    if not usable:
        raise ValueError(
            f"no task has both classes among its labelled test rows ({tasks}); ROC and "
            "precision-recall curves are undefined."
        )
    usable, note = _shown(usable, max_tasks)
    plt = pyplot()
    fig, (roc_ax, pr_ax) = plt.subplots(1, 2, figsize=(10, 4.4))
    prevalences = []
    for task in usable:
        y, p = _pairs(frame, task)
        fpr, tpr, _ = roc_curve(y, p, drop_intermediate=False)
        precision, recall, _ = precision_recall_curve(y, p)
        roc_ax.plot(fpr, tpr, lw=1.3, label=f"{task} (AUC {roc_auc_score(y, p):.3f})")
        line, = pr_ax.plot(recall, precision, lw=1.3, drawstyle="steps-post",
                           label=f"{task} (AP {average_precision_score(y, p):.3f})")
        prevalences.append((float(np.mean(y)), line.get_color()))
    # A classifier without skill has precision = the share of positives at every recall.
    # One legend entry for the chance lines: the prevalence itself when there is one task.
    chance = (f"chance (prevalence {prevalences[0][0]:.3f})" if len(prevalences) == 1
              else "chance: each task's prevalence (dashed)")
    for t, (prevalence, color) in enumerate(prevalences):
        pr_ax.axhline(prevalence, color=color, lw=0.8, ls="--", label=chance if t == 0 else None)
    roc_ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--", label="chance")
    roc_ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC",
               xlim=(0, 1), ylim=(0, 1.02))
    pr_ax.set(xlabel="recall", ylabel="precision", title="precision-recall",
              xlim=(0, 1), ylim=(0, 1.02))
    for ax in (roc_ax, pr_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right" if ax is roc_ax else "best")
    notes = [n for n in (note, f"skipped (one class only): {', '.join(skipped)}"
                         if skipped else "") if n]
    if notes:
        fig.text(0.01, -0.02, "; ".join(notes), fontsize=8, va="top")
    fig.tight_layout()
    return fig


def plot_parity(predictions_csv: str | Path, out_path: str | Path, max_tasks: int = 12) -> Path:
    """Write the parity figure (:func:`parity_figure`) of a ``test_predictions.csv``.

    Returns:
        Path: ``out_path``.
    """
    return save(parity_figure(read_predictions_csv(predictions_csv), max_tasks), out_path)


def plot_roc_pr(predictions_csv: str | Path, out_path: str | Path, max_tasks: int = 12) -> Path:
    """Write the ROC / precision-recall figure (:func:`roc_pr_figure`) of a
    ``test_predictions.csv``.

    Returns:
        Path: ``out_path``.
    """
    return save(roc_pr_figure(read_predictions_csv(predictions_csv), max_tasks), out_path)


def confusion_figure(frame: pd.DataFrame):
    """Confusion matrix of a multi-class task: row ``i`` = true class ``i``, column ``j`` =
    predicted class ``j``; cells coloured by the row-normalised share, annotated with counts.

    Classes are ``0 .. K-1`` with ``K - 1`` the largest class seen among the labels and
    predictions (larger classes that never occur are left out). Rows with a missing target are
    left out. The title gives the accuracy (share of the diagonal) and the accuracy of always
    predicting the most frequent true class.

    Args:
        frame (pandas.DataFrame): a multi-class predictions table (module docstring).

    Returns:
        matplotlib.figure.Figure: one panel; ``axes[0].images[0]`` holds the ``[K, K]`` shares.

    Raises:
        ValueError: if the table has no task pair or no labelled row.
        ImportError: if matplotlib is missing.
    """
    task = prediction_tasks(frame)[0]
    y, p = _pairs(frame, task)
    if not len(y):
        raise ValueError(f"task {task!r} has no row with both a target and a prediction.")
    y, p = y.astype(int), p.astype(int)
    # Classes 0 .. the largest seen (a label or a prediction); unseen larger classes are left out.
    k = int(max(y.max(), p.max())) + 1
    counts = np.zeros((k, k), dtype=int)
    np.add.at(counts, (y, p), 1)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    plt = pyplot()
    size = min(2.0 + 0.45 * k, 12.0)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    ticks = np.arange(0, k, max(1, k // 20))  # integer class ticks, at most about 20
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    if k <= 20:
        for i in range(k):
            for j in range(k):
                if counts[i, j]:
                    ax.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=7,
                            color="white" if shares[i, j] > 0.5 else "black")
    accuracy = float(np.trace(counts)) / counts.sum()
    majority = counts.sum(axis=1).max() / counts.sum()
    ax.set(xlabel="predicted class", ylabel="true class",
           title=f"{task}: accuracy {accuracy:.3f} (majority class {majority:.3f}, n={len(y)})")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
    fig.tight_layout()
    return fig
