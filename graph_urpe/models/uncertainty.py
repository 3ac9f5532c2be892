"""How much a test metric could vary with the test molecules: a bootstrap confidence interval.

On a small test split the metric of one run is itself uncertain: 65 test molecules (FreeSolv's
scaffold split) give a MAE whose 95 % interval is about +-20 % wide. :func:`bootstrap_interval`
resamples the test rows with replacement (:func:`scipy.stats.bootstrap`, paired: a resample keeps
each row's prediction with its label) and recomputes the metric each time with the same functions
as the epoch metrics (:func:`~graph_urpe.models.metrics.epoch_metrics`,
:func:`~graph_urpe.models.metrics.multiclass_metrics`). It says nothing of the spread over training
seeds: ``graph-urpe seeds`` measures that.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy.stats import DegenerateDataWarning, bootstrap
from torch import Tensor

from graph_urpe.models.metrics import epoch_metrics, multiclass_metrics

__all__ = ["MAX_BOOTSTRAP_CELLS", "bootstrap_interval"]

MAX_BOOTSTRAP_CELLS = 20_000
"""Largest ``rows x label columns`` bootstrapped (the summary skips larger test splits: there the
interval is narrow and 1,000 recomputations of every task's metric would cost minutes)."""


def bootstrap_interval(pred: Tensor, target: Tensor, task: str, metric: str,
                       n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
                       ) -> tuple[float, float] | None:
    r"""Percentile bootstrap interval of a test metric over the test rows.

    Args:
        pred (Tensor): ``[R, T]`` predictions in the labels' units (classification: scores or
            logits; multiclass: ``[R, C]`` logits).
        target (Tensor): ``[R, T]`` labels, NaN = missing (multiclass: ``[R, 1]`` class ids).
        task (str): ``"regression"``, ``"classification"`` or ``"multiclass"``.
        metric (str): a key of the task's metrics (``"mae"``, ``"rocauc"``, ``"accuracy"``, ...).
        n_resamples (int, optional): bootstrap resamples. (default: :obj:`1000`)
        confidence (float, optional): the interval's level. (default: :obj:`0.95`)
        seed (int, optional): the resampling's random seed (deterministic). (default: :obj:`0`)

    Returns:
        tuple[float, float] or None: ``(low, high)`` in the metric's units; :obj:`None` when it is
        undefined: fewer than 2 rows, the metric is NaN on the split (no labels, one class only) or
        on some resample (e.g. a resample without both classes).

    Raises:
        KeyError: for a metric the task does not compute.
    """
    pred, target = pred.detach().float().cpu(), target.detach().float().cpu()
    rows = pred.shape[0]

    def value(idx) -> float:
        idx = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        if task == "multiclass":
            return multiclass_metrics(pred[idx], target[idx, :1])[metric]
        return epoch_metrics(pred[idx], target[idx], task)[metric]

    if rows < 2 or not np.isfinite(value(np.arange(rows))):
        return None
    with warnings.catch_warnings():  # a NaN resample is reported by returning None
        warnings.simplefilter("ignore", DegenerateDataWarning)
        result = bootstrap((np.arange(rows),), value, n_resamples=n_resamples, vectorized=False,
                           confidence_level=confidence, method="percentile",
                           rng=np.random.default_rng(seed))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return (low, high) if np.isfinite(low) and np.isfinite(high) else None
