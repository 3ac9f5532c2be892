"""Learning curves from a run's ``metrics.csv`` (Lightning's :class:`~lightning.pytorch.loggers.CSVLogger`).

Expected file (as ``CSVLogger`` writes it): a header with ``epoch``, ``step`` and one column per
logged name, then one row per logging call with only that call's columns filled (the others empty).
Columns read here, by name:

* **training loss**: the first of ``train/loss_step``, ``train/loss`` or any other ``train/*``
  column whose name contains ``loss``; plotted against ``step``;
* **validation metrics**: every ``val/*`` column whose name does not contain ``loss`` (the
  ``val/*loss*`` columns when there is no other), except counts (``val/num_*``, e.g. the number
  of validation graphs), the classical model's constant ``val/*_classical`` and
  ``val/*_forest`` and the blend's
  ``val/*_blend`` (logged once, at test); plotted against ``epoch``, the last value logged in each
  epoch;
* **learning rate**: every ``lr-*`` column (:class:`~lightning.pytorch.callbacks.LearningRateMonitor`,
  e.g. ``lr-AdamW`` or ``lr-AdamW/pg1``), identical param-group columns drawn once; plotted
  against ``step``.

A missing group leaves its panel out; a file with none of them is an error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from graph_urpe.viz._mpl import pyplot, save

__all__ = [
    "learning_curve_columns",
    "learning_curves_figure",
    "plot_learning_curves",
    "read_metrics_csv",
]


def read_metrics_csv(path: str | Path) -> pd.DataFrame:
    """Read a Lightning ``metrics.csv`` (see the module docstring for the format).

    Args:
        path (str or Path): the CSV file.

    Returns:
        pandas.DataFrame: one row per logging call; empty cells are NaN; ``step`` (and ``epoch``
        when present) as float columns.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file has no ``step`` column (not a Lightning metrics file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no metrics file at {path} (a run folder holds metrics.csv).")
    frame = pd.read_csv(path)
    if "step" not in frame.columns:
        raise ValueError(
            f"{path} has no 'step' column (columns: {list(frame.columns)}); expected the "
            "metrics.csv written by Lightning's CSVLogger."
        )
    return frame


def learning_curve_columns(metrics: pd.DataFrame) -> dict[str, list[str]]:
    """Which columns of ``metrics`` feed each panel (rules in the module docstring).

    Returns:
        dict[str, list[str]]: keys ``"train_loss"`` (at most one column), ``"val"`` and ``"lr"``;
        an empty list where the file has no such column.
    """
    cols = [c for c in metrics.columns if metrics[c].notna().any()]
    train = [c for c in cols if c.startswith("train/") and "loss" in c]
    preferred = [c for c in ("train/loss_step", "train/loss") if c in train]
    train_loss = (preferred or sorted(train))[:1]
    val = [c for c in cols if c.startswith("val/") and not c.startswith("val/num_")
           and not c.endswith(("_classical", "_forest", "_blend"))]  # classical, blend
    val = [c for c in val if "loss" not in c] or val
    lr = _distinct_curves(metrics, [c for c in cols if c.startswith("lr-")])
    return {"train_loss": train_loss, "val": val, "lr": lr}


def _distinct_curves(metrics: pd.DataFrame, columns: list[str]) -> list[str]:
    """``columns`` without those whose ``(step, value)`` curve repeats an earlier one."""
    kept, curves = [], []
    for col in columns:
        curve = metrics.loc[metrics[col].notna(), ["step", col]].to_numpy(dtype=float)
        if not any(curve.shape == seen.shape and np.allclose(curve, seen) for seen in curves):
            kept.append(col)
            curves.append(curve)
    return kept


def _last_per_epoch(metrics: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, values)``: the last non-NaN value of ``column`` logged in each epoch."""
    rows = metrics.loc[metrics[column].notna()]
    x = "epoch" if "epoch" in rows.columns and rows["epoch"].notna().all() else "step"
    last = rows.groupby(x, sort=True)[column].last()
    return last.index.to_numpy(dtype=float), last.to_numpy(dtype=float)


def learning_curves_figure(metrics: pd.DataFrame):
    """Draw the learning curves of a metrics table (one panel per group, see module docstring).

    Args:
        metrics (pandas.DataFrame): as returned by :func:`read_metrics_csv`.

    Returns:
        matplotlib.figure.Figure: panels in the order training loss, validation metrics, learning
        rate (those present). In the training-loss panel the first line is the raw per-step loss,
        the second (with 40 points or more) its running mean over ``len // 20`` points.

    Raises:
        ValueError: if none of the three groups has a column with a value.
        ImportError: if matplotlib is missing.
    """
    groups = learning_curve_columns(metrics)
    panels = [key for key in ("train_loss", "val", "lr") if groups[key]]
    if not panels:
        raise ValueError(
            "metrics has no training loss (train/*loss*), validation metric (val/*) or learning "
            f"rate (lr-*) column with values; columns: {list(metrics.columns)}."
        )
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 3.6), squeeze=False)
    for ax, key in zip(axes[0], panels):
        if key == "train_loss":
            col = groups[key][0]
            rows = metrics.loc[metrics[col].notna(), ["step", col]]
            window = max(1, len(rows) // 20)
            ax.plot(rows["step"], rows[col], color="tab:blue", lw=0.8,
                    alpha=0.35 if window > 1 else 1.0, label=col)
            if window > 1:
                smooth = rows[col].rolling(window, min_periods=1).mean()
                ax.plot(rows["step"], smooth, color="tab:blue", lw=1.6,
                        label=f"running mean of {window}")
            ax.set_xlabel("step")
            ax.set_ylabel("loss")
            ax.set_title("training loss")
        elif key == "val":
            seen = set()
            for col in groups[key]:
                x, y = _last_per_epoch(metrics, col)
                ax.plot(x, y, marker="o", ms=3, label=col)
                seen.update(x.tolist())
            ax.set_xlabel("epoch" if "epoch" in metrics.columns else "step")
            if len(seen) <= 12:  # whole epochs only (one epoch would get fractional ticks)
                ax.set_xticks(sorted(seen))
            else:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel("metric")
            ax.set_title("validation")
        else:
            for col in groups[key]:
                rows = metrics.loc[metrics[col].notna(), ["step", col]]
                ax.plot(rows["step"], rows[col], lw=1.4, label=col)
            ax.set_xlabel("step")
            ax.set_ylabel("learning rate")
            ax.set_title("learning rate")
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_learning_curves(metrics_csv: str | Path, out_path: str | Path) -> Path:
    """Write ``learning_curves.png``-style figure of a Lightning ``metrics.csv``.

    Args:
        metrics_csv (str or Path): the CSV file (format in the module docstring).
        out_path (str or Path): the PNG to write (parent folders are created).

    Returns:
        Path: ``out_path``.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_metrics_csv` and
            :func:`learning_curves_figure`.
        ImportError: if matplotlib is missing.
    """
    return save(learning_curves_figure(read_metrics_csv(metrics_csv)), out_path)
